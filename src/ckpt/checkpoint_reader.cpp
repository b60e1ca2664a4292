#include "ckpt/checkpoint_reader.hpp"

#include <zlib.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "ckpt/checkpoint_writer.hpp"
#include "core/error.hpp"
#include "tensor/half.hpp"

namespace megatron::ckpt {
namespace fs = std::filesystem;

CheckpointReader::CheckpointReader(fs::path dir) : dir_(std::move(dir)) {
  const fs::path index = dir_ / kIndexFile;
  file_ = h5::open_file(index);
  meta_ = read_meta(file_.id(), index.string());
  for (const std::string& kind : tensor_kinds()) {
    for (const std::string& name : h5::children(file_.id(), "/" + kind)) {
      TensorInfo t{.kind = kind, .name = name};
      h5::Handle d = h5::open_dataset(file_.id(), t.path(), index.string());
      t.shape = h5::dataset_shape(d.id());
      t.dtype = h5::dtype_of_dataset(d.id());
      t.split = split_from_name(h5::string_attr(d.id(), "split"));
      t.parts = h5::int_attr(d.id(), "parts");
      tensors_.push_back(std::move(t));
    }
  }
}

const TensorInfo* CheckpointReader::find(const std::string& kind, const std::string& name) const {
  for (const TensorInfo& t : tensors_) {
    if (t.kind == kind && t.name == name) return &t;
  }
  return nullptr;
}

void CheckpointReader::read_raw(const TensorInfo& t, const std::vector<Box>& boxes,
                                std::span<std::byte> out, bool zero_past_end) const {
  const size_t elem = tensor::size_of(t.dtype);
  if (out.size() != size_t(total_numel(boxes)) * elem) {
    throw RuntimeFailure("checkpoint read of " + t.path() + ": buffer size does not match");
  }
  h5::Handle d = h5::open_dataset(file_.id(), t.path(), (dir_ / kIndexFile).string());
  const int64_t rows = t.shape.at(0), cols = t.shape.size() > 1 ? t.shape[1] : 1;
  std::byte* at = out.data();
  for (const Box& b : boxes) {
    if (b.col0 + b.cols > cols) {
      throw UserError(fmt::format("{}: {} has {} columns, the model needs {}", dir_.string(),
                                  t.path(), cols, b.col0 + b.cols));
    }
    const int64_t inside = std::clamp<int64_t>(rows - b.row0, 0, b.rows);
    std::vector<int64_t> start{b.row0}, count{inside};
    if (t.shape.size() > 1) {
      start.push_back(b.col0);
      count.push_back(b.cols);
    }
    if (inside > 0) h5::read_box(d.id(), start, count, at);
    const size_t row_bytes = size_t(b.cols) * elem;
    std::vector<std::byte> last_row;
    if (inside < b.rows && !zero_past_end) {
      last_row.resize(row_bytes);
      std::vector<int64_t> s{rows - 1}, c{1};
      if (t.shape.size() > 1) {
        s.push_back(b.col0);
        c.push_back(b.cols);
      }
      h5::read_box(d.id(), s, c, last_row.data());
    }
    for (int64_t r = inside; r < b.rows; ++r) {
      std::byte* row = at + size_t(r) * row_bytes;
      if (zero_past_end) std::memset(row, 0, row_bytes);
      else std::memcpy(row, last_row.data(), row_bytes);
    }
    at += size_t(b.numel()) * elem;
  }
}

void CheckpointReader::read_f32(const TensorInfo& t, const std::vector<Box>& boxes,
                                std::span<float> out, bool zero_past_end) const {
  if (t.dtype == tensor::DType::F32) {
    read_raw(t, boxes, std::as_writable_bytes(out), zero_past_end);
    return;
  }
  std::vector<uint16_t> raw(out.size());
  read_raw(t, boxes, std::as_writable_bytes(std::span(raw)), zero_past_end);
  if (t.dtype == tensor::DType::Bf16) {
    tensor::convert(std::span(reinterpret_cast<const tensor::bf16*>(raw.data()), raw.size()), out);
  } else {
    tensor::convert(std::span(reinterpret_cast<const tensor::f16*>(raw.data()), raw.size()), out);
  }
}

std::string CheckpointReader::verify(int part, int parts) const {
  for (int64_t rank = part; rank < meta_.layout.world; rank += parts) {
    const std::string name = rank_file_name(int(rank));
    const fs::path path = dir_ / name;
    try {
      h5::Handle file = h5::open_file(path);
      for (const std::string& kind : tensor_kinds()) {
        for (const std::string& tensor : h5::children(file.id(), "/" + kind)) {
          const std::string dpath = "/" + kind + "/" + tensor;
          h5::Handle d = h5::open_dataset(file.id(), dpath, path.string());
          const int64_t n = h5::dataset_shape(d.id()).at(0);
          std::vector<std::byte> bytes(size_t(n) * tensor::size_of(h5::dtype_of_dataset(d.id())));
          if (n > 0) h5::read_box(d.id(), {0}, {n}, bytes.data());
          uLong crc = crc32(0L, Z_NULL, 0);
          for (size_t at = 0; at < bytes.size(); at += 1u << 30) {
            crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes.data() + at),
                        uInt(std::min<size_t>(bytes.size() - at, 1u << 30)));
          }
          const int64_t stored = h5::int_attr(d.id(), "crc32");
          if (int64_t(uint32_t(crc)) != stored) {
            return fmt::format("{}: tensor {} fails its checksum (stored {:08x}, read {:08x}): the "
                               "file is damaged; load an earlier checkpoint",
                               path.string(), dpath, uint32_t(stored), uint32_t(crc));
          }
        }
      }
    } catch (const std::exception& e) {
      return e.what();
    }
  }
  return "";
}

CheckpointMeta read_checkpoint_meta(const fs::path& dir) {
  const fs::path index = dir / kIndexFile;
  h5::Handle file = h5::open_file(index);
  return read_meta(file.id(), index.string());
}

}  // namespace megatron::ckpt
