#include "core/printable.hpp"

#include <fmt/format.h>

namespace megatron {
namespace {

void escape(std::string& out, unsigned char c) {
  if (c == '\n') out += "\\n";
  else if (c == '\r') out += "\\r";
  else if (c == '\t') out += "\\t";
  else out += fmt::format("\\x{:02x}", c);
}

// Length of the well-formed UTF-8 sequence starting at text[i] (RFC 3629: no overlongs, no
// surrogates, nothing past U+10FFFF), or 0 when the bytes there are not one.
std::size_t utf8_sequence(std::string_view text, std::size_t i) {
  const auto at = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char c = at(i);
  std::size_t n;
  unsigned char lo = 0x80, hi = 0xbf;  // the second byte's range
  if (c >= 0xc2 && c <= 0xdf) n = 2;
  else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;
    if (c == 0xed) hi = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;
    if (c == 0xf4) hi = 0x8f;
  } else {
    return 0;
  }
  if (i + n > text.size()) return 0;
  if (at(i + 1) < lo || at(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k)
    if (at(i + k) < 0x80 || at(i + k) > 0xbf) return 0;
  return n;
}

// The one escaping loop: printable ASCII and well-formed UTF-8 kept, everything else \xNN
// (a backslash doubled when `double_backslash`, so a quoted value stays unambiguous), at most
// `max_bytes` of input read, "..." when cut.
std::string escape_text(std::string_view text, std::size_t max_bytes, bool double_backslash) {
  const std::string_view head = text.substr(0, max_bytes);
  std::string out;
  out.reserve(head.size() + 8);
  std::size_t i = 0;
  while (i < head.size()) {
    const unsigned char c = static_cast<unsigned char>(head[i]);
    if (const std::size_t n = c >= 0x80 ? utf8_sequence(head, i) : 0; n > 0) {
      out.append(head.substr(i, n));
      i += n;
      continue;
    }
    if (c == '\\' && double_backslash) out += "\\\\";
    else if (c < 0x20 || c >= 0x7f) escape(out, c);
    else out += static_cast<char>(c);
    ++i;
  }
  if (text.size() > head.size()) out += "...";
  return out;
}

}  // namespace

std::string printable(std::string_view text, std::size_t max_bytes) {
  return escape_text(text, max_bytes, true);
}

std::string one_line(std::string_view message, std::size_t max_bytes) {
  return escape_text(message, max_bytes, false);
}

}  // namespace megatron
