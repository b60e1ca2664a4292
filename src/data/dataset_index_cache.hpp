// Cache files for dataset indices: a text description of everything that determined the
// indices, then int64 arrays; written atomically once, memory-mapped on every later use.
//
// Layout (little-endian, every field 8-byte aligned):
//   char[8] magic "MGTNIDXC" | u64 version | u64 description bytes B | u64 array count K
//   u64[K] array lengths | description, zero-padded to a multiple of 8 | K int64 arrays
// A load checks magic, version, that the file size is exactly what the header implies, and
// that the stored description equals the expected one; any mismatch means "rebuild".
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace megatron::data {

inline constexpr char kIndexCacheMagic[8] = {'M', 'G', 'T', 'N', 'I', 'D', 'X', 'C'};
inline constexpr uint64_t kIndexCacheVersion = 1;

// 16 hex digits of FNV-1a 64 over the description: the name that tells cache files apart.
// A collision cannot serve wrong indices because the full description is compared on load.
std::string description_hash(std::string_view description);

// Writes the file under a temporary name in the same directory, fsyncs it and renames it
// into place, so readers see either no file or a complete one. Throws RuntimeFailure naming
// the path on any I/O error (the temporary file is removed).
void write_index_cache(const std::filesystem::path& path, std::string_view description,
                       std::span<const std::span<const int64_t>> arrays);

// The arrays of a mapped cache file; `mapping` keeps the memory mapped while anyone holds it.
struct MappedIndexCache {
  std::vector<std::span<const int64_t>> arrays;
  std::shared_ptr<const void> mapping;
};

// Maps `path` read-only and validates it against the header and `description`. Returns nullopt
// (and says why in *why when given) when the file is missing, truncated, of another version,
// holds a different number of arrays, or describes something else.
std::optional<MappedIndexCache> load_index_cache(const std::filesystem::path& path,
                                                 std::string_view description,
                                                 std::size_t array_count,
                                                 std::string* why = nullptr);

// An exclusive advisory lock (flock) on `path`, created if needed, held until destruction. The
// process that gets it first builds the cache; the others block here and then find the file.
// Where the filesystem has no flock the lock is skipped (see docs/datasets.md).
// The dataset's path, and the size and modification time of its files: what tells a cache built
// from it apart from one built from an older copy. Lines ending in '\n', for a description.
std::string dataset_identity(const class IndexedDataset& dataset);

// Creates `dir` if needed; throws UserError naming it when it cannot be written (a read-only
// data directory is the usual cause), before any file is attempted.
void ensure_writable_cache_dir(const std::filesystem::path& dir);

class CacheBuildLock {
 public:
  explicit CacheBuildLock(const std::filesystem::path& path);
  ~CacheBuildLock();
  CacheBuildLock(const CacheBuildLock&) = delete;
  CacheBuildLock& operator=(const CacheBuildLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace megatron::data
