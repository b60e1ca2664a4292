#include "data/bert_pretokenize.hpp"

#include <utf8proc.h>

#include <array>
#include <cstdint>
#include <string>

#include "data/unicode.hpp"

namespace megatron::data {

namespace {

// What BERT does with each ASCII byte. Nearly all of a typical corpus is ASCII, so this table
// is the whole of the hot path; everything else goes through utf8proc's tables.
enum class AsciiKind : uint8_t { kDrop, kSpace, kPunctuation, kWordChar };

constexpr std::array<AsciiKind, 128> make_ascii_kinds() {
  std::array<AsciiKind, 128> kinds{};
  for (int b = 0; b < 128; ++b) {
    if (b == '\t' || b == '\n' || b == '\r' || b == ' ') {
      kinds[b] = AsciiKind::kSpace;
    } else if (b < 32 || b == 127) {
      // Cc, so cleaned away; \v and \f included: the filter runs before whitespace mapping.
      kinds[b] = AsciiKind::kDrop;
    } else if ((b >= 33 && b <= 47) || (b >= 58 && b <= 64) || (b >= 91 && b <= 96) ||
               (b >= 123 && b <= 126)) {
      // BERT counts all ASCII non-alphanumerics as punctuation, including the symbols
      // ($ + < = > ^ ` | ~) that Unicode files under S*, not P*.
      kinds[b] = AsciiKind::kPunctuation;
    } else {
      kinds[b] = AsciiKind::kWordChar;
    }
  }
  return kinds;
}
constexpr auto kAsciiKinds = make_ascii_kinds();

char ascii_lower(unsigned char b) { return static_cast<char>(b >= 'A' && b <= 'Z' ? b + 32 : b); }

const utf8proc_property_t* property(char32_t c) {
  return utf8proc_get_property(static_cast<utf8proc_int32_t>(c));
}

// Hugging Face's "control" test is Rust's is_other(): Cc, Cf, Co (and Cs, which cannot occur
// in decoded text) but not Cn, so unassigned code points survive cleaning.
bool is_other(char32_t c) {
  const auto k = property(c)->category;
  return k == UTF8PROC_CATEGORY_CC || k == UTF8PROC_CATEGORY_CF || k == UTF8PROC_CATEGORY_CO ||
         k == UTF8PROC_CATEGORY_CS;
}

// Hugging Face's ranges. They differ from Google's BERT (and unicode::is_cjk) in one place:
// Extension E is taken to start at U+2B920 rather than U+2B820.
bool is_chinese_char(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

bool is_bert_punctuation(char32_t c) {
  return c < 128 ? kAsciiKinds[c] == AsciiKind::kPunctuation : unicode::is_punctuation(c);
}

// Appends normalised characters to BertWords, closing a word at each space and around each
// punctuation character. Also carries NFD's canonical ordering across input characters (see
// add_mark).
class WordWriter {
 public:
  WordWriter(BertWords& out, bool lower_case) : out_(out), lower_case_(lower_case) {}

  void ascii(unsigned char b) {
    switch (kAsciiKinds[b]) {
      case AsciiKind::kWordChar:
        out_.chars.push_back(lower_case_ ? ascii_lower(b) : static_cast<char>(b));
        break;
      case AsciiKind::kSpace:
        end_word();
        break;
      case AsciiKind::kPunctuation:
        end_word();
        out_.chars.push_back(static_cast<char>(b));
        end_word();
        break;
      case AsciiKind::kDrop:
        return;  // removed before NFD, so it does not separate marks either side of it
    }
    in_mark_run_ = false;  // ASCII has combining class 0
  }

  // A run of ASCII word characters (letters, digits, anything kWordChar), appended at once:
  // the common case, worth a loop without a switch per byte.
  void ascii_word(std::string_view run) {
    std::string& chars = out_.chars;
    const std::size_t at = chars.size();
    chars.resize(at + run.size());
    if (lower_case_) {
      for (std::size_t i = 0; i < run.size(); ++i) {
        chars[at + i] = ascii_lower(static_cast<unsigned char>(run[i]));
      }
    } else {
      run.copy(chars.data() + at, run.size());
    }
    in_mark_run_ = false;
  }

  void code_point(char32_t c) {
    if (c == 0xFFFD || is_other(c)) return;
    if (unicode::is_whitespace(c)) {
      end_word();
      in_mark_run_ = false;
      return;
    }
    const bool chinese = is_chinese_char(c);
    if (chinese) space_around_ideograph();
    if (lower_case_) {
      add_stripped_and_lowered(c);
    } else {
      add(c);
    }
    if (chinese) space_around_ideograph();
  }

  void finish() { end_word(); }

 private:
  void end_word() {
    if (out_.chars.size() != word_begin_) {
      out_.ends.push_back(out_.chars.size());
      word_begin_ = out_.chars.size();
    }
  }

  // The space put on each side of a CJK ideograph: a word boundary, and (class 0) the end of
  // any run of combining marks.
  void space_around_ideograph() {
    end_word();
    in_mark_run_ = false;
  }

  // A character of the final normalised text: space, punctuation or part of a word.
  void add(char32_t c) {
    if (c < 128) {
      ascii(static_cast<unsigned char>(c));
    } else if (unicode::is_whitespace(c)) {
      end_word();
    } else if (is_bert_punctuation(c)) {
      end_word();
      unicode::append_utf8(out_.chars, c);
      end_word();
    } else {
      unicode::append_utf8(out_.chars, c);
    }
  }

  // Accent stripping then lowercasing, Hugging Face's order: NFD, drop Mn, lowercase.
  void add_stripped_and_lowered(char32_t c) {
    // The longest canonical decomposition is 4 code points; 16 leaves room to spare.
    std::array<utf8proc_int32_t, 16> parts{};
    const auto n = utf8proc_decompose_char(static_cast<utf8proc_int32_t>(c), parts.data(),
                                           parts.size(), UTF8PROC_DECOMPOSE, nullptr);
    if (n <= 0 || n > static_cast<utf8proc_ssize_t>(parts.size())) {
      add(unicode::to_lower(c));
      return;
    }
    for (utf8proc_ssize_t i = 0; i < n; ++i) {
      const auto d = static_cast<char32_t>(parts[i]);
      const auto* prop = property(d);
      if (prop->category == UTF8PROC_CATEGORY_MN) {
        if (prop->combining_class == 0) in_mark_run_ = false;
        continue;
      }
      if (prop->combining_class == 0) {
        in_mark_run_ = false;
        add(unicode::to_lower(d));
      } else {
        add_mark(unicode::to_lower(d), prop->combining_class);
      }
    }
  }

  // NFD sorts each run of non-zero combining class characters by class, across input
  // characters. Mn marks are dropped anyway, but a few spacing marks (Mc, e.g. U+1D16D and
  // U+1D165) have a class and survive; they are word characters, so the run's survivors sit
  // at the end of the current word and a stable insertion keeps them sorted.
  void add_mark(char32_t c, int combining_class) {
    std::string& chars = out_.chars;
    if (!in_mark_run_) {
      in_mark_run_ = true;
      mark_run_begin_ = chars.size();
      unicode::append_utf8(chars, c);
      return;
    }
    std::size_t at = mark_run_begin_;
    while (at < chars.size()) {
      utf8proc_int32_t before = 0;
      const auto length =
          utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(chars.data() + at),
                           static_cast<utf8proc_ssize_t>(chars.size() - at), &before);
      if (property(static_cast<char32_t>(before))->combining_class > combining_class) break;
      at += static_cast<std::size_t>(length);
    }
    std::string encoded;
    unicode::append_utf8(encoded, c);
    chars.insert(at, encoded);
  }

  BertWords& out_;
  const bool lower_case_;
  std::size_t word_begin_ = 0;
  bool in_mark_run_ = false;
  std::size_t mark_run_begin_ = 0;
};

}  // namespace

void bert_pretokenize(std::string_view text, bool lower_case, BertWords& out) {
  out.clear();
  out.chars.reserve(text.size());
  WordWriter writer(out, lower_case);
  const auto* bytes = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  std::size_t i = 0;
  while (i < text.size()) {
    if (bytes[i] < 0x80) {
      if (kAsciiKinds[bytes[i]] != AsciiKind::kWordChar) {
        writer.ascii(bytes[i]);
        ++i;
        continue;
      }
      std::size_t end = i + 1;
      while (end < text.size() && bytes[end] < 0x80 &&
             kAsciiKinds[bytes[end]] == AsciiKind::kWordChar) {
        ++end;
      }
      writer.ascii_word(text.substr(i, end - i));
      i = end;
      continue;
    }
    utf8proc_int32_t c = 0;
    auto length = utf8proc_iterate(bytes + i, static_cast<utf8proc_ssize_t>(text.size() - i), &c);
    if (length <= 0) {  // invalid UTF-8: one byte at a time, as U+FFFD
      c = 0xFFFD;
      length = 1;
    }
    writer.code_point(static_cast<char32_t>(c));
    i += static_cast<std::size_t>(length);
  }
  writer.finish();
}

}  // namespace megatron::data
