#include "ckpt/checkpoint_reader.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "ckpt/checkpoint_writer.hpp"
#include "ckpt/checksum.hpp"
#include "core/error.hpp"
#include "core/printable.hpp"
#include "tensor/half.hpp"

namespace megatron::ckpt {
namespace fs = std::filesystem;

namespace {

Split split_attr(hid_t dataset, const std::string& where, const std::string& path) {
  const std::string name = h5::string_attr(dataset, "split");
  if (name != "none" && name != "rows" && name != "columns") {
    throw UserError(fmt::format("{}: tensor {} has split '{}', expected none, rows or columns "
                                "(damaged checkpoint?)",
                                where, printable(path), printable(name)));
  }
  return split_from_name(name);
}

int64_t file_bytes(const fs::path& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) throw UserError(path.string() + ": " + ec.message());
  return int64_t(size);
}

// Dataset t.path() of an open rank file, checked against the index's `t` (1-D, t's dtype, its
// attributes a shard of t, no more elements than the file has bytes for), read whole into
// `bytes` and checked against its CRC-32.
void read_piece(hid_t file, const fs::path& file_path, int64_t bytes_on_disk, const TensorInfo& t,
                std::vector<std::byte>& bytes) {
  const std::string where = file_path.string(), path = t.path();
  h5::Handle d = h5::open_dataset(file, path, where);
  h5::check_plain_storage(d.id());
  const std::vector<int64_t> shape = h5::dataset_shape(d.id());
  const tensor::DType dtype = h5::dtype_of_dataset(d.id());
  if (shape.size() != 1 || dtype != t.dtype) {
    throw UserError(fmt::format("{}: tensor {} is {} of {} dimensions, the index records a {} "
                                "tensor stored as 1-D pieces (damaged checkpoint?)",
                                where, printable(path), tensor::name(dtype), shape.size(),
                                tensor::name(t.dtype)));
  }
  const int64_t n = shape[0], elem = int64_t(tensor::size_of(dtype));
  // The extent is only a number in the file: refuse one the file's bytes cannot hold before
  // allocating for it.
  if (n > bytes_on_disk / elem) {
    throw UserError(fmt::format("{}: tensor {} claims {} elements, more than the file's {} bytes "
                                "hold (truncated or damaged file)",
                                where, printable(path), n, bytes_on_disk));
  }
  const ShardLayout layout{.global_shape = h5::ints_attr(d.id(), "global_shape", kMaxTensorRank),
                           .split = split_attr(d.id(), where, path),
                           .parts = h5::int_attr(d.id(), "parts"),
                           .tp_rank = h5::int_attr(d.id(), "tp_rank"),
                           .tp_size = h5::int_attr(d.id(), "tp_size")};
  check_piece_layout(t, layout, h5::int_attr(d.id(), "shard_offset"), n, where);
  bytes.resize(size_t(n * elem));
  if (n > 0) h5::read_box(d.id(), {0}, {n}, bytes.data());
  const uint32_t crc = crc32_of(bytes);
  const int64_t stored = h5::int_attr(d.id(), "crc32");
  if (int64_t(crc) != stored) {
    throw UserError(fmt::format("{}: tensor {} fails its checksum (stored {:08x}, read {:08x}): the "
                                "file is damaged; load an earlier checkpoint",
                                where, printable(path), uint32_t(stored), crc));
  }
}

}  // namespace

