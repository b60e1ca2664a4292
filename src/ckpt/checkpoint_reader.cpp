#include "ckpt/checkpoint_reader.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "ckpt/checkpoint_writer.hpp"
#include "ckpt/checksum.hpp"
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

const std::vector<CheckpointReader::Mapping>& CheckpointReader::mappings(const TensorInfo& t) const {
  auto found = mappings_.find(t.path());
  if (found != mappings_.end()) return found->second;
  const std::string index = (dir_ / kIndexFile).string();
  h5::Handle d = h5::open_dataset(file_.id(), t.path(), index);
  h5::Handle dcpl(H5Dget_create_plist(d.id()), H5Pclose);
  size_t count = 0;
  if (H5Pget_layout(dcpl.id()) != H5D_VIRTUAL || H5Pget_virtual_count(dcpl.id(), &count) < 0) {
    throw UserError(index + ": " + t.path() + " is not a virtual dataset (damaged index?)");
  }
  std::vector<Mapping> out;
  const bool two_d = t.shape.size() > 1;
  for (size_t i = 0; i < count; ++i) {
    Mapping m;
    m.file.resize(size_t(std::max<ssize_t>(H5Pget_virtual_filename(dcpl.id(), i, nullptr, 0), 0)) + 1);
    H5Pget_virtual_filename(dcpl.id(), i, m.file.data(), m.file.size());
    m.file.resize(m.file.size() - 1);
    m.dataset.resize(size_t(std::max<ssize_t>(H5Pget_virtual_dsetname(dcpl.id(), i, nullptr, 0), 0)) + 1);
    H5Pget_virtual_dsetname(dcpl.id(), i, m.dataset.data(), m.dataset.size());
    m.dataset.resize(m.dataset.size() - 1);
    h5::Handle vspace(H5Pget_virtual_vspace(dcpl.id(), i), H5Sclose);
    h5::Handle sspace(H5Pget_virtual_srcspace(dcpl.id(), i), H5Sclose);
    hsize_t v0[2] = {0, 0}, v1[2] = {0, 0}, s0[1] = {0}, s1[1] = {0};
    if (H5Sget_select_bounds(vspace.id(), v0, v1) < 0 || H5Sget_select_bounds(sspace.id(), s0, s1) < 0) {
      throw UserError(index + ": cannot read the mappings of " + t.path() + " (damaged index?)");
    }
    m.box = {int64_t(v0[0]), int64_t(v1[0] - v0[0] + 1), two_d ? int64_t(v0[1]) : 0,
             two_d ? int64_t(v1[1] - v0[1] + 1) : 1};
    m.offset = int64_t(s0[0]);
    out.push_back(std::move(m));
  }
  return mappings_.emplace(t.path(), std::move(out)).first->second;
}

namespace {

// Dataset `path` of an open rank file, read whole into `bytes` and checked against its CRC-32.
void read_checked(hid_t file, const fs::path& file_path, const std::string& path,
                  std::vector<std::byte>& bytes) {
  h5::Handle d = h5::open_dataset(file, path, file_path.string());
  const int64_t n = h5::dataset_shape(d.id()).at(0);
  bytes.resize(size_t(n) * tensor::size_of(h5::dtype_of_dataset(d.id())));
  if (n > 0) h5::read_box(d.id(), {0}, {n}, bytes.data());
  const uint32_t crc = crc32_of(bytes);
  const int64_t stored = h5::int_attr(d.id(), "crc32");
  if (int64_t(crc) != stored) {
    throw UserError(fmt::format("{}: tensor {} fails its checksum (stored {:08x}, read {:08x}): the "
                                "file is damaged; load an earlier checkpoint",
                                file_path.string(), path, uint32_t(stored), crc));
  }
}

}  // namespace

const std::vector<std::byte>& CheckpointReader::piece(const Mapping& m) const {
  const std::string key = m.file + ":" + m.dataset;
  if (key == cached_piece_) return cached_bytes_;
  const fs::path path = dir_ / m.file;
  auto file = rank_files_.find(m.file);
  if (file == rank_files_.end()) file = rank_files_.emplace(m.file, h5::open_file(path)).first;
  cached_piece_.clear();
  read_checked(file->second.id(), path, m.dataset, cached_bytes_);
  cached_piece_ = key;
  return cached_bytes_;
}

// Rows [box.row0, box.row0 + box.rows) x columns of box, all inside the tensor, row-major into out.
void CheckpointReader::copy_rows(const TensorInfo& t, const Box& box, std::byte* out) const {
  const size_t elem = tensor::size_of(t.dtype);
  int64_t covered = 0;
  for (const Mapping& m : mappings(t)) {
    const int64_t r0 = std::max(box.row0, m.box.row0), r1 = std::min(box.row0 + box.rows, m.box.row0 + m.box.rows);
    const int64_t c0 = std::max(box.col0, m.box.col0), c1 = std::min(box.col0 + box.cols, m.box.col0 + m.box.cols);
    if (r0 >= r1 || c0 >= c1) continue;
    const std::vector<std::byte>& src = piece(m);
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t from = m.offset + (r - m.box.row0) * m.box.cols + (c0 - m.box.col0);
      const int64_t to = (r - box.row0) * box.cols + (c0 - box.col0);
      std::memcpy(out + size_t(to) * elem, src.data() + size_t(from) * elem, size_t(c1 - c0) * elem);
    }
    covered += (r1 - r0) * (c1 - c0);
  }
  if (covered != box.numel()) {
    throw UserError(fmt::format("{}: the pieces of {} cover {} of the {} elements read (damaged "
                                "index?)",
                                (dir_ / kIndexFile).string(), t.path(), covered, box.numel()));
  }
}

void CheckpointReader::read_raw(const TensorInfo& t, const std::vector<Box>& boxes,
                                std::span<std::byte> out, bool zero_past_end) const {
  const size_t elem = tensor::size_of(t.dtype);
  if (out.size() != size_t(total_numel(boxes)) * elem) {
    throw RuntimeFailure("checkpoint read of " + t.path() + ": buffer size does not match");
  }
  const int64_t rows = t.shape.at(0), cols = t.shape.size() > 1 ? t.shape[1] : 1;
  std::byte* at = out.data();
  for (const Box& b : boxes) {
    if (b.col0 + b.cols > cols) {
      throw UserError(fmt::format("{}: {} has {} columns, the model needs {}", dir_.string(),
                                  t.path(), cols, b.col0 + b.cols));
    }
    const int64_t inside = std::clamp<int64_t>(rows - b.row0, 0, b.rows);
    if (inside > 0) copy_rows(t, Box{b.row0, inside, b.col0, b.cols}, at);
    const size_t row_bytes = size_t(b.cols) * elem;
    std::vector<std::byte> last_row;
    if (inside < b.rows && !zero_past_end) {
      last_row.resize(row_bytes);
      copy_rows(t, Box{rows - 1, 1, b.col0, b.cols}, last_row.data());
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
      std::vector<std::byte> bytes;
      for (const std::string& kind : tensor_kinds()) {
        for (const std::string& tensor : h5::children(file.id(), "/" + kind)) {
          read_checked(file.id(), path, "/" + kind + "/" + tensor, bytes);
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
