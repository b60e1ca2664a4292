// The user's output paths (--json, --log-samples, --output): written so that what a path names
// survives the writing, and refused up front where an output would overwrite an input.
#pragma once

#include <filesystem>
#include <fstream>
#include <ostream>
#include <string>
#include <string_view>

namespace megatron {

// Text for the user's output `path`. A regular file, or a path with nothing there yet, is
// replaced whole or not at all: the text goes to a temporary beside it, renamed over it on
// commit(). A symlink's final target is replaced that way, so the link stays a link. Anything
// else that exists (a FIFO, a device such as /dev/null, an open descriptor's name such as
// /dev/stdout or /proc/self/fd/N) is written through, appending: a rename would replace it,
// and the text would never reach the reader it leads to.
class OutputFile {
 public:
  // Opens the path (or the temporary). RuntimeFailure "cannot write PATH" when it cannot.
  explicit OutputFile(std::string path);
  // Uncommitted: the temporary is removed and the path left as it was.
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  std::ostream& stream() { return out_; }
  // Flushes and puts the text in place. RuntimeFailure "cannot write PATH" when a write failed
  // (the temporary removed).
  void commit();
  // Whether the text goes straight to the path (a FIFO, a device, a descriptor), no temporary.
  bool through() const { return temporary_.empty(); }

 private:
  std::string path_;                // as the user gave it, for messages
  std::filesystem::path target_;    // the file the text replaces (the symlinks' final target)
  std::filesystem::path temporary_; // empty when written through
  std::ofstream out_;
  bool committed_ = false;
};

// OutputFile(path), `text`, commit().
void write_output_file(const std::string& path, std::string_view text);

// UserError when the output `path` and `other` (an input, or another output) are one file: the
// same path, another spelling of it, or a link to it. An output written through (a device, a
// FIFO) is never refused: nothing is replaced. Either path empty: nothing to compare.
void refuse_same_file(const std::string& flag, const std::string& path, const std::string& other_flag,
                      const std::string& other);

}  // namespace megatron
