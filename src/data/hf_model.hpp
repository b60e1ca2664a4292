// tokenizer.json's models (BPE, WordPiece, WordLevel, Unigram): the vocabulary and the step that
// turns one pre-token into ids, each as Hugging Face `tokenizers` does it.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/hf_json_node.hpp"

namespace megatron::data {

// Heterogeneous lookup: find a std::string key by string_view without building a string.
struct HfStringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
using HfTokenIds = std::unordered_map<std::string, int32_t, HfStringHash, std::equal_to<>>;

class HfModel {
 public:
  virtual ~HfModel() = default;
  // Appends the ids of one pre-token (never empty).
  virtual void tokenize(std::string_view piece, std::vector<int32_t>& out) const = 0;

  std::optional<int32_t> id_of(std::string_view token) const;
  // The token of `id`, or nullptr for an id the model does not have.
  const std::string* token_of(int32_t id) const;
  // Entries in the vocabulary (tokenizers' get_vocab_size: where added tokens start).
  int64_t entries() const { return static_cast<int64_t>(ids_.size()); }
  // One past the largest id (above entries() when the vocabulary has holes).
  int64_t id_bound() const { return static_cast<int64_t>(tokens_.size()); }

 protected:
  // Before add_token: the vocabulary has `count` entries, so ids stay below count + 65,536
  // (a few holes are allowed; a hostile id of 10^9 is not).
  void expect_entries(std::size_t count);
  // Records one entry; refuses an id given twice or out of bounds.
  void add_token(const std::string& token, int64_t id, const HfJsonNode& where);
  // A {"token": id} vocabulary (BPE, WordPiece, WordLevel): expect_entries, then add_token each.
  void read_vocab_object(const HfJsonNode& vocab);
  // The ids of the byte-fallback tokens <0x00>..<0xFF>, -1 where the vocabulary lacks one.
  std::array<int32_t, 256> byte_fallback_ids() const;

  HfTokenIds ids_;
  std::vector<std::optional<std::string>> tokens_;  // by id
  int64_t id_limit_ = 0;
};

// Ids and vocabularies are bounded so that a hostile file cannot make us allocate gigabytes.
inline constexpr int64_t kHfMaxVocabulary = int64_t{1} << 24;

std::unique_ptr<HfModel> make_hf_model(const HfJsonNode& node);

}  // namespace megatron::data
