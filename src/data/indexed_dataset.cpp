#include "data/indexed_dataset.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <utility>

#include "core/error.hpp"

namespace megatron::data {
namespace fs = std::filesystem;

std::size_t token_size(TokenType type) {
  switch (type) {
    case TokenType::U8: case TokenType::I8: return 1;
    case TokenType::I16: case TokenType::U16: return 2;
    case TokenType::I32: case TokenType::F32: return 4;
    case TokenType::I64: case TokenType::F64: return 8;
  }
  return 0;
}

const char* token_type_name(TokenType type) {
  switch (type) {
    case TokenType::U8: return "uint8";
    case TokenType::I8: return "int8";
    case TokenType::I16: return "int16";
    case TokenType::I32: return "int32";
    case TokenType::I64: return "int64";
    case TokenType::F64: return "float64";
    case TokenType::F32: return "float32";
    case TokenType::U16: return "uint16";
  }
  return "unknown";
}

TokenType optimal_token_type(int64_t vocab_size) {
  return vocab_size < 65500 ? TokenType::U16 : TokenType::I32;
}

fs::path bin_path(const std::string& prefix) { return prefix + ".bin"; }
fs::path idx_path(const std::string& prefix) { return prefix + ".idx"; }

namespace {

std::FILE* open_or_throw(const fs::path& path, const char* mode) {
  std::FILE* f = std::fopen(path.c_str(), mode);
  if (!f)
    throw RuntimeFailure(fmt::format("cannot open '{}': {}", path.string(), std::strerror(errno)));
  return f;
}

fs::path temp_name(const fs::path& final_path) {
  return final_path.string() + fmt::format(".tmp-{}", ::getpid());
}

void close_quietly(std::FILE*& f) {
  if (f) std::fclose(f);
  f = nullptr;
}

// Copies `file` (rewound) into `out` in blocks.
void append_file(std::FILE* out, std::FILE* file, const fs::path& out_path) {
  std::rewind(file);
  std::vector<char> block(1 << 20);
  std::size_t n;
  while ((n = std::fread(block.data(), 1, block.size(), file)) > 0)
    if (std::fwrite(block.data(), 1, n, out) != n)
      throw RuntimeFailure(fmt::format("cannot write '{}': {}", out_path.string(), std::strerror(errno)));
}

}  // namespace

IndexedDatasetWriter::IndexedDatasetWriter(std::string prefix, TokenType type)
    : prefix_(std::move(prefix)), type_(type) {
  if (type_ != TokenType::U16 && type_ != TokenType::I32 && type_ != TokenType::I64 &&
      type_ != TokenType::U8)
    throw RuntimeFailure(std::string("token type ") + token_type_name(type_) +
                         " is not supported for writing token datasets");
  const fs::path parent = fs::path(prefix_).parent_path();
  if (!parent.empty() && !fs::is_directory(parent))
    throw UserError(fmt::format("output directory '{}' does not exist", parent.string()));
  bin_tmp_ = temp_name(bin_path(prefix_));
  idx_tmp_ = temp_name(idx_path(prefix_));
  lengths_tmp_ = idx_tmp_.string() + ".lengths";
  docs_tmp_ = idx_tmp_.string() + ".docs";
  // A destructor does not run for a constructor that throws: the files opened so far go here.
  try {
    bin_ = std::fopen(bin_tmp_.c_str(), "wb");
    if (!bin_) {
      // The first file of the output's directory: a directory that cannot take it is the
      // user's to change, and the message names the output, not the temporary file.
      throw UserError(fmt::format("cannot write the dataset {} in '{}': {}; choose a writable "
                                  "output prefix",
                                  prefix_, parent.empty() ? "." : parent.string(),
                                  std::strerror(errno)));
    }
    lengths_ = open_or_throw(lengths_tmp_, "w+b");
    docs_ = open_or_throw(docs_tmp_, "w+b");
    const int64_t zero = 0;
    write_or_throw(docs_, &zero, sizeof zero, docs_tmp_.string());
  } catch (...) {
    remove_temporaries();
    throw;
  }
}

IndexedDatasetWriter::~IndexedDatasetWriter() { remove_temporaries(); }

void IndexedDatasetWriter::remove_temporaries() {
  close_quietly(bin_);
  close_quietly(lengths_);
  close_quietly(docs_);
  std::error_code ignored;
  fs::remove(lengths_tmp_, ignored);
  fs::remove(docs_tmp_, ignored);
  if (!finished_) {
    fs::remove(bin_tmp_, ignored);
    fs::remove(idx_tmp_, ignored);
  }
}

void IndexedDatasetWriter::write_or_throw(std::FILE* file, const void* data, std::size_t bytes,
                                          const std::string& what) {
  if (bytes && std::fwrite(data, 1, bytes, file) != bytes)
    throw RuntimeFailure(fmt::format("cannot write '{}': {}", what, std::strerror(errno)));
}

void IndexedDatasetWriter::add_sequence(std::span<const int32_t> tokens) {
  const std::size_t width = token_size(type_);
  buffer_.resize(tokens.size() * width);
  unsigned char* out = buffer_.data();
  for (std::size_t i = 0; i < tokens.size(); ++i, out += width) {
    const int32_t t = tokens[i];
    if (type_ == TokenType::U16) {
      if (t < 0 || t > 0xFFFF)
        throw RuntimeFailure(fmt::format("token id {} does not fit the dataset's uint16 tokens", t));
      const uint16_t v = static_cast<uint16_t>(t);
      std::memcpy(out, &v, 2);
    } else if (type_ == TokenType::U8) {
      if (t < 0 || t > 0xFF)
        throw RuntimeFailure(fmt::format("token id {} does not fit the dataset's uint8 tokens", t));
      *out = static_cast<unsigned char>(t);
    } else if (type_ == TokenType::I32) {
      std::memcpy(out, &t, 4);
    } else {
      const int64_t v = t;
      std::memcpy(out, &v, 8);
    }
  }
  if (tokens.size() > static_cast<std::size_t>(std::numeric_limits<int32_t>::max()))
    throw UserError(fmt::format("a sequence of {} tokens is longer than the indexed format's "
                                "limit of 2^31 - 1; split the document",
                                tokens.size()));
  write_or_throw(bin_, buffer_.data(), buffer_.size(), bin_tmp_.string());
  const int32_t length = static_cast<int32_t>(tokens.size());
  write_or_throw(lengths_, &length, sizeof length, lengths_tmp_.string());
  ++sequences_;
  tokens_ += static_cast<int64_t>(tokens.size());
}

void IndexedDatasetWriter::end_document() {
  write_or_throw(docs_, &sequences_, sizeof sequences_, docs_tmp_.string());
  ++documents_;
}

void IndexedDatasetWriter::add_dataset(const IndexedDataset& other) {
  if (other.token_type() != type_)
    throw UserError(fmt::format("cannot merge '{}': its tokens are {}, the output's are {}",
                                other.prefix(), token_type_name(other.token_type()),
                                token_type_name(type_)));
  const auto docs = other.document_indices();
  // Sequences are copied through add_sequence so sizes and counts stay consistent.
  std::size_t next_doc = 1;
  for (int64_t i = 0; i < other.sequences(); ++i) {
    const auto tokens = other.tokens(i);
    add_sequence(tokens);
    while (next_doc < docs.size() && docs[next_doc] == i + 1) {
      end_document();
      ++next_doc;
    }
  }
}

void IndexedDatasetWriter::finish() {
  if (std::fflush(bin_) != 0)
    throw RuntimeFailure(fmt::format("cannot write '{}': {}", bin_tmp_.string(), std::strerror(errno)));
  close_quietly(bin_);
  std::fflush(lengths_);
  std::fflush(docs_);

  std::FILE* idx = open_or_throw(idx_tmp_, "wb");
  try {
    const std::string name = idx_tmp_.string();
    write_or_throw(idx, kIndexMagic, sizeof kIndexMagic, name);
    write_or_throw(idx, &kIndexVersion, sizeof kIndexVersion, name);
    const uint8_t code = static_cast<uint8_t>(type_);
    write_or_throw(idx, &code, 1, name);
    const uint64_t n = static_cast<uint64_t>(sequences_);
    const uint64_t doc_count = documents_ + 1;
    write_or_throw(idx, &n, sizeof n, name);
    write_or_throw(idx, &doc_count, sizeof doc_count, name);
    append_file(idx, lengths_, idx_tmp_);
    // Byte offsets follow from the lengths: stream them once more.
    std::rewind(lengths_);
    int64_t offset = 0;
    std::vector<int32_t> lengths(1 << 16);
    std::vector<int64_t> offsets(lengths.size());
    std::size_t got;
    while ((got = std::fread(lengths.data(), sizeof(int32_t), lengths.size(), lengths_)) > 0) {
      for (std::size_t i = 0; i < got; ++i) {
        offsets[i] = offset;
        offset += static_cast<int64_t>(lengths[i]) * static_cast<int64_t>(token_size(type_));
      }
      write_or_throw(idx, offsets.data(), got * sizeof(int64_t), name);
    }
    append_file(idx, docs_, idx_tmp_);
    if (std::fflush(idx) != 0 || ::fsync(::fileno(idx)) != 0)
      throw RuntimeFailure(fmt::format("cannot write '{}': {}", name, std::strerror(errno)));
  } catch (...) {
    std::fclose(idx);
    throw;
  }
  std::fclose(idx);
  // .bin first: a reader only trusts a dataset whose .idx exists.
  for (const auto& [from, to] : {std::pair{bin_tmp_, bin_path(prefix_)}, std::pair{idx_tmp_, idx_path(prefix_)}}) {
    std::error_code error;
    fs::rename(from, to, error);
    if (error)
      throw RuntimeFailure(fmt::format("cannot write '{}': {}", to.string(), error.message()));
  }
  finished_ = true;
}

namespace {

void* map_file(const fs::path& path, std::size_t& size) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) {
    if (errno == ENOENT) throw UserError(fmt::format("dataset file '{}' does not exist", path.string()));
    throw UserError(fmt::format("cannot open '{}': {}", path.string(), std::strerror(errno)));
  }
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw UserError(fmt::format("dataset file '{}' is not a regular file", path.string()));
  }
  size = static_cast<std::size_t>(st.st_size);
  void* map = nullptr;
  if (size > 0) {
    map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
      ::close(fd);
      throw UserError(fmt::format("cannot map '{}': {}", path.string(), std::strerror(errno)));
    }
  }
  ::close(fd);
  return map;
}

