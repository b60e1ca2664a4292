#include "data/wordpiece.hpp"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <span>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "data/bert_pretokenize.hpp"

namespace megatron::data {

namespace {

// Google's and Hugging Face's max_input_chars_per_word: longer words are [UNK] outright.
constexpr std::size_t kMaxWordChars = 100;
constexpr std::string_view kContinuationPrefix = "##";

bool is_utf8_continuation(char byte) { return (static_cast<unsigned char>(byte) & 0xC0) == 0x80; }

std::size_t count_code_points(std::string_view word) {
  return static_cast<std::size_t>(
      std::count_if(word.begin(), word.end(), [](char b) { return !is_utf8_continuation(b); }));
}

// Pieces that may appear at one position of a word, keyed by views into the tokenizer's own
// token strings, so a lookup neither allocates nor copies. max_bytes bounds the longest
// candidate worth looking up: the greedy search starts there instead of at the word's end.
class PieceTable {
 public:
  // Returns false when the key is already present.
  bool add(std::string_view key, int32_t id) {
    max_bytes_ = std::max(max_bytes_, key.size());
    return ids_.emplace(key, id).second;
  }
  // -1 when absent.
  int32_t find(std::string_view key) const {
    const auto it = ids_.find(key);
    return it == ids_.end() ? -1 : it->second;
  }
  std::size_t max_bytes() const { return max_bytes_; }
  void reserve(std::size_t n) { ids_.reserve(n); }

 private:
  std::unordered_map<std::string_view, int32_t> ids_;
  std::size_t max_bytes_ = 0;
};

class WordPieceTokenizer final : public Tokenizer {
 public:
  // `tokens` must not change afterwards: the piece tables point into it.
  WordPieceTokenizer(std::vector<std::string> tokens, bool lower_case, const std::string& path)
      : tokens_(std::move(tokens)), lower_case_(lower_case) {
    word_starts_.reserve(tokens_.size());
    continuations_.reserve(tokens_.size());
    for (std::size_t id = 0; id < tokens_.size(); ++id) {
      const std::string_view token = tokens_[id];
      if (!word_starts_.add(token, static_cast<int32_t>(id))) {
        const auto first = word_starts_.find(token);
        throw UserError(path + ": duplicate token \"" + tokens_[id] + "\" on line " +
                        std::to_string(id + 1) + " (first on line " + std::to_string(first + 1) +
                        ")");
      }
      // Hugging Face looks up "##" + rest; keying continuations by the rest is the same test
      // without building a string per candidate.
      if (token.size() > kContinuationPrefix.size() && token.starts_with(kContinuationPrefix)) {
        continuations_.add(token.substr(kContinuationPrefix.size()), static_cast<int32_t>(id));
      }
    }
    special_.cls = lookup("[CLS]");
    special_.sep = lookup("[SEP]");
    special_.mask = lookup("[MASK]");
    special_.pad = lookup("[PAD]");
    special_.unk = lookup("[UNK]");
    if (!special_.unk) throw UserError(path + ": the vocabulary has no [UNK] token");
    unk_ = *special_.unk;
  }
  WordPieceTokenizer(const WordPieceTokenizer&) = delete;
  WordPieceTokenizer& operator=(const WordPieceTokenizer&) = delete;

  std::vector<int32_t> encode(std::string_view text) const override {
    BertWords words;
    bert_pretokenize(text, lower_case_, words);
    std::vector<int32_t> ids;
    ids.reserve(words.size() + words.size() / 4);
    for (std::size_t i = 0; i < words.size(); ++i) encode_word(words.word(i), ids);
    return ids;
  }

  std::string decode(std::span<const int32_t> ids) const override {
    std::string text;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const std::string_view token = checked_token(ids[i]);
      if (i == 0) {
        text += token;
      } else if (token.starts_with(kContinuationPrefix)) {
        text += token.substr(kContinuationPrefix.size());
      } else {
        text += ' ';
        text += token;
      }
    }
    return text;
  }

