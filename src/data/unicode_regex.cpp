#include "data/unicode_regex.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cctype>

#include "core/error.hpp"
#include "core/printable.hpp"

namespace megatron::data {

namespace {

std::size_t utf8_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead >> 5) == 0x6) return 2;
  if ((lead >> 4) == 0xE) return 3;
  if ((lead >> 3) == 0x1E) return 4;
  return 1;
}

}  // namespace

struct UnicodeRegex::Impl {
  pcre2_code* code = nullptr;
};

UnicodeRegex::UnicodeRegex(std::string_view pattern, const std::string& where)
    : impl_(std::make_unique<Impl>()) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  // UCP: \s, \w, \d and POSIX classes by Unicode properties, as `tokenizers`' Oniguruma reads them.
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                              PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &error, &offset, nullptr);
  if (!impl_->code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    throw UserError(where + ": the regular expression '" + printable(pattern, 120) + "' does not compile: " +
                    reinterpret_cast<const char*>(message) + " (at offset " + std::to_string(offset) + ")");
  }
  // The JIT is only a speed-up: where it is unavailable, matching interprets the pattern.
  pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE);
}

UnicodeRegex::~UnicodeRegex() {
  if (impl_ && impl_->code) pcre2_code_free(impl_->code);
}

std::vector<TextSpan> UnicodeRegex::find_all(std::string_view text) const {
  std::vector<TextSpan> out;
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
      pcre2_match_data_create_from_pattern(impl_->code, nullptr), &pcre2_match_data_free);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::size_t from = 0;
  bool has_last = false;
  std::size_t last_end = 0;
  while (from <= text.size()) {
    const int rc = pcre2_match(impl_->code, subject, text.size(), from, PCRE2_NO_UTF_CHECK, match.get(), nullptr);
    if (rc < 0) {
      if (rc == PCRE2_ERROR_NOMATCH) break;
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof message);
      throw UserError(std::string("a tokenizer regex failed to match: ") + reinterpret_cast<const char*>(message));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match.get());
    const auto b = static_cast<std::size_t>(ovector[0]);
    const auto e = static_cast<std::size_t>(ovector[1]);
    if (b == e && has_last && last_end == e) {
      from += from < text.size() ? utf8_length(static_cast<unsigned char>(text[from])) : 1;
      continue;
    }
    from = e;
    has_last = true;
    last_end = e;
    out.push_back({b, e});
  }
  return out;
}

std::string UnicodeRegex::replace_all(std::string_view text, std::string_view content) const {
  std::string out;
  out.reserve(text.size());
  std::size_t at = 0;
  for (const TextSpan& m : find_all(text)) {
    out.append(text.substr(at, m.begin - at));
    out.append(content);
    at = m.end;
  }
  out.append(text.substr(at));
  return out;
}

std::string regex_escape(std::string_view literal) {
  std::string out;
  out.reserve(literal.size() * 2);
  for (const char c : literal) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7F) {
      static constexpr char kHex[] = "0123456789ABCDEF";
      out += "\\x{";
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 15]);
      out.push_back('}');
      continue;
    }
    if (u < 0x80 && !std::isalnum(u) && c != '_' && c != ' ') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

}  // namespace megatron::data
