// A tiny whitespace tokenizer for data-pipeline tests: ids are fixed and known, so expected
// dataset bytes can be written out by hand, independently of the real tokenizers.
#pragma once

#include <map>
#include <sstream>

#include "data/tokenizer.hpp"

namespace megatron::data {

class WordTokenizer final : public Tokenizer {
 public:
  // "w<N>" is token N; anything else is token 1. Token 0 is the end-of-document token.
  explicit WordTokenizer(int64_t vocab = 1000) : vocab_(vocab) { special_.eod = 0; }

  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int32_t> ids;
    std::istringstream words{std::string(text)};
    std::string w;
    while (words >> w) ids.push_back(w.size() > 1 && w[0] == 'w' ? std::stoi(w.substr(1)) : 1);
    return ids;
  }
  std::string decode(std::span<const int32_t> ids) const override {
    std::string out;
    for (auto id : ids) out += (out.empty() ? "w" : " w") + std::to_string(id);
    return out;
  }
  std::string token_text(int32_t id) const override { return "w" + std::to_string(id); }
  int64_t vocab_size() const override { return vocab_; }
  const SpecialTokens& special_tokens() const override { return special_; }

 private:
  int64_t vocab_;
  SpecialTokens special_;
};

}  // namespace megatron::data