  std::string token_text(int32_t id) const override { return std::string(checked_token(id)); }
  int64_t vocab_size() const override { return static_cast<int64_t>(tokens_.size()); }
  const SpecialTokens& special_tokens() const override { return special_; }

 private:
  std::optional<int32_t> lookup(std::string_view token) const {
    const auto id = word_starts_.find(token);
    return id < 0 ? std::nullopt : std::optional<int32_t>(id);
  }

  const std::string& checked_token(int32_t id) const {
    if (id < 0 || static_cast<std::size_t>(id) >= tokens_.size()) {
      throw UserError("token id " + std::to_string(id) + " is outside the WordPiece vocabulary (" +
                      std::to_string(tokens_.size()) + " tokens)");
    }
    return tokens_[static_cast<std::size_t>(id)];
  }

  // Greedy longest-match-first, exactly as Hugging Face: the longest prefix in the vocabulary,
  // then the longest "##" continuation of the rest, and so on; if some rest has no match,
  // the whole word is one [UNK] (not the pieces found so far).
  void encode_word(std::string_view word, std::vector<int32_t>& ids) const {
    // Bytes bound code points from above, so only long words pay for counting.
    if (word.size() > kMaxWordChars && count_code_points(word) > kMaxWordChars) {
      ids.push_back(unk_);
      return;
    }
    const std::size_t first_piece = ids.size();
    std::size_t start = 0;
    while (start < word.size()) {
      const PieceTable& table = start == 0 ? word_starts_ : continuations_;
      std::size_t end = std::min(word.size(), start + table.max_bytes());
      while (end > start && end < word.size() && is_utf8_continuation(word[end])) --end;
      int32_t id = -1;
      while (end > start) {
        id = table.find(word.substr(start, end - start));
        if (id >= 0) break;
        do {
          --end;
        } while (end > start && is_utf8_continuation(word[end]));
      }
      if (id < 0) {
        ids.resize(first_piece);
        ids.push_back(unk_);
        return;
      }
      ids.push_back(id);
      start = end;
    }
  }

  std::vector<std::string> tokens_;
  bool lower_case_;
  PieceTable word_starts_;    // every token, as the first piece of a word
  PieceTable continuations_;  // "##x" tokens keyed by "x", for the pieces after the first
  SpecialTokens special_;
  int32_t unk_ = 0;
};

// Hugging Face keeps line.trim_end(); ASCII whitespace is all a real vocab.txt can end with
// (a CR from a Windows editor, stray spaces).
std::string_view trim_end(std::string_view line) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t' ||
                           line.back() == '\v' || line.back() == '\f')) {
    line.remove_suffix(1);
  }
  return line;
}

}  // namespace

std::unique_ptr<Tokenizer> load_wordpiece(const std::string& vocab_txt, bool lower_case) {
  std::error_code ignored;
  if (!std::filesystem::exists(vocab_txt, ignored)) {
    throw UserError(vocab_txt + ": the WordPiece vocabulary file does not exist");
  }
  if (std::filesystem::is_directory(vocab_txt, ignored)) {
    throw UserError(vocab_txt + ": is a directory, expected the WordPiece vocab.txt");
  }
  std::ifstream in(vocab_txt, std::ios::binary);
  if (!in) throw UserError(vocab_txt + ": cannot open the WordPiece vocabulary file");
  std::vector<std::string> tokens;
  std::string line;
  while (std::getline(in, line)) {
    const auto token = trim_end(line);
    if (token.empty()) {
      throw UserError(vocab_txt + ": line " + std::to_string(tokens.size() + 1) +
                      " is empty; vocab.txt needs one token per line");
    }
    tokens.emplace_back(token);
  }
  if (in.bad()) throw UserError(vocab_txt + ": could not read the WordPiece vocabulary file");
  if (tokens.empty()) throw UserError(vocab_txt + ": the WordPiece vocabulary is empty");
  return std::make_unique<WordPieceTokenizer>(std::move(tokens), lower_case, vocab_txt);
}

}  // namespace megatron::data
