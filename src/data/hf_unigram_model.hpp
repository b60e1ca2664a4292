// tokenizer.json's Unigram model: the best-scoring segmentation of a pre-token into vocabulary
// pieces (Viterbi), unknown runs fused, optional <0xXX> byte fallback, as `tokenizers`.
#pragma once

#include <memory>

#include "data/hf_model.hpp"

namespace megatron::data {

std::unique_ptr<HfModel> make_hf_unigram_model(const HfJsonNode& node);

}  // namespace megatron::data
