// Indexed datasets spelled out byte by byte, independently of the writer, so tests can make
// the corrupt and foreign files (any dtype, any counts) that the writer never would.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "support/bytes.hpp"

namespace megatron::data::test_files {

// The .idx bytes for the given header counts and arrays (the counts are written as given, so
// they can disagree with the arrays).
inline std::string idx_bytes(uint8_t dtype, uint64_t sequences, uint64_t doc_count,
                             const std::vector<int32_t>& lengths,
                             const std::vector<int64_t>& offsets,
                             const std::vector<int64_t>& docs) {
  std::string out = std::string("MMIDIDX\0\0", 9);
  out += test_support::little_endian<uint64_t>({1});
  out += std::string(1, static_cast<char>(dtype));
  out += test_support::little_endian<uint64_t>({sequences});
  out += test_support::little_endian<uint64_t>({doc_count});
  for (int32_t v : lengths) out += test_support::little_endian<int32_t>({v});
  for (int64_t v : offsets) out += test_support::little_endian<int64_t>({v});
  for (int64_t v : docs) out += test_support::little_endian<int64_t>({v});
  return out;
}

inline void write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// A well-formed dataset of token type T (dtype code `dtype`), one document per sequence.
template <class T>
void write_dataset(const std::string& prefix, uint8_t dtype,
                   const std::vector<std::vector<T>>& sequences) {
  std::vector<int32_t> lengths;
  std::vector<int64_t> offsets, docs{0};
  std::string bin;
  for (const auto& s : sequences) {
    offsets.push_back(static_cast<int64_t>(bin.size()));
    lengths.push_back(static_cast<int32_t>(s.size()));
    for (T v : s) bin += test_support::little_endian<T>({v});
    docs.push_back(static_cast<int64_t>(docs.size()));
  }
  write(prefix + ".idx", idx_bytes(dtype, sequences.size(), docs.size(), lengths, offsets, docs));
  write(prefix + ".bin", bin);
}

}  // namespace megatron::data::test_files
