// tokenizer.json's post-processors (TemplateProcessing, BertProcessing, RobertaProcessing,
// ByteLevel, Sequence) for one sequence: the special tokens put around its ids.
#pragma once

#include <cstdint>
#include <vector>

#include "data/hf_json_node.hpp"

namespace megatron::data {

struct HfSpecialWrap {
  std::vector<int32_t> before;  // e.g. [CLS], <|begin_of_text|>
  std::vector<int32_t> after;   // e.g. [SEP]
};

// What the post-processor adds around a single sequence when special tokens are asked for.
HfSpecialWrap read_hf_post_processor(const HfJsonNode& node);

}  // namespace megatron::data