constexpr std::size_t kHeaderBytes = sizeof kIndexMagic + 8 + 1 + 8 + 8;
constexpr const char* kRemake = "re-make the dataset with `megatron preprocess`";

}  // namespace

IndexedDataset::IndexedDataset(const std::string& prefix) : prefix_(prefix) {
  const fs::path idx = idx_path(prefix);
  idx_map_ = map_file(idx, idx_size_);
  try {
    const auto* bytes = static_cast<const unsigned char*>(idx_map_);
    auto bad = [&](const std::string& what) {
      return UserError(fmt::format("'{}' is not a valid Megatron index: {}", idx.string(), what));
    };
    if (idx_size_ < kHeaderBytes)
      throw bad(fmt::format("{} bytes, shorter than the {}-byte header", idx_size_, kHeaderBytes));
    if (std::memcmp(bytes, kIndexMagic, sizeof kIndexMagic) != 0) throw bad("the magic is not MMIDIDX");
    uint64_t version;
    std::memcpy(&version, bytes + 9, 8);
    if (version != kIndexVersion) throw bad(fmt::format("version {}, expected 1", version));
    const uint8_t code = bytes[17];
    if (code < 1 || code > 8) throw bad(fmt::format("dtype code {}, expected 1 to 8", code));
    type_ = static_cast<TokenType>(code);
    if (type_ == TokenType::F32 || type_ == TokenType::F64)
      throw UserError(fmt::format(
          "'{}' holds {} values (dtype code {}), not token ids: a token dataset is uint8, int8, "
          "int16, uint16, int32 or int64; make one with `megatron preprocess`",
          idx.string(), token_type_name(type_), code));
    std::memcpy(&sequence_count_, bytes + 18, 8);
    std::memcpy(&document_count_, bytes + 26, 8);
    // Each count is bounded by the file before the size they imply is computed, so the sum
    // cannot overflow and nothing is allocated or mapped on the strength of a header that lies.
    const bool fits = sequence_count_ <= idx_size_ / 12 && document_count_ <= idx_size_ / 8;
    const uint64_t expected = fits ? kHeaderBytes + sequence_count_ * 12 + document_count_ * 8 : 0;
    if (!fits || expected != idx_size_)
      throw UserError(fmt::format(
          "'{}' is corrupt: it has {} bytes, but its header's {} sequences and {} document "
          "indices need {}; {}",
          idx.string(), idx_size_, sequence_count_, document_count_,
          fits ? std::to_string(expected) : "more than that", kRemake));
    if (document_count_ < 1)
      throw UserError(fmt::format(
          "'{}' is corrupt: its header gives 0 document indices, expected at least 1 (the "
          "leading 0); {}",
          idx.string(), kRemake));
    lengths_.resize(sequence_count_);
    if (sequence_count_) std::memcpy(lengths_.data(), bytes + kHeaderBytes, sequence_count_ * 4);
    offsets_ = bytes + kHeaderBytes + sequence_count_ * 4;
    doc_indices_ = bytes + kHeaderBytes + sequence_count_ * 12;

    bin_map_ = map_file(bin_path(prefix), bin_size_);
    validate_index(idx);
  } catch (...) {
    if (idx_map_) ::munmap(idx_map_, idx_size_);
    if (bin_map_) ::munmap(bin_map_, bin_size_);
    throw;
  }
}

