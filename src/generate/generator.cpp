#include "generate/generator.hpp"

#include <algorithm>
#include <chrono>
#include <span>
#include <stdexcept>
#include <utility>

#include "generate/decode_loop.hpp"
#include "generate/text_stream.hpp"

namespace megatron::generate {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The model one position further with its key/value cache, Megatron's static batch: the prefill
// runs every prompt up to the shortest, then each step feeds every sequence's token at the common
// position (a finished one repeats its last token, harmlessly: its row is not read).
class CachedStep final : public Stepper {
 public:
  CachedStep(const Engine& e, model::KvCache& cache, GenerateStats& stats)
      : e_(e), cache_(cache), stats_(stats) {}

  // Positions 0..shortest-1 of every sequence; with logprobs every row's logits score the prompt
  // (into the sequences), else only the last row's are needed. The first step returns its rows.
  void prefill(std::vector<Sequence>& seqs, int64_t shortest, bool logprobs, int64_t top_logprobs) {
    const auto begin = Clock::now();
    const int64_t batch = int64_t(seqs.size()), vocab = e_.vocab;
    std::vector<int32_t> tokens, rows;
    for (int64_t b = 0; b < batch; ++b) {
      tokens.insert(tokens.end(), seqs[size_t(b)].tokens.begin(),
                    seqs[size_t(b)].tokens.begin() + shortest);
      for (int64_t t = logprobs ? 0 : shortest - 1; t < shortest; ++t) {
        rows.push_back(int32_t(b * shortest + t));
      }
    }
    const int64_t per_seq = int64_t(rows.size()) / batch;
    logits_.resize(size_t(batch * vocab));
    // Rows arrive a chunk at a time, in order (b * per_seq + t): each prompt row is reduced to
    // its token's log-probability at once and only each sequence's last row is kept, so a
    // request scoring many long prompts never holds their whole-vocabulary logits.
    e_.model.decode_by_chunk(
        e_.backend, tokens, shortest, 0, cache_, rows, vocab,
        [&](int64_t first, std::span<const float> chunk) {
          const int64_t count = int64_t(chunk.size()) / vocab;
          for (int64_t i = 0; i < count; ++i) {
            const int64_t b = (first + i) / per_seq, t = (first + i) % per_seq;
            const auto row = chunk.subspan(size_t(i * vocab), size_t(vocab));
            if (t + 1 == per_seq) {
              std::copy(row.begin(), row.end(), logits_.begin() + b * vocab);
              continue;
            }
            Sequence& s = seqs[size_t(b)];  // with logprobs: the prompt's own tokens
            s.logprobs.push_back(log_probability(row, s.tokens[size_t(t + 1)]));
            if (top_logprobs > 0) s.top_logprobs.push_back(top_log_probabilities(row, top_logprobs));
          }
        });
    pos_ = shortest;
    pending_ = true;
    stats_.prefill_tokens += batch * shortest;
    stats_.prefill_s += seconds_since(begin);
  }

  StepScores step(std::span<const Sequence> seqs, std::span<const size_t> live) override {
    const int64_t batch = int64_t(seqs.size()), vocab = e_.vocab;
    if (!pending_) {
      const auto begin = Clock::now();
      std::vector<int32_t> tokens(static_cast<size_t>(batch)), rows(static_cast<size_t>(batch));
      for (int64_t b = 0; b < batch; ++b) {
        const Sequence& s = seqs[size_t(b)];
        tokens[size_t(b)] =
            int64_t(s.tokens.size()) > pos_ ? s.tokens[size_t(pos_)] : s.tokens.back();
        rows[size_t(b)] = int32_t(b);
      }
      logits_ = e_.model.decode(e_.backend, tokens, 1, pos_, cache_, rows, vocab);
      ++pos_;
      ++stats_.decode_steps;
      stats_.decode_s += seconds_since(begin);
    }
    pending_ = false;
    StepScores out;
    if (live.size() == size_t(batch)) {  // every row: hand the step's logits over, no copy
      out.logits = std::move(logits_);
      return out;
    }
    out.logits.reserve(live.size() * size_t(vocab));
    for (const size_t b : live) {
      out.logits.insert(out.logits.end(), logits_.begin() + int64_t(b) * vocab,
                        logits_.begin() + int64_t(b + 1) * vocab);
    }
    return out;
  }

