// Byte-level helpers for file-format tests: read a file whole, and spell values out as
// little-endian bytes independently of the code under test.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <string>

namespace megatron::test_support {

inline std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

template <class T>
std::string little_endian(std::initializer_list<T> values) {
  std::string out;
  for (T v : values)
    for (std::size_t i = 0; i < sizeof(T); ++i)
      out.push_back(static_cast<char>((static_cast<uint64_t>(v) >> (8 * i)) & 0xFF));
  return out;
}

}  // namespace megatron::test_support
