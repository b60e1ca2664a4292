#include "generate/batch_engine.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "generate/text_stream.hpp"

namespace megatron::generate {

// One sequence of a running request.
struct BatchSequence {
  Sequence s;
  Sampling sampling;
  Rng rng{0};
  std::vector<int32_t> blocks;  // its pool blocks, in position order
  int64_t fed = 0;              // positions whose keys and values are in the pool
  int64_t limit = 0;            // positions it may reach
  std::string text;             // its generated text, kept as it grows when something reads it
};

struct BatchEngine::Request {
  int64_t id = 0;
  BatchRequest r;
  LoopOptions loop;
  std::vector<BatchSequence> seqs;
  bool text_each_step = false;
};

namespace {

// Positions a sequence may reach: its prompt and max_tokens more, within the model's.
int64_t limit_of(int64_t prompt, int64_t max_tokens, int64_t max_positions) {
  return max_tokens >= max_positions - prompt ? max_positions : prompt + max_tokens;
}

int64_t blocks_of(int64_t positions, int64_t block_size) { return (positions + block_size - 1) / block_size; }

void end_sequence(Sequence& s, const char* reason) {
  s.done = true;
  s.finish_reason = reason;
}

}  // namespace

BatchEngine::BatchEngine(const Engine& e, BatchOptions o) : e_(e), o_(o) {
  if (o_.block_size < 1 || o_.blocks < 1 || o_.max_sequences < 1) {
    throw std::invalid_argument("BatchEngine: the pool needs blocks of at least one position");
  }
  o_.step_tokens = std::max(o_.step_tokens, o_.max_sequences);
  pool_ = e_.model.make_pool(e_.backend, o_.blocks, o_.block_size);
  free_.resize(size_t(o_.blocks));
  for (int64_t i = 0; i < o_.blocks; ++i) free_[size_t(i)] = int32_t(o_.blocks - 1 - i);  // 0 first
}

BatchEngine::~BatchEngine() = default;

int64_t BatchEngine::blocks_for(const BatchRequest& r) const {
  int64_t n = 0;
  for (const auto& p : r.prompts) {
    n += blocks_of(limit_of(int64_t(p.size()), r.options.max_tokens, e_.max_positions), o_.block_size);
  }
  return n;
}

void BatchEngine::add(int64_t id, BatchRequest r) {
  if (r.prompts.empty()) throw std::invalid_argument("a request without prompts");
  for (const auto& p : r.prompts) {
    const int64_t n = int64_t(p.size());
    if (n == 0 || n > e_.max_positions || (n == e_.max_positions && r.options.max_tokens > 0)) {
      throw std::invalid_argument("a prompt is empty or does not fit the model's positions");
    }
    for (const int32_t t : p) {
      if (t < 0 || t >= e_.vocab) throw std::invalid_argument("a prompt token is outside the vocabulary");
    }
  }
  if (blocks_for(r) > o_.blocks || int64_t(r.prompts.size()) > o_.max_sequences) {
    throw std::invalid_argument("the request needs more key/value blocks or sequences than the server has");
  }
  auto q = std::make_unique<Request>();
  q->id = id;
  const GenerateOptions& g = r.options;
  std::vector<int32_t> end_tokens = g.end_tokens;
  if (g.eod) end_tokens.insert(end_tokens.begin(), *g.eod);
  q->loop = {.max_tokens = g.max_tokens,
             .max_positions = e_.max_positions,
             .sampling = g.sampling,
             .top_p_decay = g.top_p_decay,
             .top_p_bound = g.top_p_bound,
             .seed = g.seed,
             .rng_per_sequence = true,
             .end_tokens = std::move(end_tokens),
             .stop_tokens = g.stop_tokens,
             .logprobs = g.logprobs,
             .top_logprobs = g.top_logprobs};
  q->text_each_step = !g.stop.empty() || bool(r.on_text);
  for (size_t i = 0; i < r.prompts.size(); ++i) {
    BatchSequence s;
    const int64_t n = int64_t(r.prompts[i].size());
    s.s = {.tokens = r.prompts[i], .prompt = n, .position = n};
    s.sampling = g.sampling;
    s.rng = Rng(g.seed + uint64_t(i));
    s.limit = limit_of(n, g.max_tokens, e_.max_positions);
    q->seqs.push_back(std::move(s));
  }
  q->r = std::move(r);
  waiting_.push_back(std::move(q));
}

namespace {

Finished results_of(const Engine& e, int64_t id, std::vector<BatchSequence>& seqs, bool text_kept) {
  Finished f{.id = id, .results = {}};
  for (BatchSequence& q : seqs) {
    Sequence& s = q.s;
    std::string text = text_kept ? std::move(q.text)
                                 : e.tokenizer.decode(std::span<const int32_t>(s.tokens).subspan(size_t(s.prompt)));
    f.results.push_back({.tokens = std::move(s.tokens),
                         .prompt_tokens = s.prompt,
                         .text = std::move(text),
                         .logprobs = std::move(s.logprobs),
                         .top_logprobs = std::move(s.top_logprobs),
                         .finish_reason = std::move(s.finish_reason)});
  }
  return f;
}

}  // namespace

void BatchEngine::cancel(int64_t id) {
  const auto cancelled = [&](std::unique_ptr<Request>& q) {
    for (BatchSequence& s : q->seqs) {
      free_.insert(free_.end(), s.blocks.rbegin(), s.blocks.rend());
      s.blocks.clear();
      end_sequence(s.s, "cancelled");
    }
    ended_.push_back(results_of(e_, q->id, q->seqs, q->text_each_step));
  };
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
    if ((*it)->id == id) {
      cancelled(*it);
      waiting_.erase(it);
      return;
    }
  }
  for (auto it = running_.begin(); it != running_.end(); ++it) {
    if ((*it)->id == id) {
      cancelled(*it);
      running_.erase(it);
      return;
    }
  }
}

