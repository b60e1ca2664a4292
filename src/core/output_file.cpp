#include "core/output_file.hpp"

#include <fmt/format.h>

#include <iostream>
#include <optional>

#include "core/error.hpp"

namespace megatron {
namespace {

namespace fs = std::filesystem;

// Where the text goes: the file to replace, or (through) the thing to write into.
struct Destination {
  fs::path target;
  bool through = false;
};

// /proc/self/fd/N, /dev/fd/N and what /dev/stdout leads to name open descriptors (a pipe, a
// terminal, the file a shell redirected to): their "targets" are not files of ours to replace.
bool names_descriptor(const fs::path& p) {
  std::error_code ec;
  const std::string s = fs::absolute(p, ec).lexically_normal().string();
  return s.starts_with("/proc/") || s.starts_with("/dev/fd/");
}

// Follows `path`'s symlinks to the file they end at; nothing when they loop.
std::optional<Destination> destination_of(const fs::path& path) {
  fs::path p = path;
  for (int hops = 0;; ++hops) {
    if (names_descriptor(p)) return Destination{p, true};
    std::error_code ec;
    if (!fs::is_symlink(fs::symlink_status(p, ec))) break;
    if (hops == 40) return std::nullopt;  // Linux's own limit (ELOOP)
    const fs::path to = fs::read_symlink(p, ec);
    if (ec) return std::nullopt;
    p = to.is_absolute() ? to : p.parent_path() / to;
  }
  std::error_code ec;
  const fs::file_status status = fs::status(p, ec);
  return Destination{p, fs::exists(status) && !fs::is_regular_file(status)};
}

}  // namespace

OutputFile::OutputFile(std::string path) : path_(std::move(path)) {
  const std::optional<Destination> d = destination_of(path_);
  if (!d) throw RuntimeFailure(fmt::format("cannot write {}: too many levels of symbolic links", path_));
  target_ = d->target;
  if (d->through) {
    // Appending: a descriptor of a file (`> out`) keeps what was printed to it before.
    std::cout.flush();
    out_.open(target_, std::ios::out | std::ios::app);
  } else {
    temporary_ = target_;
    temporary_ += ".tmp";
    out_.open(temporary_, std::ios::out | std::ios::trunc);
  }
  if (!out_) {
    std::error_code ec;
    if (!temporary_.empty()) fs::remove(temporary_, ec);
    throw RuntimeFailure("cannot write " + path_);
  }
}

OutputFile::~OutputFile() {
  if (committed_ || temporary_.empty()) return;
  out_.close();
  std::error_code ec;
  fs::remove(temporary_, ec);
}

void OutputFile::commit() {
  committed_ = true;
  out_.close();
  std::error_code ec;
  if (temporary_.empty()) {
    if (!out_) throw RuntimeFailure("cannot write " + path_);
    return;
  }
  if (out_) {
    // A replaced file keeps its permissions (a fresh one gets the umask's).
    const fs::file_status old = fs::status(target_, ec);
    if (!ec && fs::is_regular_file(old)) fs::permissions(temporary_, old.permissions(), ec);
    fs::rename(temporary_, target_, ec);
  }
  if (!out_ || ec) {
    fs::remove(temporary_, ec);
    throw RuntimeFailure("cannot write " + path_);
  }
}

void write_output_file(const std::string& path, std::string_view text) {
  OutputFile file(path);
  file.stream() << text;
  file.commit();
}

void refuse_same_file(const std::string& flag, const std::string& path, const std::string& other_flag,
                      const std::string& other) {
  if (path.empty() || other.empty()) return;
  const std::optional<Destination> d = destination_of(path);
  if (!d || d->through) return;  // the writer says what is wrong; or nothing is replaced
  std::error_code ec;
  bool same = false;
  if (fs::exists(d->target, ec) && fs::exists(other, ec)) {
    same = fs::equivalent(d->target, other, ec) && !ec;
  } else {
    const fs::path a = fs::weakly_canonical(d->target, ec);
    const fs::path b = ec ? fs::path() : fs::weakly_canonical(other, ec);
    same = !ec && a == b;
  }
  if (same) {
    throw UserError(fmt::format("{} {} and {} {} are the same file: give {} a path of its own", flag,
                                path, other_flag, other, flag));
  }
}

}  // namespace megatron
