// GPT-2's byte-to-unicode alphabet, in which byte-level BPE files (vocab.json, merges.txt) spell
// tokens: shared by code that writes such files so that every writer spells bytes the same way.
#pragma once

#include <array>
#include <string>
#include <string_view>

namespace megatron::data {

// The code point that stands for each byte: printable Latin-1 bytes stand for themselves, the
// other 68 become U+0100.. in byte order (so a space is "Ġ", U+0120, and a newline "Ċ").
std::array<char32_t, 256> gpt2_byte_to_unicode();

// The 256 bytes in the order of GPT-2's vocabulary, whose id i is the byte order[i]: printable
// bytes first, then the others, which is the order of the code points that spell them.
std::array<unsigned char, 256> gpt2_byte_order();

// `bytes` spelt in the alphabet, as UTF-8 ("Ġthe" for " the").
std::string gpt2_spell_bytes(std::string_view bytes);

}  // namespace megatron::data
