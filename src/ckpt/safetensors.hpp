// Hugging Face's safetensors files: an 8-byte little-endian header size, a JSON header naming
// each tensor's dtype, shape and byte range, then the raw little-endian bytes. Read with pread,
// written tensor by tensor behind a header whose offsets are computed up front.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tensor/dtype.hpp"

namespace megatron::ckpt {

// "F32", "BF16", "F16" <-> the dtypes this project stores; other safetensors dtypes have none.
std::optional<tensor::DType> dtype_from_safetensors(const std::string& name);
std::string safetensors_dtype_name(tensor::DType dtype);  // throws UserError for i32/i64

struct SafetensorsEntry {
  std::string name;
  std::string dtype_name;              // as the file spells it ("F32", "BOOL", ...)
  std::optional<tensor::DType> dtype;  // nullopt for dtypes other than F32/BF16/F16
  std::vector<int64_t> shape;
  int64_t begin = 0, end = 0;  // byte range within the data section
  int64_t numel() const;
};

// An open safetensors file: the header parsed and checked (offsets inside the file, sizes
// matching dtype x shape), tensors read on demand.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(std::filesystem::path path);  // UserError on a malformed file
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }  // header order
  const SafetensorsEntry* find(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Bytes [offset, offset + out.size()) of tensor `e`'s data.
  void read(const SafetensorsEntry& e, int64_t offset, std::span<std::byte> out) const;

 private:
  void read_header();  // parses and checks the header of the open fd_

  std::filesystem::path path_;
  int fd_ = -1;
  int64_t data_start_ = 0;
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

// What a writer is told before any bytes: each tensor's name, dtype and shape, in file order.
struct SafetensorsTensor {
  std::string name;
  tensor::DType dtype = tensor::DType::F32;
  std::vector<int64_t> shape;
};

// Writes the header at once, then takes the tensors' bytes in the declared order, in chunks of
// any size, so a caller holds one tensor (or less) at a time. finish() checks that every byte
// came and syncs the file; a writer destroyed before finish() removes its partial file.
class SafetensorsWriter {
 public:
  SafetensorsWriter(std::filesystem::path path, std::vector<SafetensorsTensor> tensors,
                    const std::map<std::string, std::string>& metadata = {});
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  void append(std::span<const std::byte> bytes);
  void finish();

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  int64_t expected_ = 0;  // data bytes in all
  int64_t written_ = 0;
};

}  // namespace megatron::ckpt