CheckpointReader::CheckpointReader(fs::path dir) : dir_(std::move(dir)) {
  const fs::path index = dir_ / kIndexFile;
  const std::string where = index.string();
  file_ = h5::open_file(index);
  meta_ = read_meta(file_.id(), where);
  for (const std::string& kind : tensor_kinds()) {
    for (const std::string& name : h5::children(file_.id(), "/" + kind)) {
      TensorInfo t{.kind = kind, .name = name};
      h5::Handle d = h5::open_dataset(file_.id(), t.path(), where);
      t.shape = h5::dataset_shape(d.id());
      t.dtype = h5::dtype_of_dataset(d.id());
      t.split = split_attr(d.id(), where, t.path());
      t.parts = h5::int_attr(d.id(), "parts");
      check_tensor(t, meta_, where);
      std::vector<PieceMapping> mappings = read_mappings(d.id(), t);
      check_mappings(t, mappings, meta_.layout.world, where);
      mappings_.emplace(t.path(), std::move(mappings));
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

std::vector<PieceMapping> CheckpointReader::read_mappings(hid_t dataset, const TensorInfo& t) const {
  const std::string index = (dir_ / kIndexFile).string();
  const auto bad = [&](const char* why) {
    return UserError(fmt::format("{}: tensor {}: {} (damaged index?)", index, printable(t.path()), why));
  };
  h5::Handle dcpl(H5Dget_create_plist(dataset), H5Pclose);
  size_t count = 0;
  if (!dcpl.valid() || H5Pget_layout(dcpl.id()) != H5D_VIRTUAL ||
      H5Pget_virtual_count(dcpl.id(), &count) < 0) {
    throw bad("not a virtual dataset");
  }
  const auto text = [&](ssize_t (*get)(hid_t, size_t, char*, size_t), size_t i) {
    const ssize_t n = get(dcpl.id(), i, nullptr, 0);
    if (n < 0) throw bad("cannot read its mappings");
    std::string out(size_t(n) + 1, '\0');
    get(dcpl.id(), i, out.data(), out.size());
    out.resize(size_t(n));
    return out;
  };
  const int rank = int(t.shape.size());
  std::vector<PieceMapping> out;
  for (size_t i = 0; i < count; ++i) {
    PieceMapping m{.file = text(H5Pget_virtual_filename, i), .dataset = text(H5Pget_virtual_dsetname, i)};
    h5::Handle vspace(H5Pget_virtual_vspace(dcpl.id(), i), H5Sclose);
    h5::Handle sspace(H5Pget_virtual_srcspace(dcpl.id(), i), H5Sclose);
    if (!vspace.valid() || !sspace.valid() || H5Sget_simple_extent_ndims(vspace.id()) != rank ||
        H5Sget_simple_extent_ndims(sspace.id()) != 1) {
      throw bad("a mapping of another rank than the tensor's, or from a source that is not 1-D");
    }
    hsize_t v0[2] = {0, 0}, v1[2] = {0, 0}, s0[1] = {0}, s1[1] = {0};
    if (H5Sget_select_bounds(vspace.id(), v0, v1) < 0 || H5Sget_select_bounds(sspace.id(), s0, s1) < 0) {
      throw bad("cannot read its mappings");
    }
    for (int d = 0; d < rank; ++d) {
      if (v1[d] >= hsize_t(t.shape[size_t(d)]) || v0[d] > v1[d]) throw bad("a mapping outside the tensor");
    }
    if (s1[0] >= hsize_t(INT64_MAX / 2)) throw bad("a mapping from past the end of any piece");
    m.box = {int64_t(v0[0]), int64_t(v1[0] - v0[0] + 1), rank > 1 ? int64_t(v0[1]) : 0,
             rank > 1 ? int64_t(v1[1] - v0[1] + 1) : 1};
    m.offset = int64_t(s0[0]);
    // A rectangle filled from one run of elements, as write_index makes them: the selections
    // hold exactly as many elements as their bounds span (no gaps, points or strides).
    const hssize_t selected = H5Sget_select_npoints(vspace.id());
    if (selected != m.box.numel() || H5Sget_select_npoints(sspace.id()) != selected ||
        int64_t(s1[0] - s0[0] + 1) != selected) {
      throw bad("a mapping that is not a rectangle filled from one run of a piece");
    }
    out.push_back(std::move(m));
  }
  return out;
}

const std::vector<std::byte>& CheckpointReader::piece(const TensorInfo& t, const PieceMapping& m) const {
  const std::string key = m.file + ":" + m.dataset;
  if (key == cached_piece_) return cached_bytes_;
  const fs::path path = dir_ / m.file;  // a rank file name: check_mappings refused any other
  auto file = rank_files_.find(m.file);
  if (file == rank_files_.end()) {
    RankFile opened{.file = h5::open_file(path), .bytes = file_bytes(path)};
    file = rank_files_.emplace(m.file, std::move(opened)).first;
  }
  cached_piece_.clear();
  read_piece(file->second.file.id(), path, file->second.bytes, t, cached_bytes_);
  cached_piece_ = key;
  return cached_bytes_;
}

// Rows [box.row0, box.row0 + box.rows) x columns of box, all inside the tensor, row-major into out.
void CheckpointReader::copy_rows(const TensorInfo& t, const Box& box, std::byte* out) const {
  const size_t elem = tensor::size_of(t.dtype);
  int64_t covered = 0;
  for (const PieceMapping& m : mappings_.at(t.path())) {
    const int64_t r0 = std::max(box.row0, m.box.row0), r1 = std::min(box.row0 + box.rows, m.box.row0 + m.box.rows);
    const int64_t c0 = std::max(box.col0, m.box.col0), c1 = std::min(box.col0 + box.cols, m.box.col0 + m.box.cols);
    if (r0 >= r1 || c0 >= c1) continue;
    const std::vector<std::byte>& src = piece(t, m);
    check_piece_extent(m, int64_t(src.size() / elem), (dir_ / m.file).string());
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
                                (dir_ / kIndexFile).string(), printable(t.path()), covered,
                                box.numel()));
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
                                  printable(t.path()), cols, b.col0 + b.cols));
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
  // What the index takes from each rank file: dataset -> the mapping that reaches furthest.
  std::map<std::string, std::map<std::string, const PieceMapping*>> mapped;
  for (const auto& [path, mappings] : mappings_) {
    for (const PieceMapping& m : mappings) {
      const PieceMapping*& furthest = mapped[m.file][m.dataset];
      if (!furthest || furthest->offset + furthest->box.numel() < m.offset + m.box.numel()) furthest = &m;
    }
  }
  for (int64_t rank = part; rank < meta_.layout.world; rank += parts) {
    const std::string name = rank_file_name(int(rank));
    const fs::path path = dir_ / name;
    try {
      h5::Handle file = h5::open_file(path);
      const int64_t bytes_on_disk = file_bytes(path);
      std::map<std::string, int64_t> held;  // dataset -> elements
      std::vector<std::byte> bytes;
      for (const std::string& kind : tensor_kinds()) {
        for (const std::string& tensor : h5::children(file.id(), "/" + kind)) {
          const TensorInfo* t = find(kind, tensor);
          if (!t) {
            throw UserError(fmt::format("{}: tensor /{}/{} is not in the index {} (damaged "
                                        "checkpoint?)",
                                        path.string(), kind, printable(tensor), kIndexFile));
          }
          read_piece(file.id(), path, bytes_on_disk, *t, bytes);
          held[t->path()] = int64_t(bytes.size() / tensor::size_of(t->dtype));
        }
      }
      for (const auto& [dataset, furthest] : mapped[name]) {
        const auto found = held.find(dataset);
        if (found == held.end()) {
          throw UserError(fmt::format("{}: no tensor {}, which the index maps from it (damaged "
                                      "checkpoint?)",
                                      path.string(), printable(dataset)));
        }
        check_piece_extent(*furthest, found->second, path.string());
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
