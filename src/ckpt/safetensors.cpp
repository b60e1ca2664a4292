#include "ckpt/safetensors.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/error.hpp"

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
  for (int64_t d : shape) n *= d;
  return n;
}

SafetensorsFile::SafetensorsFile(fs::path path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw UserError("cannot open " + path_.string() + ": " + errno_text());
  const auto size = int64_t(fs::file_size(path_));
  const auto bad = [&](const std::string& why) {
    return UserError(fmt::format("{}: not a valid safetensors file: {}", path_.string(), why));
  };
  unsigned char size_bytes[8];
  if (size < 8 || ::pread(fd_, size_bytes, 8, 0) != 8)
    throw bad("shorter than its 8-byte header size");
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | size_bytes[i];
  if (header_size > uint64_t(std::min(kMaxHeader, size - 8))) {
    throw bad(
        fmt::format("header size {} does not fit in the file of {} bytes", header_size, size));
  }
  std::string text(header_size, '\0');
  if (::pread(fd_, text.data(), header_size, 8) != ssize_t(header_size)) throw bad("short header");
  data_start_ = 8 + int64_t(header_size);
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw bad(std::string("header is not JSON: ") + e.what());
  }
  if (!header.is_object()) throw bad("header is not a JSON object");
  const int64_t data_size = size - data_start_;
  try {
    for (const auto& [name, value] : header.items()) {
      if (name == "__metadata__") {
        for (const auto& [k, v] : value.items()) metadata_[k] = v.get<std::string>();
        continue;
      }
      SafetensorsEntry e{.name = name, .dtype_name = value.at("dtype").get<std::string>()};
      e.dtype = dtype_from_safetensors(e.dtype_name);
      e.shape = value.at("shape").get<std::vector<int64_t>>();
      const auto offsets = value.at("data_offsets").get<std::vector<int64_t>>();
      if (offsets.size() != 2) throw bad(name + ": data_offsets must be [begin, end]");
      e.begin = offsets[0];
      e.end = offsets[1];
      const int64_t elem = element_size(e.dtype_name);
      if (elem == 0) throw bad(name + ": unknown dtype " + e.dtype_name);
      if (e.begin < 0 || e.end < e.begin || e.end > data_size) {
        throw bad(fmt::format("{}: bytes [{}, {}) lie outside the {} data bytes", name, e.begin,
                              e.end, data_size));
      }
      if (std::any_of(e.shape.begin(), e.shape.end(), [](int64_t d) { return d < 0; }) ||
          e.end - e.begin != e.numel() * elem) {
        throw bad(fmt::format("{}: {} bytes for {} elements of {}", name, e.end - e.begin,
                              e.numel(), e.dtype_name));
      }
      entries_.push_back(std::move(e));
    }
  } catch (const nlohmann::json::exception& e) {
    throw bad(std::string("header: ") + e.what());
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
