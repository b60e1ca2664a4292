#include "data/line_reader.hpp"

#include <zlib.h>
#include <zstd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/error.hpp"

namespace megatron::data {

namespace {
constexpr std::size_t kBlock = 1 << 20;

bool ends_with(const std::string& s, const char* suffix) {
  const std::size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// zlib's message without the "path: " it puts in front: the error names the file already.
std::string_view zlib_message(std::string_view message, const std::string& path) {
  if (message.starts_with(path) && message.substr(path.size()).starts_with(": "))
    message.remove_prefix(path.size() + 2);
  return message;
}
}  // namespace

// One of three kinds of source; each reads up to `capacity` decompressed bytes.
struct LineReader::Source {
  enum class Kind { Plain, Gzip, Zstd } kind = Kind::Plain;
  std::FILE* file = nullptr;
  gzFile gz = nullptr;
  ZSTD_DCtx* zstd = nullptr;
  std::vector<char> compressed;
  ZSTD_inBuffer in{nullptr, 0, 0};
  uint64_t consumed = 0;     // compressed bytes consumed (zstd) for progress
  bool file_done = false;    // zstd: the compressed file has been read to its end
  bool frame_done = true;    // zstd: the decoder stands on a frame boundary (an empty file too)

  ~Source() {
    if (file) std::fclose(file);
    if (gz) gzclose(gz);
    if (zstd) ZSTD_freeDCtx(zstd);
  }

  // Returns bytes produced; 0 at end of input. Throws on corrupt or truncated input: a
  // corpus cut short must not pass for a smaller corpus.
  std::size_t read(char* out, std::size_t capacity, const std::string& path) {
    switch (kind) {
      case Kind::Plain: {
        const std::size_t n = std::fread(out, 1, capacity, file);
        if (n == 0 && std::ferror(file))
          throw RuntimeFailure(fmt::format("cannot read '{}': {}", path, std::strerror(errno)));
        return n;
      }
      case Kind::Gzip: {
        const int n = gzread(gz, out, static_cast<unsigned>(capacity));
        int code = Z_OK;
        const char* message = gzerror(gz, &code);
        if (n < 0 && code == Z_ERRNO)
          throw RuntimeFailure(fmt::format("cannot read '{}': {}", path, std::strerror(errno)));
        if (n < 0)
          throw UserError(fmt::format("'{}' is not a valid gzip file: {}", path,
                                      zlib_message(message, path)));
        // zlib reports input that ends before a member's trailer as Z_BUF_ERROR, yet still
        // returns the bytes it got; concatenated members are read through as one stream.
        if (n == 0 && code == Z_BUF_ERROR)
          throw UserError(fmt::format(
              "'{}' is truncated or corrupt: the gzip stream ends before its trailer; re-make "
              "or re-download the file",
              path));
        return static_cast<std::size_t>(n);
      }
      case Kind::Zstd: {
        ZSTD_outBuffer output{out, capacity, 0};
        while (output.pos == 0) {
          if (in.pos == in.size && !file_done) {
            in.size = std::fread(compressed.data(), 1, compressed.size(), file);
            in.pos = 0;
            in.src = compressed.data();
            if (in.size == 0) {
              if (std::ferror(file))
                throw RuntimeFailure(fmt::format("cannot read '{}': {}", path, std::strerror(errno)));
              file_done = true;
            }
          }
          if (file_done && frame_done) return 0;
          const std::size_t before = in.pos;
          const std::size_t rc = ZSTD_decompressStream(zstd, &output, &in);
          consumed += in.pos - before;
          if (ZSTD_isError(rc))
            throw UserError(fmt::format("'{}' is not a valid zstd file: {}", path, ZSTD_getErrorName(rc)));
          // 0 means a frame just ended and everything it holds has been written out.
          frame_done = rc == 0;
          // With no input left, a call that writes nothing can make no more progress.
          if (file_done && output.pos == 0 && !frame_done)
            throw UserError(fmt::format(
                "'{}' is truncated or corrupt: the zstd stream ends inside a frame; re-make or "
                "re-download the file",
                path));
        }
        return output.pos;
      }
    }
    return 0;
  }
};

LineReader::LineReader(std::string path) : path_(std::move(path)), source_(std::make_unique<Source>()) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path_, ec))
    throw UserError(fmt::format("input file '{}' does not exist", path_));
  file_size_ = std::filesystem::file_size(path_, ec);
  if (ends_with(path_, ".gz")) {
    source_->kind = Source::Kind::Gzip;
    source_->gz = gzopen(path_.c_str(), "rb");
    if (!source_->gz) throw UserError(fmt::format("cannot open '{}'", path_));
    gzbuffer(source_->gz, kBlock);
  } else {
    source_->file = std::fopen(path_.c_str(), "rb");
    if (!source_->file)
      throw UserError(fmt::format("cannot open '{}': {}", path_, std::strerror(errno)));
    if (ends_with(path_, ".zst") || ends_with(path_, ".zstd")) {
      source_->kind = Source::Kind::Zstd;
      source_->zstd = ZSTD_createDCtx();
      source_->compressed.resize(ZSTD_DStreamInSize());
    }
  }
}

LineReader::~LineReader() = default;

uint64_t LineReader::bytes_read() const {
  switch (source_->kind) {
    case Source::Kind::Plain: return static_cast<uint64_t>(std::ftell(source_->file));
    case Source::Kind::Gzip: return static_cast<uint64_t>(gzoffset(source_->gz));
    case Source::Kind::Zstd: return source_->consumed;
  }
  return 0;
}

bool LineReader::refill() {
  if (eof_) return false;
  // Drop what has been consumed, then append one block.
  buffer_.erase(0, start_);
  start_ = 0;
  const std::size_t old = buffer_.size();
  buffer_.resize(old + kBlock);
  const std::size_t n = source_->read(buffer_.data() + old, kBlock, path_);
  buffer_.resize(old + n);
  if (n == 0) eof_ = true;
  return n > 0;
}

bool LineReader::next(std::string_view& line) {
  std::size_t search_from = start_;
  while (true) {
    const std::size_t newline = buffer_.find('\n', search_from);
    if (newline != std::string::npos) {
      std::size_t end = newline;
      if (end > start_ && buffer_[end - 1] == '\r') --end;
      line = std::string_view(buffer_).substr(start_, end - start_);
      start_ = newline + 1;
      ++line_number_;
      return true;
    }
    const std::size_t scanned = buffer_.size() - start_;
    if (!refill()) {
      if (start_ >= buffer_.size()) return false;
      // The last line has no newline.
      std::size_t end = buffer_.size();
      if (end > start_ && buffer_[end - 1] == '\r') --end;
      line = std::string_view(buffer_).substr(start_, end - start_);
      start_ = buffer_.size();
      ++line_number_;
      return true;
    }
    search_from = start_ + scanned;
  }
}

}  // namespace megatron::data
