// tokenizer.json's decoders (ByteLevel, Metaspace, WordPiece, BPEDecoder, ByteFallback, Fuse,
// Strip, Replace, Sequence): token strings in, text pieces out, joined by the caller.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data/hf_json_node.hpp"

namespace megatron::data {

class HfDecoder {
 public:
  virtual ~HfDecoder() = default;
  // tokenizers' decode_chain: rewrites the list of token strings.
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

std::unique_ptr<HfDecoder> make_hf_decoder(const HfJsonNode& node);

}  // namespace megatron::data
