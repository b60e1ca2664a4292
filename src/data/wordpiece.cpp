#include "data/wordpiece.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/printable.hpp"
#include "data/bert_pretokenize.hpp"

namespace megatron::data {

namespace {

// Google's and Hugging Face's max_input_chars_per_word: longer words are [UNK] outright.
constexpr std::size_t kMaxWordChars = 100;
constexpr std::string_view kContinuationPrefix = "##";

bool is_utf8_continuation(char byte) { return (static_cast<unsigned char>(byte) & 0xC0) == 0x80; }

// "##x": a piece that continues a word. "##" alone is an ordinary token.
bool is_continuation(std::string_view token) {
  return token.size() > kContinuationPrefix.size() && token.starts_with(kContinuationPrefix);
}

std::size_t count_code_points(std::string_view word) {
  return static_cast<std::size_t>(
      std::count_if(word.begin(), word.end(), [](char b) { return !is_utf8_continuation(b); }));
}

// The pieces that may appear at one position of a word: token id by text, where the text is
// a token with its first `skip` bytes dropped (2 for "##" continuations). Lookups are nearly
// the whole cost of WordPiece, so this is a flat open-addressing table whose 16-byte slots
// hold each key's length and first 11 bytes: a lookup of a typical piece touches one cache
// line and compares two integers, and only longer keys are read from the token strings.
// (std::unordered_map was 3.5 times slower here; tag-only slots 1.4 times.) max_bytes bounds
// the longest candidate worth looking up, so the greedy search starts there instead of at
// the end of a long word.
class PieceTable {
 public:
  // `tokens` must outlive the table and not change; capacity: how many keys will be added.
  PieceTable(const std::vector<std::string>& tokens, std::size_t skip, std::size_t capacity)
      : tokens_(tokens), skip_(skip) {
    std::size_t size = 16;
    while (size < 2 * capacity) size *= 2;  // load factor <= 1/2 keeps probe chains short
    slots_.assign(size, Slot{});
    mask_ = size - 1;
  }

  // Returns false (and adds nothing) when the key is already present.
  bool add(int32_t id) {
    const std::string_view key = key_of(id);
    const Head head = head_of(key);
    for (std::size_t i = hash(head, key) & mask_;; i = (i + 1) & mask_) {
      Slot& slot = slots_[i];
      if (slot.id < 0) {
        slot = Slot{head.low, head.high, id};
        max_bytes_ = std::max(max_bytes_, key.size());
        return true;
      }
      if (matches(slot, head, key)) return false;
    }
  }

  // The id whose key is `key`, or -1.
  int32_t find(std::string_view key) const {
    const Head head = head_of(key);
    for (std::size_t i = hash(head, key) & mask_;; i = (i + 1) & mask_) {
      const Slot& slot = slots_[i];
      if (slot.id < 0) return -1;
      if (matches(slot, head, key)) return slot.id;
    }
  }

  std::size_t max_bytes() const { return max_bytes_; }

 private:
  static constexpr std::size_t kInlineBytes = 11;

  // A key's length (capped at 255) in the first byte, then its first 11 bytes, zero-padded.
  struct Head {
    uint64_t low;
    uint32_t high;
  };
  struct Slot {
    uint64_t low = 0;
    uint32_t high = 0;
    int32_t id = -1;  // -1: empty
  };

  static Head head_of(std::string_view key) {
    unsigned char bytes[12] = {};
    bytes[0] = static_cast<unsigned char>(std::min<std::size_t>(key.size(), 255));
    std::memcpy(bytes + 1, key.data(), std::min(key.size(), kInlineBytes));
    Head head{};
    std::memcpy(&head.low, bytes, 8);
    std::memcpy(&head.high, bytes + 8, 4);
    return head;
  }

  // splitmix64's finaliser over the head, then over any bytes past it, 8 at a time.
  static uint64_t hash(const Head& head, std::string_view key) {
    auto mix = [](uint64_t x) {
      x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
      x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
      return x ^ (x >> 31);
    };
    uint64_t h = mix(head.low ^ mix(head.high + 0x9E3779B97F4A7C15ull));
    for (std::size_t i = kInlineBytes; i < key.size(); i += 8) {
      uint64_t word = 0;
      std::memcpy(&word, key.data() + i, std::min<std::size_t>(8, key.size() - i));
      h = mix(h ^ word);
    }
    return h;
  }

  bool matches(const Slot& slot, const Head& head, std::string_view key) const {
    if (slot.low != head.low || slot.high != head.high) return false;
    return key.size() <= kInlineBytes || key_of(slot.id) == key;
  }

  std::string_view key_of(int32_t id) const {
    return std::string_view(tokens_[static_cast<std::size_t>(id)]).substr(skip_);
  }

  const std::vector<std::string>& tokens_;
  std::size_t skip_;
  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  std::size_t max_bytes_ = 0;
};

class WordPieceTokenizer final : public Tokenizer {
 public:
  // The piece tables point into tokens_, hence no copies.
  WordPieceTokenizer(std::vector<std::string> tokens, bool lower_case, const std::string& path)
      : tokens_(std::move(tokens)),
        lower_case_(lower_case),
        word_starts_(tokens_, 0, tokens_.size()),
        continuations_(tokens_, kContinuationPrefix.size(),
                       static_cast<std::size_t>(
                           std::count_if(tokens_.begin(), tokens_.end(), is_continuation))) {
    for (std::size_t id = 0; id < tokens_.size(); ++id) {
      const std::string_view token = tokens_[id];
      if (!word_starts_.add(static_cast<int32_t>(id))) {
        const auto first = word_starts_.find(token);
        throw UserError(path + ": duplicate token \"" + printable(tokens_[id]) + "\" on line " +
                        std::to_string(id + 1) + " (first on line " + std::to_string(first + 1) +
                        ")");
      }
      // Hugging Face looks up "##" + rest; keying continuations by the rest is the same test
      // without building a string per candidate.
      if (is_continuation(token)) continuations_.add(static_cast<int32_t>(id));
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
