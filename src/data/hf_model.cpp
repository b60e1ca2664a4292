#include "data/hf_model.hpp"

#include <algorithm>
#include <cstdint>

#include "core/printable.hpp"
#include "data/hf_bpe_model.hpp"
#include "data/hf_unigram_model.hpp"
#include "data/hf_wordpiece_model.hpp"

namespace megatron::data {

std::optional<int32_t> HfModel::id_of(std::string_view token) const {
  const auto it = ids_.find(token);
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

const std::string* HfModel::token_of(int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= tokens_.size() || !tokens_[id]) return nullptr;
  return &*tokens_[id];
}

void HfModel::expect_entries(std::size_t count) {
  id_limit_ = std::min<int64_t>(kHfMaxVocabulary, static_cast<int64_t>(std::min<std::size_t>(count, kHfMaxVocabulary)) + 65536);
  ids_.reserve(count);
}

void HfModel::add_token(const std::string& token, int64_t id, const HfJsonNode& where) {
  if (id < 0 || id >= id_limit_) {
    where.fail("the token '" + printable(token, 60) + "' has id " + std::to_string(id) + "; ids must be 0.." +
               std::to_string(id_limit_ - 1) + " for a vocabulary of " + std::to_string(ids_.size() + 1) + "+ tokens");
  }
  if (static_cast<std::size_t>(id) >= tokens_.size()) tokens_.resize(id + 1);
  if (tokens_[id]) {
    where.fail("id " + std::to_string(id) + " is given to two tokens, '" + printable(*tokens_[id], 60) + "' and '" +
               printable(token, 60) + "'");
  }
  if (!ids_.emplace(token, static_cast<int32_t>(id)).second) {
    where.fail("the token '" + printable(token, 60) + "' is listed twice");
  }
  tokens_[id] = token;
}

void HfModel::read_vocab_object(const HfJsonNode& vocab) {
  expect_entries(vocab.object().size());
  for (const auto& [token, value] : vocab.object().items()) {
    if (!value.is_number_integer()) {
      vocab.fail("the token '" + printable(token, 60) + "' has id " + printable(value.dump(), 40) + "; ids are integers");
    }
    if (value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(kHfMaxVocabulary)) {
      vocab.fail("the token '" + printable(token, 60) + "' has id " + value.dump() + "; ids are below 2^24");
    }
    add_token(token, value.get<int64_t>(), vocab);
  }
}

std::array<int32_t, 256> HfModel::byte_fallback_ids() const {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::array<int32_t, 256> ids{};
  for (int b = 0; b < 256; ++b) {
    ids[b] = id_of(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">").value_or(-1);
  }
  return ids;
}

std::unique_ptr<HfModel> make_hf_model(const HfJsonNode& node) {
  node.object();
  // Files from before `tokenizers` wrote the type name it from their keys.
  std::string type;
  if (node.find("type")) {
    type = node.type();
  } else if (node.json().contains("merges")) {
    type = "BPE";
  } else if (node.json().contains("continuing_subword_prefix")) {
    type = "WordPiece";
  } else {
    node.fail("has no type");
  }
  if (type == "BPE") return make_hf_bpe_model(node);
  if (type == "WordPiece") return make_hf_wordpiece_model(node);
  if (type == "WordLevel") return make_hf_wordlevel_model(node);
  if (type == "Unigram") return make_hf_unigram_model(node);
  node.at("type").fail("unknown model '" + type + "'; known: BPE, WordPiece, WordLevel, Unigram");
}

}  // namespace megatron::data
