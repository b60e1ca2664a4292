#include "ckpt/safetensors.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "core/checked.hpp"
#include "core/error.hpp"
#include "core/printable.hpp"

namespace megatron::ckpt {
namespace fs = std::filesystem;

namespace {

// A header larger than this is not a safetensors file (the Rust library's own limit).
constexpr int64_t kMaxHeader = 100'000'000;

std::string errno_text() { return std::strerror(errno); }

int64_t element_size(const std::string& dtype_name) {
  static const std::map<std::string, int64_t> sizes{
      {"F64", 8}, {"F32", 4}, {"F16", 2},  {"BF16", 2},    {"I64", 8},
      {"I32", 4}, {"I16", 2}, {"I8", 1},   {"U64", 8},     {"U32", 4},
      {"U16", 2}, {"U8", 1},  {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
  const auto it = sizes.find(dtype_name);
  return it == sizes.end() ? 0 : it->second;
}

void write_all(int fd, const void* data, size_t size, const fs::path& path) {
  const auto* at = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, at, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw RuntimeFailure("cannot write " + path.string() + ": " + errno_text());
    at += n;
    size -= size_t(n);
  }
}

}  // namespace

std::optional<tensor::DType> dtype_from_safetensors(const std::string& name) {
  if (name == "F32") return tensor::DType::F32;
  if (name == "BF16") return tensor::DType::Bf16;
  if (name == "F16") return tensor::DType::F16;
  return std::nullopt;
}

std::string safetensors_dtype_name(tensor::DType dtype) {
  switch (dtype) {
    case tensor::DType::F32:
      return "F32";
    case tensor::DType::Bf16:
      return "BF16";
    case tensor::DType::F16:
      return "F16";
    default:
      break;
  }
  throw UserError(fmt::format("safetensors: dtype {} is not a weight dtype (f32, bf16, f16)",
                              tensor::name(dtype)));
}

int64_t SafetensorsEntry::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n = checked_mul(n, d, "safetensors tensor " + printable(name) + ": elements");
  return n;
}

namespace {

// A JSON integer that fits int64 (not 1.5, not 1e30, not 2^64 - 1), else nullopt.
std::optional<int64_t> json_int64(const nlohmann::json& v) {
  if (!v.is_number_integer()) return std::nullopt;
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)) return std::nullopt;
  return v.get<int64_t>();
}

}  // namespace

SafetensorsFile::SafetensorsFile(fs::path path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw UserError("cannot open " + path_.string() + ": " + errno_text());
  // A throwing constructor runs no destructor: without this, every malformed file would leak
  // its descriptor (found by fuzzing: after a thousand files, nothing could be opened).
  try {
    read_header();
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    throw;
  }
}