 private:
  const Engine& e_;
  model::KvCache& cache_;
  GenerateStats& stats_;
  std::vector<float> logits_;  // [batch, vocab]: the distribution of each sequence's next token
  int64_t pos_ = 0;            // the position the next step feeds
  bool pending_ = false;       // the prefill's rows are the first step's
};

// The tokens sequence s generated, as text.
std::string generated_text(const Engine& e, const Sequence& s) {
  return e.tokenizer.decode(std::span<const int32_t>(s.tokens).subspan(size_t(s.prompt)));
}

}  // namespace

std::vector<Generated> generate(const Engine& e, const std::vector<std::vector<int32_t>>& prompts,
                                const GenerateOptions& o, const OnText& on_text,
                                GenerateStats* stats) {
  if (prompts.empty()) return {};
  std::vector<Sequence> seqs(prompts.size());
  int64_t shortest = e.max_positions, longest = 0;
  for (size_t b = 0; b < prompts.size(); ++b) {
    const int64_t n = int64_t(prompts[b].size());
    if (n == 0 || n > e.max_positions || (n == e.max_positions && o.max_tokens > 0)) {
      throw std::invalid_argument("a prompt is empty or does not fit the model's positions");
    }
    for (const int32_t t : prompts[b]) {
      if (t < 0 || t >= e.vocab) throw std::invalid_argument("a prompt token is outside the vocabulary");
    }
    seqs[b] = {.tokens = prompts[b], .prompt = n};
    shortest = std::min(shortest, n);
    longest = std::max(longest, n);
  }
  for (Sequence& s : seqs) s.position = shortest;  // the prefill's last rows are for it
  const int64_t batch = int64_t(seqs.size());
  // A sequence's positions: its prompt and max_tokens more, within the model's (max_tokens may be
  // anything a client sends: compared, never added past the model's positions).
  const int64_t limit = o.max_tokens >= e.max_positions - longest ? e.max_positions
                                                                  : longest + o.max_tokens;
  // Decoding the text as it grows costs a pass over it per token: only for stop strings and
  // listeners; otherwise once at the end.
  const bool text_each_step = !o.stop.empty() || bool(on_text);
  model::KvCache cache = e.model.make_cache(e.backend, batch, limit);
  GenerateStats local;
  GenerateStats& st = stats ? *stats : local;
  int64_t cache_bytes = 0;
  for (const model::LayerCache& layer : cache.layers) cache_bytes += layer.k.bytes() + layer.v.bytes();
  if (cache_bytes > st.kv_cache_bytes) {
    st.kv_cache_bytes = cache_bytes;
    st.kv_cache_sequences = batch;
    st.kv_cache_positions = limit;
  }

  CachedStep stepper(e, cache, st);
  stepper.prefill(seqs, shortest, o.logprobs, o.top_logprobs);
  std::vector<std::string> texts(seqs.size());
  const OnChosen on_chosen = [&](size_t b, const Sequence& s) {
    ++st.decode_tokens;
    if (!text_each_step) return false;
    std::string& text = texts[b];
    text = generated_text(e, s);
    const bool cut = cut_at_stop(text, o.stop);
    if (on_text) on_text(b, text);
    return cut;
  };
  std::vector<int32_t> end_tokens = o.end_tokens;
  if (o.eod) end_tokens.insert(end_tokens.begin(), *o.eod);
  decode(stepper, seqs,
         {.max_tokens = o.max_tokens,
          .max_positions = limit,
          .sampling = o.sampling,
          .top_p_decay = o.top_p_decay,
          .top_p_bound = o.top_p_bound,
          .seed = o.seed,
          .end_tokens = end_tokens,
          .stop_tokens = o.stop_tokens,
          .logprobs = o.logprobs,
          .top_logprobs = o.top_logprobs,
          .cancelled = o.cancelled},
         on_chosen);

  std::vector<Generated> out;
  for (size_t b = 0; b < seqs.size(); ++b) {
    Sequence& s = seqs[b];
    std::string text = text_each_step ? std::move(texts[b]) : generated_text(e, s);
    out.push_back({.tokens = std::move(s.tokens),
                   .prompt_tokens = s.prompt,
                   .text = std::move(text),
                   .logprobs = std::move(s.logprobs),
                   .top_logprobs = std::move(s.top_logprobs),
                   .finish_reason = std::move(s.finish_reason)});
  }
  return out;
}

}  // namespace megatron::generate
