#include "generate/decode_loop.hpp"

#include <algorithm>

namespace megatron::generate {
namespace {

bool contains(const std::vector<int32_t>& tokens, int32_t token) {
  return std::find(tokens.begin(), tokens.end(), token) != tokens.end();
}

void finish(Sequence& s, const char* reason) {
  s.done = true;
  s.finish_reason = reason;
}

// Records `token`'s log-probabilities under `row` when asked (and when this rank holds the row).
void record(const LoopOptions& o, std::span<const float> row, int32_t token, Sequence& s) {
  if (!o.logprobs || row.empty()) return;
  s.logprobs.push_back(log_probability(row, token));
  if (o.top_logprobs > 0) s.top_logprobs.push_back(top_log_probabilities(row, o.top_logprobs));
}

}  // namespace

void take_token(const LoopOptions& o, const OnChosen& on_chosen, size_t i,
                std::span<const float> row, int32_t token, Sequence& s) {
  ++s.chosen;
  ++s.position;
  const bool ends = contains(o.end_tokens, token);
  if (!ends) {  // an end token ends the text rather than being part of it
    record(o, row, token, s);
    s.tokens.push_back(token);
  }
  bool stop = ends || contains(o.stop_tokens, token);
  // Always called: a listener sees every chosen token, and its stop may cut the text it keeps.
  if (on_chosen && on_chosen(i, s)) stop = true;
  if (stop) {
    finish(s, "stop");
  } else if (s.chosen >= o.max_tokens || s.position >= o.max_positions) {
    finish(s, "length");
  }
}

void decode(Stepper& stepper, std::vector<Sequence>& sequences, const LoopOptions& o,
            const OnChosen& on_chosen) {
  std::vector<Rng> rngs;
  const size_t generators = o.rng_per_sequence ? sequences.size() : 1;
  rngs.reserve(generators);
  for (size_t i = 0; i < generators; ++i) rngs.emplace_back(o.seed + uint64_t(i));
  Sampling sampling = o.sampling;
  std::vector<size_t> live;
  for (;;) {
    live.clear();
    for (size_t i = 0; i < sequences.size(); ++i) {
      if (!sequences[i].done) live.push_back(i);
    }
    if (live.empty()) return;
    if (o.cancelled && o.cancelled()) {
      for (const size_t i : live) finish(sequences[i], "cancelled");
      return;
    }
    const StepScores scores = stepper.step(sequences, live);
    const auto row = [&](size_t j) {
      if (scores.logits.empty()) return std::span<const float>{};
      const size_t vocab = scores.logits.size() / live.size();
      return std::span<const float>(scores.logits).subspan(j * vocab, vocab);
    };
    // Choose first, for every sequence that may: the ranks that did not choose learn the tokens
    // in agree before any sequence moves on.
    const auto chooses = [&](const Sequence& s) {
      return s.position >= s.prompt && s.chosen < o.max_tokens;
    };
    std::vector<int32_t> chosen;
    for (size_t j = 0; j < live.size(); ++j) {
      const size_t i = live[j];
      if (!chooses(sequences[i])) continue;
      if (!scores.chosen.empty()) {
        chosen.push_back(scores.chosen[j]);
      } else if (!scores.logits.empty()) {
        chosen.push_back(sample(row(j), sampling, rngs[o.rng_per_sequence ? i : 0]));
      } else {
        chosen.push_back(0);
      }
    }
    stepper.agree(chosen);
    size_t next = 0;
    for (size_t j = 0; j < live.size(); ++j) {
      Sequence& s = sequences[live[j]];
      if (s.position < s.prompt) {  // its own prompt's token, scored but not chosen
        record(o, row(j), s.tokens[size_t(s.position)], s);
        if (++s.position >= o.max_positions) finish(s, "length");
      } else if (!chooses(s)) {
        finish(s, "length");
      } else {
        take_token(o, on_chosen, live[j], row(j), chosen[next++], s);
      }
    }
    if (o.top_p_decay > 0.0 && sampling.top_p > 0.0) {
      sampling.top_p = std::max(sampling.top_p * o.top_p_decay, o.top_p_bound);
    }
  }
}

}  // namespace megatron::generate
