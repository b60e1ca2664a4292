// tokenizer.json's normalizers (NFC/NFD/NFKC/NFKD, Lowercase, Strip, StripAccents, Replace,
// Prepend, BertNormalizer, ByteLevel, Sequence): text in, normalized text out, as `tokenizers`.
#pragma once

#include <memory>
#include <string>

#include "data/hf_json_node.hpp"

namespace megatron::data {

class HfNormalizer {
 public:
  virtual ~HfNormalizer() = default;
  // `text` is valid UTF-8.
  virtual void normalize(std::string& text) const = 0;
};

// Throws UserError naming the file and key for an unknown type or a bad setting.
std::unique_ptr<HfNormalizer> make_hf_normalizer(const HfJsonNode& node);

}  // namespace megatron::data
