// tokenizer.json's BPE model: characters (or <0xXX> bytes, or the unknown token) merged by rank,
// with continuing-subword prefixes, end-of-word suffixes and ignore_merges, as `tokenizers`.
#pragma once

#include <memory>

#include "data/hf_model.hpp"

namespace megatron::data {

std::unique_ptr<HfModel> make_hf_bpe_model(const HfJsonNode& node);

}  // namespace megatron::data
