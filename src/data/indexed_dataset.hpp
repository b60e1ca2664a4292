// Megatron-LM's indexed dataset format (.bin raw tokens + .idx index), byte for byte:
// a streaming writer with bounded memory and atomic publication, and a memory-mapped reader.
//
// .idx layout (little-endian, no padding): magic "MMIDIDX\0\0", u64 version 1, u8 dtype code,
// u64 sequence count N, u64 document-index count (documents + 1), int32[N] sequence lengths,
// int64[N] byte offsets into .bin, int64[] document indices (the first is 0; each next one is
// the sequence count at a document's end).
#pragma once

#include <cstdint>
#include <compare>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace megatron::data {

// Megatron's dtype codes (megatron/core/datasets/indexed_dataset.py, DType).
enum class TokenType : uint8_t { U8 = 1, I8 = 2, I16 = 3, I32 = 4, I64 = 5, F64 = 6, F32 = 7, U16 = 8 };

std::size_t token_size(TokenType type);
const char* token_type_name(TokenType type);
// Megatron's choice: uint16 when the vocabulary has fewer than 65,500 entries, else int32.
TokenType optimal_token_type(int64_t vocab_size);

inline constexpr char kIndexMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
inline constexpr uint64_t kIndexVersion = 1;

std::filesystem::path bin_path(const std::string& prefix);
std::filesystem::path idx_path(const std::string& prefix);

// Writes {prefix}.bin and {prefix}.idx. Everything goes to temporary names next to the final
// ones; finish() renames both into place, so a failure or an abandoned writer never leaves a
// half-written dataset under the final name. Memory stays constant: the per-sequence lengths
// are spooled to a temporary file, not kept in RAM.
class IndexedDatasetWriter {
 public:
  IndexedDatasetWriter(std::string prefix, TokenType type);
  ~IndexedDatasetWriter();  // removes the temporary files unless finish() succeeded
  IndexedDatasetWriter(const IndexedDatasetWriter&) = delete;
  IndexedDatasetWriter& operator=(const IndexedDatasetWriter&) = delete;

  // Appends one sequence (tokens must fit the token type; throws RuntimeFailure otherwise,
  // and UserError for a sequence longer than the format's 2^31 - 1 tokens).
  void add_sequence(std::span<const int32_t> tokens);
  // Marks the end of a document (after its sequences: one per sentence, or one in all).
  void end_document();
  // Appends every sequence and document of an existing dataset (for merging).
  void add_dataset(const class IndexedDataset& other);
  // Writes the index and publishes both files.
  void finish();

  int64_t sequences() const { return sequences_; }
  int64_t documents() const { return static_cast<int64_t>(documents_); }
  int64_t tokens() const { return tokens_; }

 private:
  void write_or_throw(std::FILE* file, const void* data, std::size_t bytes, const std::string& what);
  void remove_temporaries();  // closes the files; the outputs too unless finish() succeeded

  std::string prefix_;
  TokenType type_;
  std::filesystem::path bin_tmp_, idx_tmp_, lengths_tmp_, docs_tmp_;
  std::FILE* bin_ = nullptr;
  std::FILE* lengths_ = nullptr;
  std::FILE* docs_ = nullptr;
  int64_t sequences_ = 0;
  uint64_t documents_ = 0;
  int64_t tokens_ = 0;
  bool finished_ = false;
  std::vector<unsigned char> buffer_;
};

