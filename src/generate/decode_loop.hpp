// The one token-by-token decode loop, shared by `megatron generate` (a key/value-cached model step)
// and generation-based evaluation (the whole model's forward each step, on any layout).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "generate/sampling.hpp"

namespace megatron::generate {

// One sequence being decoded. During decode the loop owns it; a stepper's step only reads it.
struct Sequence {
  std::vector<int32_t> tokens;  // the given ones (a prompt, or T5's [BOS]), then the chosen ones
  int64_t prompt = 0;           // tokens[0, prompt) were given
  // The position the next logits row is for. Below `prompt` the row only scores the given token
  // (Megatron's static batch runs a longer prompt alongside shorter ones' outputs).
  int64_t position = 0;
  int64_t chosen = 0;  // tokens chosen so far (an end token included)
  bool done = false;
  std::string finish_reason;  // once done: "length" or "stop"
  // With logprobs: each token the loop saw, given what precedes it (an end token not included).
  std::vector<double> logprobs;
  std::vector<std::vector<std::pair<int32_t, double>>> top_logprobs;
};

// What one step of the model gives the loop for the live sequences it was asked about, in order.
// On a rank that does not choose (a layout's other ranks) both are empty: its tokens come from
// Stepper::agree.
struct StepScores {
  std::vector<float> logits;    // [n, V]: each sequence's next-token logits, the whole vocabulary
  std::vector<int32_t> chosen;  // [n]: or greedy tokens the stepper found without gathering V
};

// Produces the next-token scores; how (a cache, a full forward, which ranks) is its own concern.
class Stepper {
 public:
  virtual ~Stepper() = default;
  // Runs the model one position further and scores sequences[live[j]] for each j. `live` is
  // ascending and holds every sequence not done; the done ones keep their tokens, so a static
  // batch may go on feeding them.
  virtual StepScores step(std::span<const Sequence> sequences, std::span<const size_t> live) = 0;
  // The tokens chosen this step ([m]: the sequences that chose, in `live` order; 0 where this
  // rank did not choose), made the same on every rank. Collective where only some ranks choose.
  virtual void agree(std::span<int32_t> tokens) { (void)tokens; }
};

struct LoopOptions {
  int64_t max_tokens = 0;  // tokens each sequence chooses at most (0: it only scores its prompt)
  // A sequence stops ("length") once its next position would reach this.
  int64_t max_positions = std::numeric_limits<int64_t>::max();
  Sampling sampling;
  // Megatron's top_p_decay / top_p_bound: after each step top_p = max(top_p * decay, bound).
  double top_p_decay = 0.0;
  double top_p_bound = 0.0;
  uint64_t seed = 0;
  // false: one generator draws for the whole batch, in sequence order (Megatron's). true:
  // sequence i draws from its own, seeded seed + i, so its tokens do not depend on its batch.
  bool rng_per_sequence = false;
  std::vector<int32_t> end_tokens;   // stop a sequence and are left out of it (end-of-document)
  std::vector<int32_t> stop_tokens;  // stop a sequence and stay in it
  bool logprobs = false;             // record Sequence::logprobs
  int64_t top_logprobs = 0;          // and the n most likely tokens at each position
  // Asked before each step: true stops every live sequence, "cancelled".
  std::function<bool()> cancelled;
};

// Called after sequence i chose a token (an end token too, though its tokens leave it out);
// returning true stops it with "stop" (a stop string found in its text).
using OnChosen = std::function<bool(size_t i, const Sequence& sequence)>;

// Sequence s (index i) chose `token` from `row` (empty where this rank does not hold it): counts
// it, keeps it unless it is an end token, records its log-probabilities when asked, and finishes
// s on an end or stop token, when on_chosen says so, on max_tokens or on max_positions. The rule
// every decode loop shares.
void take_token(const LoopOptions& options, const OnChosen& on_chosen, size_t i,
                std::span<const float> row, int32_t token, Sequence& s);

// Steps until every sequence is done. Each step, a live sequence takes its given token while its
// position is inside its prompt, else chooses one from its row (Sampling: greedy picks the first
// largest logit), and stops on an end or stop token, on max_tokens or on max_positions.
void decode(Stepper& stepper, std::vector<Sequence>& sequences, const LoopOptions& options,
            const OnChosen& on_chosen = {});

}  // namespace megatron::generate
