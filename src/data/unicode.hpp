// UTF-8 decoding and the Unicode character classes tokenizers need (letters, numbers,
// whitespace, punctuation, marks, CJK), backed by utf8proc's Unicode tables.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace megatron::data::unicode {

// One code point and where its bytes are in the source text.
struct CodePoint {
  char32_t value;
  uint32_t offset;  // byte offset of the first byte
  uint32_t length;  // 1..4 bytes
};

// Decodes UTF-8. Invalid bytes decode one at a time to U+FFFD (with length 1), so every byte
// of the input belongs to exactly one CodePoint and byte-level round trips stay exact.
std::vector<CodePoint> decode(std::string_view text);

void append_utf8(std::string& out, char32_t value);

// Whether `text` is well-formed UTF-8 (RFC 3629: no overlongs, surrogates or code points past
// U+10FFFF).
bool is_valid_utf8(std::string_view text);
// Bytes as Rust's String::from_utf8_lossy reads them: each maximal ill-formed subpart becomes one
// U+FFFD (so the same text `tokenizers` decodes to).
std::string utf8_lossy(std::string_view bytes);

bool is_letter(char32_t c);       // general category L*
bool is_number(char32_t c);       // general category N*
bool is_whitespace(char32_t c);   // White_Space property (\s in regex engines)
bool is_punctuation(char32_t c);  // general category P*
bool is_mark_nonspacing(char32_t c);  // Mn (accents after NFD)
bool is_control(char32_t c);      // Cc / Cf
bool is_cjk(char32_t c);          // CJK Unified Ideographs blocks, as BERT defines them

bool is_other(char32_t c);        // general category C* (Cc, Cf, Cs, Co, Cn)
bool is_mark(char32_t c);         // general category M* (Mn, Mc, Me)
// \w as Unicode regex engines define it: letters, marks, numbers, connector punctuation.
bool is_word(char32_t c);

char32_t to_lower(char32_t c);
// Canonical decomposition (NFD) of `text`.
std::string nfd(std::string_view text);

enum class NormalForm { Nfc, Nfd, Nfkc, Nfkd };
// `text` (valid UTF-8) in the normal form.
std::string normalize(std::string_view text, NormalForm form);

}  // namespace megatron::data::unicode