void IndexedDataset::validate_index(const fs::path& idx) const {
  auto corrupt = [&](const std::string& what) {
    return UserError(fmt::format("'{}' is corrupt: {}; {}", idx.string(), what, kRemake));
  };
  const uint64_t width = token_size(type_);
  const auto offsets = sequence_offsets();
  // Megatron writes the sequences back to back, so each offset is known before it is read.
  // `end` never exceeds the .bin's size before a length is added, and a length adds under
  // 2^34, so the sum cannot overflow.
  uint64_t end = 0;
  bool stopped_early = false;  // at a sequence past the .bin's end, before the last
  for (std::size_t i = 0; i < sequence_count_; ++i) {
    const int32_t length = lengths_[i];
    if (length < 0)
      throw corrupt(fmt::format("sequence {} has length {}, expected a token count >= 0", i, length));
    const int64_t offset = offsets[i];
    if (offset < 0 || static_cast<uint64_t>(offset) != end)
      throw corrupt(fmt::format("sequence {} starts at byte {} of the .bin, expected {}{}", i,
                                offset, end,
                                i == 0 ? "" : fmt::format(" (where sequence {} ends)", i - 1)));
    end += static_cast<uint64_t>(length) * width;
    if (end > bin_size_) {
      stopped_early = i + 1 < sequence_count_;
      break;
    }
  }
  if (end != bin_size_)
    throw UserError(
        fmt::format("'{}' has {} bytes but its index describes {}{}: the dataset is corrupt; {}",
                    bin_path(prefix_).string(), bin_size_, stopped_early ? "at least " : "", end,
                    kRemake));

  const auto docs = document_indices();
  if (docs[0] != 0)
    throw corrupt(fmt::format("document index 0 is {}, expected 0", docs[0]));
  const auto n = static_cast<int64_t>(sequence_count_);
  for (std::size_t d = 1; d < document_count_; ++d) {
    const int64_t v = docs[d];
    if (v < docs[d - 1])
      throw corrupt(fmt::format("document index {} is {}, below the previous {}; expected "
                                "non-decreasing sequence counts",
                                d, v, docs[d - 1]));
    if (v > n)
      throw corrupt(fmt::format("document index {} is {}, past the {} sequences", d, v, n));
  }
  if (docs.back() != n)
    throw corrupt(fmt::format("the last document index ({}) is {}, expected the sequence count {}",
                              document_count_ - 1, docs.back(), n));
}

