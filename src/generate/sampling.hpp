// Choosing the next token from a row of logits as Megatron's text generation does: greedy
// (top_k 1), or temperature, then top-k or top-p, then a draw; and the log-softmax that reports
// each token's log-probability.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace megatron::generate {

struct Sampling {
  double temperature = 1.0;  // > 0; logits are divided by it (in f32, as Megatron); where the
                             // largest quotient overflows f32, the draw is the argmax
  int64_t top_k = 0;         // 0: off; 1: greedy (the argmax, no draw)
  double top_p = 0.0;        // 0: off; keeps the smallest prefix of tokens by probability whose
                             // mass reaches top_p (Megatron's rule: the first always kept)
  bool greedy() const { return top_k == 1; }
};

// Sampling as users ask for it (--temperature, --top-k, --top-p and the HTTP APIs' fields):
// temperature 0 means greedy (the argmax), whatever top_k and top_p say, as in OpenAI's API.
Sampling sampling_for(double temperature, int64_t top_k, double top_p);

// The draws: the standard's fully specified Mersenne Twister, turned into doubles by hand
// (std::uniform_real_distribution is not specified bit for bit), so a seed gives the same
// tokens everywhere.
class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}
  double uniform() { return double(engine_() >> 11) * 0x1.0p-53; }  // [0, 1)

 private:
  std::mt19937_64 engine_;
};

// The index of the largest logit, the first on ties (torch.argmax's).
int32_t argmax(std::span<const float> logits);

int32_t sample(std::span<const float> logits, const Sampling& sampling, Rng& rng);

// log_softmax(logits)[token], in double.
double log_probability(std::span<const float> logits, int32_t token);

// The n most likely tokens with their log-probabilities, most likely first (lower id first on
// ties).
std::vector<std::pair<int32_t, double>> top_log_probabilities(std::span<const float> logits,
                                                              int64_t n);

}  // namespace megatron::generate
