// Hugging Face `tokenizers`' tokenizer.json (Megatron-LM's HuggingFaceTokenizer): the whole
// pipeline of added tokens, normalizer, pre-tokenizer, model, post-processor and decoder.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer.hpp"

namespace megatron::data {

class HfTokenizer : public Tokenizer {
 public:
  // encode() with the post-processor's special tokens (BOS, [CLS] ... [SEP]), as
  // `tokenizers`' encode(text, add_special_tokens=True).
  virtual std::vector<int32_t> encode_with_special_tokens(std::string_view text) const = 0;
  // decode() without the special added tokens (skip_special_tokens=True).
  virtual std::string decode_skipping_special(std::span<const int32_t> ids) const = 0;
  // The id of an added or vocabulary token spelt exactly `token`.
  virtual std::optional<int32_t> id_of(std::string_view token) const = 0;
};

// `path` is a tokenizer.json file or a directory holding one; special-token roles come from
// tokenizer_config.json beside it when there is one. Throws UserError naming the file and the
// key of anything malformed or not supported.
std::unique_ptr<HfTokenizer> load_hf_tokenizer(const std::string& path);

}  // namespace megatron::data