std::vector<Finished> BatchEngine::step() {
  std::vector<Finished> out = std::move(ended_);
  ended_.clear();
  // Admit in arrival order while the next one fits.
  int64_t sequences = 0;
  for (const auto& q : running_) sequences += int64_t(q->seqs.size());
  while (!waiting_.empty()) {
    Request& q = *waiting_.front();
    if (blocks_for(q.r) > int64_t(free_.size()) || sequences + int64_t(q.seqs.size()) > o_.max_sequences) break;
    for (BatchSequence& s : q.seqs) {
      for (int64_t b = blocks_of(s.limit, o_.block_size); b > 0; --b) {
        s.blocks.push_back(free_.back());
        free_.pop_back();
      }
    }
    sequences += int64_t(q.seqs.size());
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
  if (running_.empty()) return out;

  // The rows: one for every sequence with a single token to feed (decoding), then prompt chunks
  // in arrival order while the step has room.
  struct Use {
    Request* q;
    size_t i;      // the sequence in its request
    bool choose;   // the row chooses the sequence's next token
    int64_t score = -1;  // else: the prompt token whose log-probability it gives
  };
  std::vector<int32_t> tokens;
  model::PagedRows rows;
  std::vector<std::pair<BatchSequence*, int64_t>> fed;  // how many rows each sequence feeds
  std::vector<Use> uses;
  std::vector<int32_t> logit_rows;
  int64_t max_blocks = 1;
  for (const auto& q : running_) {
    for (const BatchSequence& s : q->seqs) max_blocks = std::max<int64_t>(max_blocks, int64_t(s.blocks.size()));
  }
  int64_t room = o_.step_tokens;
  const auto feed = [&](Request& q, size_t i, int64_t count) {
    BatchSequence& s = q.seqs[i];
    const int64_t known = int64_t(s.s.tokens.size());
    for (int64_t p = s.fed; p < s.fed + count; ++p) {
      const bool last = p == known - 1;
      const bool choose = last && s.s.chosen < q.loop.max_tokens;
      const bool score = q.loop.logprobs && p + 1 < s.s.prompt;
      if (choose || score) {
        logit_rows.push_back(int32_t(tokens.size()));
        uses.push_back({.q = &q, .i = i, .choose = choose, .score = score ? p + 1 : -1});
      }
      tokens.push_back(s.s.tokens[size_t(p)]);
      rows.positions.push_back(int32_t(p));
      for (int64_t b = 0; b < max_blocks; ++b) {
        rows.block_tables.push_back(b < int64_t(s.blocks.size()) ? s.blocks[size_t(b)] : s.blocks[0]);
      }
    }
    fed.emplace_back(&s, count);
    room -= count;
  };
  for (int pass = 0; pass < 2; ++pass) {
    for (const auto& q : running_) {
      for (size_t i = 0; i < q->seqs.size(); ++i) {
        const BatchSequence& s = q->seqs[i];
        const int64_t left = int64_t(s.s.tokens.size()) - s.fed;
        if (s.s.done || left <= 0 || (pass == 0) != (left == 1)) continue;
        const int64_t count = pass == 0 ? 1 : std::min(left, room);
        if (count > 0) feed(*q, i, count);
      }
    }
  }
  rows.max_blocks = max_blocks;

  const int64_t vocab = e_.vocab;
  e_.model.decode_paged(
      e_.backend, tokens, rows, pool_, logit_rows, vocab,
      [&](int64_t first, std::span<const float> chunk) {
        const int64_t count = int64_t(chunk.size()) / vocab;
        for (int64_t k = 0; k < count; ++k) {
          const Use& u = uses[size_t(first + k)];
          const auto row = chunk.subspan(size_t(k * vocab), size_t(vocab));
          Request& q = *u.q;
          BatchSequence& s = q.seqs[u.i];
          if (u.score >= 0) {
            s.s.logprobs.push_back(log_probability(row, s.s.tokens[size_t(u.score)]));
            if (q.loop.top_logprobs > 0) s.s.top_logprobs.push_back(top_log_probabilities(row, q.loop.top_logprobs));
          }
          if (!u.choose) continue;
          const int32_t token = sample(row, s.sampling, s.rng);
          s.s.position = int64_t(s.s.tokens.size());
          const OnChosen on_chosen = [&](size_t i, const Sequence& seq) {
            ++generated_;
            if (!q.text_each_step) return false;
            BatchSequence& owner = q.seqs[i];
            owner.text = e_.tokenizer.decode(std::span<const int32_t>(seq.tokens).subspan(size_t(seq.prompt)));
            const bool cut = cut_at_stop(owner.text, q.r.options.stop);
            if (q.r.on_text) q.r.on_text(i, owner.text);
            return cut;
          };
          take_token(q.loop, on_chosen, u.i, row, token, s.s);
          if (!s.s.done && s.s.position >= s.limit) end_sequence(s.s, "length");
          if (q.loop.top_p_decay > 0.0 && s.sampling.top_p > 0.0) {
            s.sampling.top_p = std::max(s.sampling.top_p * q.loop.top_p_decay, q.loop.top_p_bound);
          }
        }
      });
  for (auto& [s, count] : fed) s->fed += count;
  // A sequence that only scores its prompt ends once the prompt is read.
  for (const auto& q : running_) {
    for (BatchSequence& s : q->seqs) {
      if (!s.s.done && s.fed == int64_t(s.s.tokens.size()) && s.s.chosen >= q->loop.max_tokens) {
        end_sequence(s.s, "length");
      }
    }
  }
  for (auto it = running_.begin(); it != running_.end();) {
    Request& q = **it;
    if (!std::all_of(q.seqs.begin(), q.seqs.end(), [](const BatchSequence& s) { return s.s.done; })) {
      ++it;
      continue;
    }
    for (BatchSequence& s : q.seqs) {
      free_.insert(free_.end(), s.blocks.rbegin(), s.blocks.rend());
      s.blocks.clear();
    }
    out.push_back(results_of(e_, q.id, q.seqs, q.text_each_step));
    it = running_.erase(it);
  }
  return out;
}

bool BatchEngine::idle() const { return waiting_.empty() && running_.empty() && ended_.empty(); }
int64_t BatchEngine::waiting() const { return int64_t(waiting_.size()); }
int64_t BatchEngine::running() const { return int64_t(running_.size()); }
int64_t BatchEngine::blocks() const { return o_.blocks; }
int64_t BatchEngine::blocks_used() const { return o_.blocks - int64_t(free_.size()); }
int64_t BatchEngine::generated() const { return generated_; }
int64_t BatchEngine::pool_bytes() const {
  int64_t bytes = 0;
  for (const model::LayerCache& layer : pool_.layers) bytes += layer.k.bytes() + layer.v.bytes();
  return bytes;
}

}  // namespace megatron::generate
