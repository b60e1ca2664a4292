#include "generate/generator.hpp"

#include <algorithm>
#include <chrono>
#include <span>
#include <stdexcept>

namespace megatron::generate {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

struct Sequence {
  std::vector<int32_t> tokens;
  int64_t prompt = 0;
  int64_t generated = 0;
  bool done = false;
  Generated out;
};

// Records the log-probabilities of `token` under `logits` when asked.
void record(const GenerateOptions& o, std::span<const float> logits, int32_t token, Generated& g) {
  if (!o.logprobs) return;
  g.logprobs.push_back(log_probability(logits, token));
  if (o.top_logprobs > 0) g.top_logprobs.push_back(top_log_probabilities(logits, o.top_logprobs));
}

// The tokens sequence s generated, as text.
std::string generated_text(const Engine& e, const Sequence& s) {
  return e.tokenizer.decode(std::span<const int32_t>(s.tokens).subspan(size_t(s.prompt)));
}

// After sequence s took a sampled token: whether it stops, and (when `text`: stop strings or a
// listener need it every step) its text.
void after_sample(const Engine& e, const GenerateOptions& o, int64_t limit, bool text, Sequence& s) {
  const int32_t token = s.tokens.back();
  const bool eod = o.eod && token == *o.eod;
  if (eod) {  // it ends the text rather than being part of it
    s.tokens.pop_back();
    if (!s.out.logprobs.empty()) s.out.logprobs.pop_back();
    if (!s.out.top_logprobs.empty()) s.out.top_logprobs.pop_back();
  }
  if (text) s.out.text = generated_text(e, s);
  if (eod || std::find(o.stop_tokens.begin(), o.stop_tokens.end(), token) != o.stop_tokens.end()) {
    s.done = true;
    s.out.finish_reason = "stop";
  }
  size_t cut = std::string::npos;
  for (const std::string& stop : o.stop) {
    if (!stop.empty()) cut = std::min(cut, s.out.text.find(stop));
  }
  if (cut != std::string::npos) {
    s.out.text.resize(cut);
    s.done = true;
    s.out.finish_reason = "stop";
  }
  if (!s.done && (s.generated >= o.max_tokens || int64_t(s.tokens.size()) >= limit)) {
    s.done = true;
    s.out.finish_reason = "length";
  }
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
    seqs[b].tokens = prompts[b];
    seqs[b].prompt = n;
    seqs[b].out.prompt_tokens = n;
    shortest = std::min(shortest, n);
    longest = std::max(longest, n);
  }
  const int64_t batch = int64_t(seqs.size());
  // A sequence's positions: its prompt and max_tokens more, within the model's (max_tokens may be
  // anything a client sends: compared, never added past the model's positions).
  const int64_t limit = o.max_tokens >= e.max_positions - longest ? e.max_positions
                                                                  : longest + o.max_tokens;
  // Decoding the text as it grows costs a pass over it per token: only for stop strings and
  // listeners; otherwise once at the end.
  const bool text_each_step = !o.stop.empty() || bool(on_text);
  model::KvCache cache = e.model.make_cache(e.backend, batch, limit);
  Rng rng(o.seed);
  Sampling sampling = o.sampling;
  GenerateStats local;
  GenerateStats& st = stats ? *stats : local;
  int64_t cache_bytes = 0;
  for (const model::LayerCache& layer : cache.layers) cache_bytes += layer.k.bytes() + layer.v.bytes();
  if (cache_bytes > st.kv_cache_bytes) {
    st.kv_cache_bytes = cache_bytes;
    st.kv_cache_sequences = batch;
    st.kv_cache_positions = limit;
  }

  // Prefill: positions 0..shortest-1 of every sequence. With logprobs every row's logits score
  // the prompt; else only the last row's are needed.
  const int64_t vocab = e.vocab;
  std::vector<float> logits;  // [batch, vocab]: the distribution of each sequence's next token
  {
    const auto begin = Clock::now();
    std::vector<int32_t> tokens, rows;
    for (int64_t b = 0; b < batch; ++b) {
      tokens.insert(tokens.end(), seqs[size_t(b)].tokens.begin(),
                    seqs[size_t(b)].tokens.begin() + shortest);
      for (int64_t t = o.logprobs ? 0 : shortest - 1; t < shortest; ++t) {
        rows.push_back(int32_t(b * shortest + t));
      }
    }
    std::vector<float> all = e.model.decode(e.backend, tokens, shortest, 0, cache, rows, vocab);
    const int64_t per_seq = int64_t(rows.size()) / batch;
    logits.resize(size_t(batch * vocab));
    for (int64_t b = 0; b < batch; ++b) {
      Sequence& s = seqs[size_t(b)];
      for (int64_t t = 0; t + 1 < per_seq; ++t) {  // with logprobs: the prompt's own tokens
        record(o, std::span(all).subspan(size_t((b * per_seq + t) * vocab), size_t(vocab)),
               s.tokens[size_t(t + 1)], s.out);
      }
      std::copy_n(all.begin() + (b * per_seq + per_seq - 1) * vocab, vocab,
                  logits.begin() + b * vocab);
    }
    st.prefill_tokens += batch * shortest;
    st.prefill_s += seconds_since(begin);
  }

  for (int64_t pos = shortest; pos < limit; ++pos) {
    // Position pos of each sequence: its prompt's token, or a sampled one.
    bool any_active = false;
    std::vector<size_t> grew;
    for (int64_t b = 0; b < batch; ++b) {
      Sequence& s = seqs[size_t(b)];
      const std::span<const float> row(logits.data() + b * vocab, size_t(vocab));
      if (pos < s.prompt) {
        record(o, row, s.tokens[size_t(pos)], s.out);
        any_active = true;
        continue;
      }
      if (s.done) continue;
      if (o.max_tokens == 0) {
        s.done = true;
        s.out.finish_reason = "length";
        continue;
      }
      const int32_t token = sample(row, sampling, rng);
      record(o, row, token, s.out);
      s.tokens.push_back(token);
      ++s.generated;
      ++st.decode_tokens;
      after_sample(e, o, limit, text_each_step, s);
      grew.push_back(size_t(b));
      if (!s.done) any_active = true;
    }
    if (on_text) {
      for (const size_t b : grew) on_text(b, seqs[b].out.text);
    }
    if (o.top_p_decay > 0.0 && sampling.top_p > 0.0) {
      sampling.top_p = std::max(sampling.top_p * o.top_p_decay, o.top_p_bound);
    }
    if (!any_active || pos + 1 >= limit) break;
    // Every sequence's token at pos into the model (finished ones repeat a harmless token).
    const auto begin = Clock::now();
    std::vector<int32_t> step(static_cast<size_t>(batch)), rows(static_cast<size_t>(batch));
    for (int64_t b = 0; b < batch; ++b) {
      const Sequence& s = seqs[size_t(b)];
      step[size_t(b)] = int64_t(s.tokens.size()) > pos ? s.tokens[size_t(pos)] : s.tokens.back();
      rows[size_t(b)] = int32_t(b);
    }
    logits = e.model.decode(e.backend, step, 1, pos, cache, rows, vocab);
    ++st.decode_steps;
    st.decode_s += seconds_since(begin);
  }

  std::vector<Generated> out;
  for (Sequence& s : seqs) {
    if (s.out.finish_reason.empty()) s.out.finish_reason = "length";
    if (!text_each_step) s.out.text = generated_text(e, s);
    s.out.tokens = std::move(s.tokens);
    out.push_back(std::move(s.out));
  }
  return out;
}

}  // namespace megatron::generate
