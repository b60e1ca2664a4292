#include "data/wordpiece_extras.hpp"

#include <stdexcept>
#include <string>
#include <unordered_map>

namespace megatron::data {

WordPieceExtras wordpiece_extras(const Tokenizer& tokenizer, int64_t extra_ids) {
  if (extra_ids < 0 || extra_ids > (int64_t{1} << 20)) {
    throw std::invalid_argument("wordpiece_extras: extra_ids outside 0..2^20");
  }
  std::unordered_map<std::string, int32_t> ids;
  const int64_t n = tokenizer.vocab_size();
  for (int32_t id = 0; id < int32_t(n); ++id) ids.emplace(tokenizer.token_text(id), id);
  WordPieceExtras out{.vocab_size = n};
  const auto add = [&](const std::string& text) {
    const auto [it, added] = ids.emplace(text, int32_t(out.vocab_size));
    if (added) ++out.vocab_size;
    return it->second;
  };
  out.bos = add("[BOS]");
  out.eos = add("[EOS]");
  for (int64_t i = 0; i < extra_ids; ++i) out.sentinels.push_back(add("<extra_id_" + std::to_string(i) + ">"));
  return out;
}

}  // namespace megatron::data
