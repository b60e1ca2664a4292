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

}  // namespace

std::string printable(std::string_view text, std::size_t max_bytes) {
  std::string out;
  const std::size_t n = text.size() < max_bytes ? text.size() : max_bytes;
  out.reserve(n + 8);
  std::size_t i = 0;
  while (i < n) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    const std::size_t seq = c >= 0x80 ? utf8_sequence(text.substr(0, n), i) : 0;
    if (seq > 0) {
      out.append(text.substr(i, seq));
      i += seq;
      continue;
    }
    if (c == '\\') out += "\\\\";
    else if (c < 0x20 || c >= 0x7f) escape(out, c);
    else out += static_cast<char>(c);
    ++i;
  }
  if (text.size() > n) out += "...";
  return out;
}

std::string one_line(std::string_view message, std::size_t max_bytes) {
  std::string out;
  out.reserve(message.size() < max_bytes ? message.size() : max_bytes);
  std::size_t i = 0;
  while (i < message.size() && i < max_bytes) {
    const unsigned char c = static_cast<unsigned char>(message[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
      ++i;
    } else if (const std::size_t n = c >= 0x80 ? utf8_sequence(message, i) : 0; n > 0) {
      out.append(message.substr(i, n));
      i += n;
    } else {
      escape(out, c);
      ++i;
    }
  }
  if (i < message.size()) out += "...";
  return out;
}

}  // namespace megatron