// A read-only array over bytes that may not be aligned for T (the .idx arrays start at byte 34,
// so their int32/int64 values are misaligned): elements are read with memcpy, which compiles to
// a plain load on x86 and is defined behaviour everywhere.
template <class T>
class UnalignedArray {
 public:
  using value_type = T;
  class const_iterator {
   public:
    using iterator_category = std::random_access_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = const T*;
    using reference = T;
    const_iterator() = default;
    const_iterator(const unsigned char* p) : p_(p) {}
    T operator*() const { T v; std::memcpy(&v, p_, sizeof(T)); return v; }
    T operator[](difference_type n) const { return *(*this + n); }
    const_iterator& operator++() { p_ += sizeof(T); return *this; }
    const_iterator operator++(int) { auto old = *this; ++*this; return old; }
    const_iterator& operator--() { p_ -= sizeof(T); return *this; }
    const_iterator& operator+=(difference_type n) { p_ += n * static_cast<difference_type>(sizeof(T)); return *this; }
    const_iterator operator+(difference_type n) const { auto c = *this; return c += n; }
    const_iterator operator-(difference_type n) const { return *this + (-n); }
    difference_type operator-(const_iterator o) const { return (p_ - o.p_) / static_cast<difference_type>(sizeof(T)); }
    bool operator==(const const_iterator& o) const { return p_ == o.p_; }
    auto operator<=>(const const_iterator& o) const { return p_ <=> o.p_; }

   private:
    const unsigned char* p_ = nullptr;
  };
  using iterator = const_iterator;

  UnalignedArray() = default;
  UnalignedArray(const void* data, std::size_t size)
      : data_(static_cast<const unsigned char*>(data)), size_(size) {}
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T operator[](std::size_t i) const { return begin()[static_cast<std::ptrdiff_t>(i)]; }
  T front() const { return (*this)[0]; }
  T back() const { return (*this)[size_ - 1]; }
  const_iterator begin() const { return const_iterator(data_); }
  const_iterator end() const { return const_iterator(data_ + size_ * sizeof(T)); }

 private:
  const unsigned char* data_ = nullptr;
  std::size_t size_ = 0;
};

// A dataset opened read-only by memory-mapping both files. The whole index is validated at
// open in one pass over it (header counts against the file size without overflow, lengths
// non-negative, offsets contiguous from 0 to the .bin's size, document indices non-decreasing
// from 0 to the sequence count), so every sequence read afterwards lies inside the .bin. A
// float dtype is refused: it holds no token ids. Errors are UserErrors naming the file, the
// entry, what was found and what was expected. Token ids themselves are not read at open; see
// token_ids.hpp for the range check over all of them.
class IndexedDataset {
 public:
  explicit IndexedDataset(const std::string& prefix);
  ~IndexedDataset();
  IndexedDataset(const IndexedDataset&) = delete;
  IndexedDataset& operator=(const IndexedDataset&) = delete;

  TokenType token_type() const { return type_; }
  int64_t sequences() const { return static_cast<int64_t>(sequence_count_); }
  int64_t documents() const { return static_cast<int64_t>(document_count_) - 1; }
  // Copied into aligned memory at open (4 bytes a sequence): index building reads it often.
  std::span<const int32_t> sequence_lengths() const { return lengths_; }
  UnalignedArray<int64_t> sequence_offsets() const { return {offsets_, sequence_count_}; }
  UnalignedArray<int64_t> document_indices() const { return {doc_indices_, document_count_}; }
  int64_t total_tokens() const;

  // Tokens of sequence `i` from `offset`, `length` of them (all when length < 0). An int64
  // token outside int32's range is a UserError, never cut to fit.
  std::vector<int32_t> tokens(int64_t i, int64_t offset = 0, int64_t length = -1) const;
  // The whole .bin, for scans over every token (its offsets are multiples of the token width,
  // and the mapping is page-aligned, so it can be read as an array of the token type).
  std::span<const unsigned char> token_bytes() const {
    return {static_cast<const unsigned char*>(bin_map_), bin_size_};
  }
  const std::string& prefix() const { return prefix_; }

 private:
  std::string prefix_;
  TokenType type_ = TokenType::U16;
  uint64_t sequence_count_ = 0, document_count_ = 0;
  std::vector<int32_t> lengths_;
  const unsigned char* offsets_ = nullptr;      // int64[N], unaligned
  const unsigned char* doc_indices_ = nullptr;  // int64[D + 1], unaligned
  void* idx_map_ = nullptr;
  std::size_t idx_size_ = 0;
  void* bin_map_ = nullptr;
  std::size_t bin_size_ = 0;

  void validate_index(const std::filesystem::path& idx) const;
};

}  // namespace megatron::data
