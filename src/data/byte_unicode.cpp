#include "data/byte_unicode.hpp"

#include "data/unicode.hpp"

namespace megatron::data {

std::array<char32_t, 256> gpt2_byte_to_unicode() {
  std::array<char32_t, 256> table{};
  char32_t extra = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    table[b] = printable ? static_cast<char32_t>(b) : extra++;
  }
  return table;
}

std::array<unsigned char, 256> gpt2_byte_order() {
  // Printable bytes keep their own code point (< 256) and the rest get 256.. in byte order, so
  // one pass per group lists the bytes by code point, as encoder.py's bytes_to_unicode does.
  const std::array<char32_t, 256> table = gpt2_byte_to_unicode();
  std::array<unsigned char, 256> order{};
  std::size_t next = 0;
  for (int printable = 1; printable >= 0; --printable) {
    for (int b = 0; b < 256; ++b) {
      if ((table[b] == static_cast<char32_t>(b)) == (printable == 1)) {
        order[next++] = static_cast<unsigned char>(b);
      }
    }
  }
  return order;
}

std::string gpt2_spell_bytes(std::string_view bytes) {
  static const std::array<char32_t, 256> table = gpt2_byte_to_unicode();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) unicode::append_utf8(out, table[static_cast<unsigned char>(c)]);
  return out;
}

}  // namespace megatron::data
