// tokenizer.json's WordPiece model (greedy longest match with a continuing-subword prefix) and
// WordLevel model (a whole pre-token per id), as `tokenizers`.
#pragma once

#include <memory>

#include "data/hf_model.hpp"

namespace megatron::data {

std::unique_ptr<HfModel> make_hf_wordpiece_model(const HfJsonNode& node);
std::unique_ptr<HfModel> make_hf_wordlevel_model(const HfJsonNode& node);

}  // namespace megatron::data