void SafetensorsFile::read_header() {
  const auto bad = [&](const std::string& why) {
    return UserError(fmt::format("{}: not a valid safetensors file: {}", path_.string(), why));
  };
  struct stat st{};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) throw bad("not a regular file");
  const auto size = int64_t(st.st_size);
  unsigned char size_bytes[8];
  if (size < 8 || ::pread(fd_, size_bytes, 8, 0) != 8)
    throw bad("shorter than its 8-byte header size");
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | size_bytes[i];
  // Compared as unsigned before any arithmetic: a header size near 2^64 must not wrap.
  if (header_size > uint64_t(std::min(kMaxHeader, size - 8))) {
    throw bad(
        fmt::format("header size {} does not fit in the file of {} bytes", header_size, size));
  }
  std::string text(header_size, '\0');
  if (::pread(fd_, text.data(), header_size, 8) != ssize_t(header_size)) throw bad("short header");
  data_start_ = 8 + int64_t(header_size);
  // A tensor named twice leaves which bytes are its weights ambiguous (the reference reader
  // rejects the byte range left behind); refuse it rather than keep one silently.
  std::set<std::string> names;
  std::string duplicate;
  const nlohmann::json::parser_callback_t note_keys = [&](int depth, nlohmann::json::parse_event_t event,
                                                          nlohmann::json& parsed) {
    if (event == nlohmann::json::parse_event_t::key && depth == 1 && duplicate.empty() &&
        !names.insert(parsed.get<std::string>()).second) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text, note_keys);
  } catch (const nlohmann::json::exception& e) {
    throw bad("header is not JSON: " + printable(e.what(), 200));
  }
  if (!header.is_object()) throw bad("header is not a JSON object");
  if (!duplicate.empty()) throw bad("tensor \"" + printable(duplicate) + "\" appears twice in the header");
  const int64_t data_size = size - data_start_;
  for (const auto& [key, value] : header.items()) {
    const std::string name = printable(key);
    if (key == "__metadata__") {
      if (!value.is_object()) throw bad("__metadata__ is not an object of strings");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string()) throw bad("__metadata__ value of \"" + printable(k) + "\" is not a string");
        metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    if (!value.is_object() || !value.contains("dtype") || !value["dtype"].is_string() ||
        !value.contains("shape") || !value["shape"].is_array() || !value.contains("data_offsets") ||
        !value["data_offsets"].is_array()) {
      throw bad(name + ": expected {\"dtype\": string, \"shape\": [...], \"data_offsets\": [begin, end]}");
    }
    SafetensorsEntry e{.name = key, .dtype_name = value["dtype"].get<std::string>()};
    e.dtype = dtype_from_safetensors(e.dtype_name);
    const int64_t elem = element_size(e.dtype_name);
    if (elem == 0) throw bad(name + ": unknown dtype " + printable(e.dtype_name));
    for (const nlohmann::json& d : value["shape"]) {
      const std::optional<int64_t> dim = json_int64(d);
      if (!dim || *dim < 0) throw bad(name + ": shape " + printable(value["shape"].dump()) + " is not a list of sizes");
      e.shape.push_back(*dim);
    }
    const nlohmann::json& offsets = value["data_offsets"];
    const std::optional<int64_t> begin = offsets.size() == 2 ? json_int64(offsets[0]) : std::nullopt;
    const std::optional<int64_t> end = offsets.size() == 2 ? json_int64(offsets[1]) : std::nullopt;
    if (!begin || !end) throw bad(name + ": data_offsets must be [begin, end]");
    e.begin = *begin;
    e.end = *end;
    if (e.begin < 0 || e.end < e.begin || e.end > data_size) {
      throw bad(fmt::format("{}: bytes [{}, {}) lie outside the {} data bytes", name, e.begin,
                            e.end, data_size));
    }
    int64_t bytes = 0;
    try {
      bytes = checked_mul(e.numel(), elem, name + ": bytes");
    } catch (const UserError& overflow) {
      throw bad(overflow.what());
    }
    if (e.end - e.begin != bytes) {
      throw bad(fmt::format("{}: {} bytes for {} elements of {}", name, e.end - e.begin,
                            e.numel(), e.dtype_name));
    }
    entries_.push_back(std::move(e));
  }
  // Each byte belongs to one tensor at most: sorted by begin, each starts at or after the end of
  // the one before. (Gaps are harmless and left alone.)
  std::vector<const SafetensorsEntry*> by_begin;
  for (const SafetensorsEntry& e : entries_) by_begin.push_back(&e);
  std::sort(by_begin.begin(), by_begin.end(), [](const SafetensorsEntry* a, const SafetensorsEntry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  for (size_t i = 1; i < by_begin.size(); ++i) {
    const SafetensorsEntry& a = *by_begin[i - 1];
    const SafetensorsEntry& b = *by_begin[i];
    if (b.begin < a.end) {
      throw bad(fmt::format("{} (bytes [{}, {})) overlaps {} (bytes [{}, {}))", printable(b.name),
                            b.begin, b.end, printable(a.name), a.begin, a.end));
    }
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (fd_ >= 0) ::close(fd_);
}

const SafetensorsEntry* SafetensorsFile::find(const std::string& name) const {
  for (const SafetensorsEntry& e : entries_) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

void SafetensorsFile::read(const SafetensorsEntry& e, int64_t offset,
                           std::span<std::byte> out) const {
  if (offset < 0 || offset + int64_t(out.size()) > e.end - e.begin) {
    throw RuntimeFailure(fmt::format("{}: read past the end of {}", path_.string(), e.name));
  }
  auto* at = reinterpret_cast<char*>(out.data());
  size_t left = out.size();
  off_t position = off_t(data_start_ + e.begin + offset);
  while (left > 0) {
    const ssize_t n = ::pread(fd_, at, left, position);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw RuntimeFailure("cannot read " + path_.string() + ": " + errno_text());
    at += n;
    left -= size_t(n);
    position += n;
  }
}

SafetensorsWriter::SafetensorsWriter(fs::path path, std::vector<SafetensorsTensor> tensors,
                                     const std::map<std::string, std::string>& metadata)
    : path_(std::move(path)) {
  // ordered_json keeps the file order readable; readers go by data_offsets, not key order.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  for (const SafetensorsTensor& t : tensors) {
    int64_t numel = 1;
    for (int64_t d : t.shape) numel *= d;
    const int64_t bytes = numel * int64_t(tensor::size_of(t.dtype));
    if (header.contains(t.name)) throw RuntimeFailure("safetensors: tensor " + t.name + " twice");
    header[t.name] = {{"dtype", safetensors_dtype_name(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {expected_, expected_ + bytes}}};
    expected_ += bytes;
  }
  std::string text = header.dump();
  // Spaces pad the header so the data starts 8-byte aligned, as the reference writer does.
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw RuntimeFailure("cannot create " + path_.string() + ": " + errno_text());
  unsigned char size_bytes[8];
  for (int i = 0; i < 8; ++i)
    size_bytes[i] = static_cast<unsigned char>(uint64_t(text.size()) >> (8 * i));
  write_all(fd_, size_bytes, 8, path_);
  write_all(fd_, text.data(), text.size(), path_);
}

SafetensorsWriter::~SafetensorsWriter() {
  if (fd_ < 0) return;
  ::close(fd_);
  std::error_code ignored;
  fs::remove(path_, ignored);  // never leave a file that looks whole but is not
}

void SafetensorsWriter::append(std::span<const std::byte> bytes) {
  if (written_ + int64_t(bytes.size()) > expected_) {
    throw RuntimeFailure(fmt::format("{}: more tensor bytes than the header declares ({})",
                                     path_.string(), expected_));
  }
  write_all(fd_, bytes.data(), bytes.size(), path_);
  written_ += int64_t(bytes.size());
}

void SafetensorsWriter::finish() {
  if (written_ != expected_) {
    throw RuntimeFailure(fmt::format("{}: {} tensor bytes written, the header declares {}",
                                     path_.string(), written_, expected_));
  }
  if (::fsync(fd_) != 0 || ::close(fd_) != 0) {
    fd_ = -1;
    throw RuntimeFailure("cannot sync " + path_.string() + ": " + errno_text());
  }
  fd_ = -1;
}

}  // namespace megatron::ckpt