IndexedDataset::~IndexedDataset() {
  if (idx_map_) ::munmap(idx_map_, idx_size_);
  if (bin_map_) ::munmap(bin_map_, bin_size_);
}

int64_t IndexedDataset::total_tokens() const {
  int64_t total = 0;
  for (auto n : sequence_lengths()) total += n;
  return total;
}

std::vector<int32_t> IndexedDataset::tokens(int64_t i, int64_t offset, int64_t length) const {
  if (i < 0 || i >= sequences())
    throw std::out_of_range(fmt::format("sequence {} of {} in '{}'", i, sequences(), prefix_));
  const int64_t n = lengths_[i];
  if (length < 0) length = n - offset;
  if (offset < 0 || offset > n || length > n - offset)
    throw std::out_of_range(fmt::format("tokens [{}, {}+{}) of a {}-token sequence", offset, offset, length, n));
  std::vector<int32_t> out(static_cast<std::size_t>(length));
  const auto* base = static_cast<const unsigned char*>(bin_map_) + sequence_offsets()[static_cast<std::size_t>(i)];
  const std::size_t width = token_size(type_);
  for (int64_t k = 0; k < length; ++k) {
    const unsigned char* p = base + (offset + k) * static_cast<int64_t>(width);
    switch (type_) {
      case TokenType::U8: out[k] = *p; break;
      case TokenType::I8: out[k] = static_cast<int8_t>(*p); break;
      case TokenType::U16: { uint16_t v; std::memcpy(&v, p, 2); out[k] = v; break; }
      case TokenType::I16: { int16_t v; std::memcpy(&v, p, 2); out[k] = v; break; }
      case TokenType::I32: { int32_t v; std::memcpy(&v, p, 4); out[k] = v; break; }
      case TokenType::I64: {
        int64_t v;
        std::memcpy(&v, p, 8);
        if (!std::in_range<int32_t>(v))
          throw UserError(fmt::format(
              "dataset '{}': sequence {} holds token id {}, which no vocabulary has (ids are "
              "below 2^31): the dataset is corrupt; {}",
              prefix_, i, v, kRemake));
        out[k] = static_cast<int32_t>(v);
        break;
      }
      case TokenType::F32: case TokenType::F64:
        throw std::logic_error("float datasets are refused when they are opened");
    }
  }
  return out;
}

}  // namespace megatron::data
