// The patterns of tokenizer.json's Replace and Split: {"String": literal} or {"Regex": pattern},
// compiled into one regex (a literal escaped), as `tokenizers` does.
#pragma once

#include <memory>

#include "data/hf_json_node.hpp"
#include "data/unicode_regex.hpp"

namespace megatron::data {

std::unique_ptr<UnicodeRegex> make_hf_pattern(const HfJsonNode& pattern);

}  // namespace megatron::data
