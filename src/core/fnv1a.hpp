// FNV-1a, 64 bits: a fixed, portable hash of bytes (std::hash promises neither), for names that
// seed streams, cache keys and recognising known texts.
#pragma once

#include <cstdint>
#include <string_view>

namespace megatron {

constexpr uint64_t fnv1a64(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ULL;  // offset basis
  for (const char c : bytes) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;  // prime
  return h;
}

}  // namespace megatron
