#include "data/hf_bpe_model.hpp"

#include <array>
#include <atomic>
#include <cstdint>

#include "core/printable.hpp"
#include "data/bpe_merge.hpp"
#include "data/unicode.hpp"

namespace megatron::data {

namespace {

class BpeModel final : public HfModel {
 public:
  explicit BpeModel(const HfJsonNode& node);
  void tokenize(std::string_view piece, std::vector<int32_t>& out) const override;

 private:
  void initial_symbols(std::string_view word, std::vector<int32_t>& symbols) const;

  std::vector<BpeMerge> merges_;
  std::unique_ptr<MergeRanks> ranks_;
  std::optional<int32_t> unk_;
  std::string prefix_;
  std::string suffix_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  std::array<int32_t, 256> byte_ids_{};  // <0xXX> tokens, -1 where missing
  uint64_t serial_ = next_bpe_serial();
};

BpeModel::BpeModel(const HfJsonNode& node) {
  node.only({"dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk",
             "byte_fallback", "ignore_merges", "vocab", "merges"});
  if (const auto dropout = node.find("dropout"); dropout && dropout->number() != 0.0) {
    dropout->fail("BPE dropout makes encoding random; megatron tokenizes deterministically (set it to null)");
  }
  prefix_ = node.string_or("continuing_subword_prefix", "");
  suffix_ = node.string_or("end_of_word_suffix", "");
  fuse_unk_ = node.boolean_or("fuse_unk", false);
  byte_fallback_ = node.boolean_or("byte_fallback", false);
  ignore_merges_ = node.boolean_or("ignore_merges", false);

  read_vocab_object(node.at("vocab"));
  if (const auto unk = node.find("unk_token")) {
    unk_ = id_of(unk->string());
    if (!unk_) unk->fail("the unknown token '" + printable(unk->string(), 40) + "' is not in the vocabulary");
  }
  byte_ids_ = byte_fallback_ids();

  const HfJsonNode merges = node.at("merges");
  merges.array();
  merges_.reserve(merges.size());
  std::vector<std::pair<int32_t, int32_t>> pairs;
  pairs.reserve(merges.size());
  for (std::size_t i = 0; i < merges.size(); ++i) {
    const HfJsonNode merge = merges.at(i);
    std::string left;
    std::string right;
    if (merge.json().is_string()) {
      // The older spelling: "left right", one space.
      const std::string line = merge.string();
      const std::size_t space = line.find(' ');
      if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
        merge.fail("'" + printable(line, 60) + "' must be two tokens separated by one space");
      }
      left = line.substr(0, space);
      right = line.substr(space + 1);
    } else {
      if (!merge.json().is_array() || merge.size() != 2) merge.fail("must be a pair of tokens or \"left right\"");
      left = merge.at(std::size_t{0}).string();
      right = merge.at(std::size_t{1}).string();
    }
    const auto left_id = id_of(left);
    const auto right_id = id_of(right);
    if (!left_id || !right_id) {
      merge.fail("'" + printable(left_id ? right : left, 60) + "' is not in the vocabulary");
    }
    if (!prefix_.empty() && !right.starts_with(prefix_)) {
      // tokenizers drops the prefix's length from the right token whatever it holds.
      merge.fail("the right token '" + printable(right, 60) + "' lacks the continuing-subword prefix '" +
                 printable(prefix_, 20) + "'");
    }
    const std::string joined = left + right.substr(prefix_.size());
    const auto result = id_of(joined);
    if (!result) merge.fail("the merged token '" + printable(joined, 60) + "' is not in the vocabulary");
    merges_.push_back({*left_id, *right_id, *result});
    pairs.emplace_back(*left_id, *right_id);
  }
  ranks_ = std::make_unique<MergeRanks>(pairs);
}

// tokenizers' merge_word before merging: each character as a token (with the prefix after the
// first and the suffix on the last), else its <0xXX> bytes, else the unknown token (fused
// with a neighbouring unknown when fuse_unk; dropped when there is none).
void BpeModel::initial_symbols(std::string_view word, std::vector<int32_t>& symbols) const {
  symbols.clear();
  std::optional<int32_t> pending_unk;
  const auto points = unicode::decode(word);
  std::string spelled;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const std::string_view ch = word.substr(points[i].offset, points[i].length);
    const bool first = i == 0;
    const bool last = i + 1 == points.size();
    std::optional<int32_t> id;
    if ((first || prefix_.empty()) && (!last || suffix_.empty())) {
      id = id_of(ch);
    } else {
      spelled.clear();
      if (!first) spelled += prefix_;
      spelled += ch;
      if (last) spelled += suffix_;
      id = id_of(spelled);
    }
    if (id) {
      if (pending_unk) {
        symbols.push_back(*pending_unk);
        pending_unk.reset();
      }
      symbols.push_back(*id);
      continue;
    }
    if (byte_fallback_) {
      const std::string_view bytes = (first || prefix_.empty()) && (!last || suffix_.empty()) ? ch : std::string_view(spelled);
      bool all = true;
      for (const char b : bytes) all = all && byte_ids_[static_cast<unsigned char>(b)] >= 0;
      if (all) {
        // tokenizers leaves a pending unknown where it is: it follows these bytes.
        for (const char b : bytes) symbols.push_back(byte_ids_[static_cast<unsigned char>(b)]);
        continue;
      }
    }
    if (unk_) {
      if (pending_unk && !fuse_unk_) symbols.push_back(*pending_unk);
      pending_unk = unk_;
    }
  }
  if (pending_unk) symbols.push_back(*pending_unk);
}

void BpeModel::tokenize(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.empty()) return;
  if (ignore_merges_) {
    if (const auto id = id_of(piece)) {
      out.push_back(*id);
      return;
    }
  }
  BpeThreadState& state = bpe_thread_state(serial_);
  const uint64_t hash = hash_word(piece);
  std::size_t count = 0;
  if (const int32_t* ids = state.cache.find(piece, hash, count)) {
    out.insert(out.end(), ids, ids + count);
    return;
  }
  initial_symbols(piece, state.scratch.initial);
  const std::size_t before = out.size();
  bpe_merge(state.scratch.initial, *ranks_, merges_, state.scratch, out);
  state.cache.insert(piece, hash, out.data() + before, out.size() - before);
}

}  // namespace

std::unique_ptr<HfModel> make_hf_bpe_model(const HfJsonNode& node) { return std::make_unique<BpeModel>(node); }

}  // namespace megatron::data
