// Reads a text file line by line, transparently decompressing .gz (zlib) and .zst (zstd),
// in large blocks so that multi-gigabyte corpora stream in constant memory.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace megatron::data {

class LineReader {
 public:
  // Throws UserError when the file does not exist or cannot be opened.
  explicit LineReader(std::string path);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // The next line without its '\n' (and without a '\r' before it); false at the end.
  // The view stays valid until the next call.
  bool next(std::string_view& line);

  int64_t line_number() const { return line_number_; }  // 1-based number of the last line
  // Bytes of the file consumed so far (compressed bytes for compressed input) and in all,
  // for progress and ETA.
  uint64_t bytes_read() const;
  uint64_t file_size() const { return file_size_; }
  const std::string& path() const { return path_; }

 private:
  bool refill();  // appends decompressed bytes to buffer_; false at end of input

  struct Source;
  std::string path_;
  std::unique_ptr<Source> source_;
  std::string buffer_;
  std::size_t start_ = 0;  // first unread byte of buffer_
  int64_t line_number_ = 0;
  uint64_t file_size_ = 0;
  bool eof_ = false;
};

}  // namespace megatron::data
