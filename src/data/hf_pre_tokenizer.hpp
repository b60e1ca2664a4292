// tokenizer.json's pre-tokenizers (ByteLevel, Split, Metaspace, Whitespace, WhitespaceSplit,
// BertPreTokenizer, Punctuation, Digits, CharDelimiterSplit, Sequence): they cut normalized
// text into the pieces the model tokenizes, with `tokenizers`' five split behaviours.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data/hf_json_node.hpp"

namespace megatron::data {

struct HfPiece {
  std::string text;
  // The piece begins where the input text begins (Metaspace's prepend_scheme "first").
  bool at_start = false;
};

class HfPreTokenizer {
 public:
  virtual ~HfPreTokenizer() = default;
  // Replaces `pieces` with their pre-tokens, in order; empty pieces are dropped.
  virtual void pre_tokenize(std::vector<HfPiece>& pieces) const = 0;
};

std::unique_ptr<HfPreTokenizer> make_hf_pre_tokenizer(const HfJsonNode& node);

// Whether a Metaspace component (pre-tokenizer or decoder) prepends the replacement: its
// prepend_scheme, or the older add_prefix_space.
bool hf_metaspace_prepends(const HfJsonNode& node);

}  // namespace megatron::data
