#include "data/hf_wordpiece_model.hpp"

#include <cstdint>

#include "core/error.hpp"
#include "core/printable.hpp"
#include "data/unicode.hpp"

namespace megatron::data {

void read_hf_vocab_object(const HfJsonNode& vocab, const std::function<void(const std::string&, int64_t)>& add) {
  for (const auto& [token, value] : vocab.object().items()) {
    if (!value.is_number_integer()) {
      vocab.fail("the token '" + printable(token, 60) + "' has id " + printable(value.dump(), 40) + "; ids are integers");
    }
    add(token, value.is_number_unsigned() && value.get<uint64_t>() > INT32_MAX ? -1 : value.get<int64_t>());
  }
}

namespace {

class WordPieceModel final : public HfModel {
 public:
  explicit WordPieceModel(const HfJsonNode& node) {
    node.only({"unk_token", "continuing_subword_prefix", "max_input_chars_per_word", "vocab"});
    const HfJsonNode vocab = node.at("vocab");
    expect_entries(vocab.object().size());
    read_hf_vocab_object(vocab, [&](const std::string& token, int64_t id) { add_token(token, id, vocab); });
    const HfJsonNode unk = node.at("unk_token");
    const auto unk_id = id_of(unk.string());
    if (!unk_id) unk.fail("the unknown token '" + printable(unk.string(), 40) + "' is not in the vocabulary");
    unk_ = *unk_id;
    prefix_ = node.string_or("continuing_subword_prefix", "##");
    if (const auto max = node.find("max_input_chars_per_word")) {
      max_chars_ = static_cast<std::size_t>(max->integer(0, INT32_MAX));
    }
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
      std::size_t end = points.size();
      for (; end > start; --end) {
        const std::size_t b = points[start].offset;
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
};

class WordLevelModel final : public HfModel {
 public:
  explicit WordLevelModel(const HfJsonNode& node) {
    node.only({"unk_token", "vocab"});
    const HfJsonNode vocab = node.at("vocab");
    expect_entries(vocab.object().size());
    read_hf_vocab_object(vocab, [&](const std::string& token, int64_t id) { add_token(token, id, vocab); });
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
