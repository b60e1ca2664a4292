#include "data/dataset_index_cache.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "core/error.hpp"
#include "core/fnv1a.hpp"
#include "data/indexed_dataset.hpp"

namespace megatron::data {
namespace fs = std::filesystem;

namespace {

constexpr uint64_t kHeaderWords = 4;  // magic, version, description bytes, array count

uint64_t padded(uint64_t bytes) { return (bytes + 7) / 8 * 8; }

[[noreturn]] void io_failure(const std::string& what, const fs::path& path) {
  throw RuntimeFailure(
      fmt::format("cannot {} index cache '{}': {}", what, path.string(), std::strerror(errno)));
}

void write_all(int fd, const void* data, std::size_t bytes, const fs::path& path) {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) io_failure("write", path);
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
}

class Mapping {
 public:
  Mapping(void* data, std::size_t size) : data_(data), size_(size) {}
  ~Mapping() { ::munmap(data_, size_); }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  const unsigned char* bytes() const { return static_cast<const unsigned char*>(data_); }

 private:
  void* data_;
  std::size_t size_;
};

uint64_t word_at(const unsigned char* bytes, uint64_t index) {
  uint64_t value;
  std::memcpy(&value, bytes + 8 * index, sizeof value);
  return value;
}

}  // namespace

std::string description_hash(std::string_view description) {
  return fmt::format("{:016x}", fnv1a64(description));
}

void write_index_cache(const fs::path& path, std::string_view description,
                       std::span<const std::span<const int64_t>> arrays) {
  // Unique per process and call, so concurrent writers never share a temporary file.
  static std::atomic<uint64_t> counter{0};
  const fs::path temp = path.string() + fmt::format(".tmp-{}-{}", ::getpid(), counter.fetch_add(1));
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) io_failure("create", temp);
  try {
    std::vector<uint64_t> header{0, kIndexCacheVersion, description.size(), arrays.size()};
    std::memcpy(header.data(), kIndexCacheMagic, sizeof kIndexCacheMagic);
    for (const auto& a : arrays) header.push_back(a.size());
    write_all(fd, header.data(), header.size() * sizeof(uint64_t), temp);
    std::string text(description);
    text.resize(padded(text.size()), '\0');
    write_all(fd, text.data(), text.size(), temp);
    for (const auto& a : arrays) write_all(fd, a.data(), a.size_bytes(), temp);
    if (::fsync(fd) != 0) io_failure("sync", temp);
    if (::close(fd) != 0) io_failure("close", temp);
  } catch (...) {
    ::close(fd);
    ::unlink(temp.c_str());
    throw;
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int saved = errno;
    ::unlink(temp.c_str());
    errno = saved;
    io_failure("publish", path);
  }
}

std::optional<MappedIndexCache> load_index_cache(const fs::path& path, std::string_view description,
                                                 std::size_t array_count, std::string* why) {
  auto miss = [&](std::string reason) -> std::optional<MappedIndexCache> {
    if (why) *why = std::move(reason);
    return std::nullopt;
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return miss(errno == ENOENT ? "no cache file" : std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return miss(std::strerror(errno));
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  const uint64_t fixed = 8 * (kHeaderWords + array_count);
  if (size < fixed) {
    ::close(fd);
    return miss(fmt::format("{} bytes, shorter than the {}-byte header", size, fixed));
  }
  void* data = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);  // the mapping stays valid without the descriptor
  if (data == MAP_FAILED) return miss(std::strerror(errno));
  auto mapping = std::make_shared<Mapping>(data, size);
  const unsigned char* bytes = mapping->bytes();

  if (std::memcmp(bytes, kIndexCacheMagic, sizeof kIndexCacheMagic) != 0)
    return miss("not an index cache file (bad magic)");
  if (const uint64_t v = word_at(bytes, 1); v != kIndexCacheVersion)
    return miss(fmt::format("format version {}, expected {}", v, kIndexCacheVersion));
  const uint64_t description_bytes = word_at(bytes, 2);
  if (const uint64_t k = word_at(bytes, 3); k != array_count)
    return miss(fmt::format("{} arrays, expected {}", k, array_count));
  // Sum the expected size with overflow checks: the lengths come from the file.
  if (description_bytes > size) return miss("description longer than the file");
  uint64_t expected = fixed + padded(description_bytes);
  std::vector<uint64_t> lengths(array_count);
  for (std::size_t i = 0; i < array_count; ++i) {
    lengths[i] = word_at(bytes, kHeaderWords + i);
    if (lengths[i] > size / 8) return miss("array length larger than the file");
    expected += 8 * lengths[i];
  }
  if (size != expected) return miss(fmt::format("{} bytes, the header implies {}", size, expected));
  const std::string_view stored(reinterpret_cast<const char*>(bytes + fixed), description_bytes);
  if (stored != description) return miss("built for a different description");

  MappedIndexCache cache;
  const auto* words = reinterpret_cast<const int64_t*>(bytes + fixed + padded(description_bytes));
  for (const uint64_t n : lengths) {
    cache.arrays.emplace_back(words, n);
    words += n;
  }
  cache.mapping = std::move(mapping);
  return cache;
}

CacheBuildLock::CacheBuildLock(const fs::path& path) {
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) io_failure("create the lock for", path);
  while (::flock(fd_, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    // Filesystems without flock (Lustre mounted without -o flock): go on unlocked. The worst
    // case is several processes building identical files, and the atomic rename makes that safe.
    if (errno == ENOSYS || errno == EOPNOTSUPP || errno == ENOLCK) {
      spdlog::debug("no flock on '{}' ({}); building without the lock", path.string(),
                    std::strerror(errno));
      break;
    }
    ::close(fd_);
    io_failure("lock", path);
  }
}

CacheBuildLock::~CacheBuildLock() {
  ::flock(fd_, LOCK_UN);  // harmless when the lock was never taken
  ::close(fd_);
}

std::string dataset_identity(const IndexedDataset& dataset) {
  const auto stamp = [](const fs::path& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
      throw RuntimeFailure(fmt::format("cannot stat '{}': {}", path.string(), std::strerror(errno)));
    return st;
  };
  const struct stat idx = stamp(idx_path(dataset.prefix()));
  const struct stat bin = stamp(bin_path(dataset.prefix()));
  return fmt::format("dataset: {}\nidx: {} bytes, modified {}.{:09d}\nbin: {} bytes\n",
                     fs::absolute(dataset.prefix()).lexically_normal().string(),
                     int64_t(idx.st_size), int64_t(idx.st_mtim.tv_sec),
                     int64_t(idx.st_mtim.tv_nsec), int64_t(bin.st_size));
}

void ensure_writable_cache_dir(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!ec && ::access(dir.c_str(), W_OK) != 0) ec.assign(errno, std::generic_category());
  if (ec)
    throw UserError(
        fmt::format("cannot write the dataset index cache directory '{}': {}; "
                    "point the data cache at a writable directory",
                    dir.string(), ec.message()));
}

}  // namespace megatron::data
