// tokenizer.json's WordPiece model (greedy longest match with a continuing-subword prefix) and
// WordLevel model (a whole pre-token per id), as `tokenizers`.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "data/hf_model.hpp"

namespace megatron::data {

std::unique_ptr<HfModel> make_hf_wordpiece_model(const HfJsonNode& node);
std::unique_ptr<HfModel> make_hf_wordlevel_model(const HfJsonNode& node);

// Reads a {"token": id} vocabulary into `model` (shared by the models that have one).
void read_hf_vocab_object(const HfJsonNode& vocab, const std::function<void(const std::string&, int64_t)>& add);

}  // namespace megatron::data
