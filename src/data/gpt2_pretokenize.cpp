#include "data/gpt2_pretokenize.hpp"

#include <array>
#include <cstdint>

#include "data/unicode.hpp"

namespace megatron::data {

namespace {

// The four classes the regex distinguishes: \p{L}, \p{N}, \s, and everything else.
enum class CharClass : uint8_t { kLetter, kNumber, kSpace, kOther };

CharClass classify(char32_t c) {
  // White_Space, L* and N* are disjoint, so the order of the tests does not matter.
  if (unicode::is_whitespace(c)) return CharClass::kSpace;
  if (unicode::is_letter(c)) return CharClass::kLetter;
  if (unicode::is_number(c)) return CharClass::kNumber;
  return CharClass::kOther;
}

// ASCII is most of real text: answer it from a table built from the same Unicode functions,
// so the fast path cannot disagree with the slow one.
const std::array<CharClass, 128> kAsciiClass = [] {
  std::array<CharClass, 128> table{};
  for (char32_t c = 0; c < 128; ++c) table[c] = classify(c);
  return table;
}();

struct Char {
  CharClass cls;
  uint32_t length;  // bytes
};

// The character starting at text[pos]. Validity follows utf8proc (and so unicode::decode)
// exactly: no overlong forms, no surrogates, nothing above U+10FFFF. An invalid byte is a
// one-byte "other" character, which keeps every byte of the input in exactly one pre-token.
Char char_at(std::string_view text, std::size_t pos) {
  const auto b0 = static_cast<unsigned char>(text[pos]);
  if (b0 < 0x80) return {kAsciiClass[b0], 1};
  constexpr Char kInvalid{CharClass::kOther, 1};
  const std::size_t left = text.size() - pos;
  auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[pos + k]); };
  auto continuation = [&](std::size_t k) { return k < left && (byte(k) & 0xC0) == 0x80; };
  char32_t c = 0;
  uint32_t length = 0;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    if (!continuation(1)) return kInvalid;
    c = (char32_t{b0} & 0x1F) << 6 | (byte(1) & 0x3F);
    length = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    if (!continuation(1) || !continuation(2)) return kInvalid;
    if (b0 == 0xE0 && byte(1) < 0xA0) return kInvalid;  // overlong
    if (b0 == 0xED && byte(1) > 0x9F) return kInvalid;  // surrogate
    c = (char32_t{b0} & 0x0F) << 12 | char32_t{byte(1) & 0x3Fu} << 6 | (byte(2) & 0x3F);
    length = 3;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    if (!continuation(1) || !continuation(2) || !continuation(3)) return kInvalid;
    if (b0 == 0xF0 && byte(1) < 0x90) return kInvalid;  // overlong
    if (b0 == 0xF4 && byte(1) > 0x8F) return kInvalid;  // above U+10FFFF
    c = (char32_t{b0} & 0x07) << 18 | char32_t{byte(1) & 0x3Fu} << 12 |
        char32_t{byte(2) & 0x3Fu} << 6 | (byte(3) & 0x3F);
    length = 4;
  } else {
    return kInvalid;  // a stray continuation byte, or C0, C1, F5..FF
  }
  return {classify(c), length};
}

// End of the run of `cls` characters that starts at `pos`.
std::size_t run_end(std::string_view text, std::size_t pos, CharClass cls) {
  while (pos < text.size()) {
    const auto b = static_cast<unsigned char>(text[pos]);
    if (b < 0x80) {  // the common case, without a call
      if (kAsciiClass[b] != cls) break;
      ++pos;
      continue;
    }
    const Char c = char_at(text, pos);
    if (c.cls != cls) break;
    pos += c.length;
  }
  return pos;
}

// Length of the contraction ('s 't 're 've 'm 'll 'd) at text[pos] == '\'', or 0.
std::size_t contraction_length(std::string_view text, std::size_t pos) {
  const std::size_t left = text.size() - pos;
  if (left < 2) return 0;
  const char a = text[pos + 1];
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (left < 3) return 0;
  const char b = text[pos + 2];
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

}  // namespace

bool Gpt2PreTokenizer::next(std::string_view& word) {
  const std::size_t start = pos_;
  if (start >= text_.size()) return false;
  const Char first = char_at(text_, start);
  const std::size_t contraction = text_[start] == '\'' ? contraction_length(text_, start) : 0;
  std::size_t end = 0;
  if (contraction != 0) {
    end = start + contraction;
  } else if (text_[start] == ' ' && start + 1 < text_.size() &&
             char_at(text_, start + 1).cls != CharClass::kSpace) {
    // " ?\p{L}+", " ?\p{N}+" and " ?[^\s\p{L}\p{N}]+": the space joins the run after it.
    const Char second = char_at(text_, start + 1);
    end = run_end(text_, start + 1 + second.length, second.cls);
  } else if (first.cls != CharClass::kSpace) {
    end = run_end(text_, start + first.length, first.cls);
  } else {
    // "\s+(?!\S)|\s+": a run followed by non-space backtracks one character so that the
    // last one can start the next match (" world"); a single character, or a run that ends
    // the text, is taken whole.
    std::size_t last = start;
    end = start + first.length;
    while (end < text_.size()) {
      const Char c = char_at(text_, end);
      if (c.cls != CharClass::kSpace) break;
      last = end;
      end += c.length;
    }
    if (end < text_.size() && last > start) end = last;
  }
  word = text_.substr(start, end - start);
  pos_ = end;
  return true;
}

std::vector<std::string_view> gpt2_pretokenize(std::string_view text) {
  std::vector<std::string_view> words;
  Gpt2PreTokenizer pre(text);
  std::string_view word;
  while (pre.next(word)) words.push_back(word);
  return words;
}

}  // namespace megatron::data
