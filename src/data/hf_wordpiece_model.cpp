#include "data/hf_wordpiece_model.hpp"

#include <cstdint>

#include "core/error.hpp"
#include "core/printable.hpp"
#include "data/unicode.hpp"

namespace megatron::data {

namespace {

class WordPieceModel final : public HfModel {
 public:
  explicit WordPieceModel(const HfJsonNode& node) {
    node.only({"unk_token", "continuing_subword_prefix", "max_input_chars_per_word", "vocab"});
    read_vocab_object(node.at("vocab"));
    const HfJsonNode unk = node.at("unk_token");
    const auto unk_id = id_of(unk.string());
    if (!unk_id) unk.fail("the unknown token '" + printable(unk.string(), 40) + "' is not in the vocabulary");
    unk_ = *unk_id;
    prefix_ = node.string_or("continuing_subword_prefix", "##");
    if (const auto max = node.find("max_input_chars_per_word")) {
      max_chars_ = static_cast<std::size_t>(max->integer(0, INT32_MAX));
    }
    for (const auto& [token, id] : ids_) longest_token_ = std::max(longest_token_, token.size());
  }

  // Longest vocabulary match first, from the left; a word with any unmatched rest is [UNK].
  void tokenize(std::string_view piece, std::vector<int32_t>& out) const override {
    const auto points = unicode::decode(piece);
    if (points.size() > max_chars_) {
      out.push_back(unk_);
      return;
    }
    const std::size_t before = out.size();
    std::size_t start = 0;
    std::string candidate;
    while (start < points.size()) {
      std::optional<int32_t> found;
      // No vocabulary entry is longer than the longest token, so the search starts at the
      // longest candidate that fits: the same result, but a long word (max_input_chars_per_word
      // can be large) costs its length times the longest token, not its square.
      const std::size_t b = points[start].offset;
      const std::size_t room = longest_token_ - std::min(longest_token_, start > 0 ? prefix_.size() : 0);
      std::size_t end = start;
      while (end < points.size() && points[end].offset + points[end].length - b <= room) ++end;
      for (; end > start; --end) {
        const std::size_t e = points[end - 1].offset + points[end - 1].length;
        candidate.clear();
        if (start > 0) candidate += prefix_;
        candidate.append(piece.substr(b, e - b));
        if ((found = id_of(candidate))) break;
      }
      if (!found) {
        out.resize(before);
        out.push_back(unk_);
        return;
      }
      out.push_back(*found);
      start = end;
    }
  }

 private:
  int32_t unk_ = 0;
  std::string prefix_;
  std::size_t max_chars_ = 100;
  std::size_t longest_token_ = 0;  // bytes
};

class WordLevelModel final : public HfModel {
 public:
  explicit WordLevelModel(const HfJsonNode& node) {
    node.only({"unk_token", "vocab"});
    read_vocab_object(node.at("vocab"));
    if (const auto unk = node.find("unk_token")) {
      unk_ = id_of(unk->string());
      unk_name_ = unk->string();
    }
  }

  void tokenize(std::string_view piece, std::vector<int32_t>& out) const override {
    if (const auto id = id_of(piece)) {
      out.push_back(*id);
    } else if (unk_) {
      out.push_back(*unk_);
    } else {
      throw UserError("the WordLevel tokenizer has no id for '" + printable(piece, 60) + "' and its unknown token '" +
                      printable(unk_name_, 40) + "' is not in its vocabulary");
    }
  }

 private:
  std::optional<int32_t> unk_;
  std::string unk_name_;
};

}  // namespace

std::unique_ptr<HfModel> make_hf_wordpiece_model(const HfJsonNode& node) {
  return std::make_unique<WordPieceModel>(node);
}

std::unique_ptr<HfModel> make_hf_wordlevel_model(const HfJsonNode& node) {
  return std::make_unique<WordLevelModel>(node);
}

}  // namespace megatron::data
