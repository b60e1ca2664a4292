// Fuzz target: a checkpoint (docs/checkpoint-format.md) damaged or hand-edited in ways the input
// chooses, then opened as every command opens one: the metadata (`ckpt inspect`), the reader's
// index checks, `ckpt verify`, and every tensor read whole (`run`, `convert`).
//
// Fuzzing an HDF5 file's raw bytes would mostly find bugs inside libhdf5, so the target is
// structured: one small valid checkpoint is built at the first call, copied for each input, and
// the input drives up to kMaxEdits edits made through the HDF5 API, each the kind of damage a
// file from elsewhere can carry (an attribute of another value or type, a piece re-created
// shorter or in another dtype or storage, a virtual-dataset mapping from another file, dataset
// or rectangle, a link, a missing or truncated file). The empty input is the untouched checkpoint,
// whose tensors must read back as written.
//
// Besides "success or UserError", one more contract: a checkpoint that `ckpt verify` passes must
// read; a read that refuses it is a finding (verify would have vouched for a checkpoint that
// cannot be loaded).
//
// The input, byte by byte (a missing byte reads as 0; make_seeds.py writes seeds this way):
//   edit      op (byte % kOps), then its arguments (see apply_edit)
//   int       tag t: t < 0xE0: t - 16; 0xE0-0xEF: kInts[t - 0xE0]; 0xF0-0xFF: 8 bytes, little-endian
//   text      tag t: t < 0xE0: the next t bytes; else kTexts[t - 0xE0]
//   file      byte % 3: checkpoint.h5, rank_00000.h5, rank_00001.h5
//   object    byte % kObjects.size(), attr byte % kAttributes.size(), tensor byte % 3
#include <hdf5.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "ckpt/checkpoint_reader.hpp"
#include "ckpt/checkpoint_writer.hpp"
#include "ckpt/checksum.hpp"
#include "ckpt/hdf5.hpp"
#include "core/error.hpp"
#include "fuzz_support.hpp"

namespace {
namespace fs = std::filesystem;
namespace ckpt = megatron::ckpt;
namespace h5 = megatron::ckpt::h5;
using megatron::UserError;

constexpr int kMaxEdits = 16;
constexpr int64_t kMaxReadElements = 4096;  // a tensor read whole; larger ones in part

constexpr std::array<const char*, 3> kFiles{"checkpoint.h5", "rank_00000.h5", "rank_00001.h5"};
constexpr std::array<const char*, 3> kTensors{"/model/w", "/model/b", "/optimizer/exp_avg/w"};
constexpr std::array<const char*, 10> kObjects{
    "/", "/model", "/model/w", "/model/b", "/optimizer", "/optimizer/exp_avg", "/optimizer/exp_avg/w",
    "/model/x", "/optimizer/master/w", "/optimizer/momentum/w"};
constexpr std::array<const char*, 34> kAttributes{
    "format", "format_version", "iteration", "consumed_samples", "skipped_iterations",
    "optimizer_steps", "loss_scale", "loss_scale_growth_tracker", "loss_scale_hysteresis_tracker",
    "world_size", "tensor_parallel", "pipeline_parallel", "data_parallel", "virtual_pipeline",
    "sequence_parallel", "distributed_optimizer", "dtype", "optimizer", "seed", "model_keys",
    "model_values", "recipe", "recipe_original", "overrides", "created", "megatron_version",
    "global_shape", "split", "parts", "tp_rank", "tp_size", "shard_offset", "crc32", "rank"};
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr std::array<int64_t, 16> kInts{
    kI64Max, std::numeric_limits<int64_t>::min(), INT32_MAX, int64_t(INT32_MAX) + 1,
    int64_t(UINT32_MAX), int64_t(1) << 32, 1'000'000'000'000, 1'000'000'000'001,
    1'000'000'000'000'000, 1'000'000'000'000'001, int64_t(1) << 24, (int64_t(1) << 24) + 1,
    int64_t(1) << 40, int64_t(1) << 62, kI64Max / 2, 4096};
constexpr std::array<const char*, 32> kTexts{
    "f32", "bf16", "f16", "f64", "none", "rows", "columns", "adamw", "sgd", "megatron-checkpoint",
    "rank_00000.h5", "rank_00001.h5", "rank_00002.h5", "rank_0.h5", "../rank_00000.h5",
    "/tmp/rank_00000.h5", "checkpoint.h5", "%b", "/model/w", "/model/b", "/optimizer/exp_avg/w",
    "/model/x", "model/w", "", "\x01\n\x1b[31m\xff", "model.num_layers\nmodel.hidden_size\n",
    "1\n", ".", "rank_99999.h5", "sub/rank_00000.h5", "Rows", "F32"};

// The input as a stream of arguments.
class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool done() const { return at_ >= size_; }
  uint8_t byte() { return at_ < size_ ? data_[at_++] : 0; }
  int64_t integer() {
    const uint8_t t = byte();
    if (t < 0xE0) return int64_t(t) - 16;
    if (t < 0xF0) return kInts[t - 0xE0];
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t(byte()) << (8 * i);
    return int64_t(v);
  }
  std::string text() {
    const uint8_t t = byte();
    if (t >= 0xE0) return kTexts[t - 0xE0];
    const size_t n = std::min<size_t>(t, size_ - at_);
    std::string s(reinterpret_cast<const char*>(data_ + at_), n);
    at_ += n;
    return s;
  }
  template <class T, size_t N>
  T pick(const std::array<T, N>& list) { return list[byte() % N]; }

 private:
  const uint8_t* data_;
  size_t size_, at_ = 0;
};

// ---------------------------------------------------------------------------------------------
// The checkpoint every input starts from: bf16 weights, f32 Adam state, two rank files.
//   /model/w [4, 3] split rows in 2 parts over 2 tensor ranks: rank 0 holds rows 0 and 2, rank 1
//     rows 1 and 3 (two rectangles per piece)
//   /model/b [5] on rank 1
//   /optimizer/exp_avg/w [4, 3] sliced as a distributed optimizer would: rank 0 elements [0, 4),
//     rank 1 [4, 12) (partial rows: two rectangles per piece)

float w_value(int64_t i) { return float(i + 1); }  // row-major index: exact in bf16
float b_value(int64_t i) { return -float(i) - 0.5f; }
float m_value(int64_t i) { return 0.25f * float(i); }

std::vector<std::byte> bf16_bytes(const std::vector<float>& v) {
  std::vector<std::byte> out(v.size() * 2);
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t bits = uint16_t(std::bit_cast<uint32_t>(v[i]) >> 16);
    std::memcpy(out.data() + 2 * i, &bits, 2);
  }
  return out;
}

std::vector<std::byte> f32_bytes(const std::vector<float>& v) {
  std::vector<std::byte> out(v.size() * 4);
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The files of the untouched checkpoint, by kFiles' order.
const std::array<std::string, 3>& base_files() {
  static const std::array<std::string, 3> files = [] {
    const fs::path dir = megatron::fuzz::scratch() / "base";
    fs::create_directories(dir);
    const auto w_rows = [](std::initializer_list<int64_t> rows) {
      std::vector<float> v;
      for (int64_t r : rows)
        for (int64_t c = 0; c < 3; ++c) v.push_back(w_value(r * 3 + c));
      return bf16_bytes(v);
    };
    const auto values = [](float (*f)(int64_t), int64_t from, int64_t to) {
      std::vector<float> v;
      for (int64_t i = from; i < to; ++i) v.push_back(f(i));
      return v;
    };
    const ckpt::ShardLayout w0{.global_shape = {4, 3}, .split = ckpt::Split::Rows, .parts = 2,
                               .tp_rank = 0, .tp_size = 2};
    ckpt::ShardLayout w1 = w0;
    w1.tp_rank = 1;
    const ckpt::ShardLayout m{.global_shape = {4, 3}};
    const ckpt::ShardLayout b{.global_shape = {5}, .tp_size = 2};
    using megatron::tensor::DType;
    ckpt::write_rank_file(dir, 0, {
        ckpt::Piece{.kind = ckpt::kModel, .name = "w", .layout = w0, .dtype = DType::Bf16,
                    .bytes = w_rows({0, 2})},
        ckpt::Piece{.kind = ckpt::kExpAvg, .name = "w", .layout = m,
                    .bytes = f32_bytes(values(m_value, 0, 4))}});
    ckpt::write_rank_file(dir, 1, {
        ckpt::Piece{.kind = ckpt::kModel, .name = "w", .layout = w1, .dtype = DType::Bf16,
                    .bytes = w_rows({1, 3})},
        ckpt::Piece{.kind = ckpt::kModel, .name = "b", .layout = b, .dtype = DType::Bf16,
                    .bytes = bf16_bytes(values(b_value, 0, 5))},
        ckpt::Piece{.kind = ckpt::kExpAvg, .name = "w", .layout = m, .offset = 4,
                    .bytes = f32_bytes(values(m_value, 4, 12))}});
    ckpt::CheckpointMeta meta;
    meta.state = {.iteration = 7, .consumed_samples = 56, .optimizer_steps = 7};
    meta.layout = {.world = 2, .tensor = 2};
    meta.dtype = "bf16";
    meta.optimizer = "adamw";
    meta.seed = 1234;
    meta.model = {{"model.num_layers", "1"}, {"model.hidden_size", "3"}};
    meta.recipe = "model:\n  num_layers: 1\n  hidden_size: 3\n";
    meta.created = "2026-01-01T00:00:00Z";
    meta.version = "fuzz";
    ckpt::write_index(dir, meta);
    std::array<std::string, 3> out;
    for (size_t i = 0; i < kFiles.size(); ++i) out[i] = slurp(dir / kFiles[i]);
    fs::remove_all(dir);
    return out;
  }();
  return files;
}

// What the untouched checkpoint's tensors hold, in kTensors' order.
float expected_value(size_t tensor, int64_t i) {
  return tensor == 0 ? w_value(i) : tensor == 1 ? b_value(i) : m_value(i);
}

// ---------------------------------------------------------------------------------------------
// Edits, through the HDF5 API. An edit HDF5 refuses (an object that is not there, a selection
// outside its space) is simply not made: only what ends up in the files matters.

class Files {
 public:
  explicit Files(fs::path dir) : dir_(std::move(dir)) {}
  fs::path path(size_t i) const { return dir_ / kFiles[i]; }
  hid_t open(size_t i) {  // for writing, once
    if (!tried_[i]) {
      tried_[i] = true;
      std::error_code ec;
      if (fs::is_regular_file(path(i), ec))
        handles_[i] = h5::Handle(H5Fopen(path(i).c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
    }
    return handles_[i].id();
  }
  void close() {
    for (size_t i = 0; i < handles_.size(); ++i) {
      handles_[i] = h5::Handle();
      tried_[i] = false;
    }
  }

 private:
  fs::path dir_;
  std::array<h5::Handle, 3> handles_;
  std::array<bool, 3> tried_{};
};

// Whether `path` names an object through hard links only (edits never follow a link elsewhere).
bool is_hard(hid_t file, const std::string& path) {
  if (file < 0) return false;
  if (path == "/") return true;
  try {
    return h5::exists(file, path);
  } catch (const UserError&) {
    return false;
  }
}

h5::Handle open_object(hid_t file, const std::string& path) {
  if (!is_hard(file, path)) return {};
  return {H5Oopen(file, path.c_str(), H5P_DEFAULT), H5Oclose};
}

// Element types a piece or index tensor may be re-created with.
h5::Handle element_type(uint8_t choice) {
  using megatron::tensor::DType;
  switch (choice % 6) {
    case 0: return h5::file_type(DType::F32);
    case 1: return h5::file_type(DType::Bf16);
    case 2: return h5::file_type(DType::F16);
    case 3: return {H5Tcopy(H5T_IEEE_F32BE), H5Tclose};
    case 4: return {H5Tcopy(H5T_STD_I32LE), H5Tclose};
    default: return {H5Tcopy(H5T_IEEE_F64LE), H5Tclose};
  }
}

void write_raw_attr(hid_t obj, const std::string& name, hid_t type, hid_t space, const void* data) {
  if (H5Aexists(obj, name.c_str()) > 0) H5Adelete(obj, name.c_str());
  h5::Handle a(H5Acreate2(obj, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (a.valid()) H5Awrite(a.id(), type, data);
}

// Attributes of another type than the reader expects.
void set_odd_attr(hid_t obj, const std::string& name, uint8_t kind, int64_t value) {
  h5::Handle scalar(H5Screate(H5S_SCALAR), H5Sclose);
  switch (kind % 6) {
    case 0: {  // a variable-length string
      h5::Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
      H5Tset_size(type.id(), H5T_VARIABLE);
      const char* text = "f32";
      write_raw_attr(obj, name, type.id(), scalar.id(), &text);
      break;
    }
    case 1: {  // unsigned 64 bits: above INT64_MAX for a negative value
      const uint64_t v = uint64_t(value);
      write_raw_attr(obj, name, H5T_STD_U64LE, scalar.id(), &v);
      break;
    }
    case 2: {
      const float v = float(value);
      write_raw_attr(obj, name, H5T_IEEE_F32LE, scalar.id(), &v);
      break;
    }
    case 3: {
      const int8_t v = int8_t(value);
      write_raw_attr(obj, name, H5T_STD_I8BE, scalar.id(), &v);
      break;
    }
    case 4: {  // two fixed-length strings
      const hsize_t n = 2;
      h5::Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose);
      h5::Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
      H5Tset_size(type.id(), 4);
      write_raw_attr(obj, name, type.id(), space.id(), "rowsnone");
      break;
    }
    default: {  // an attribute with no value at all
      h5::Handle null(H5Screate(H5S_NULL), H5Sclose);
      const int64_t v = 0;
      write_raw_attr(obj, name, H5T_STD_I64LE, null.id(), &v);
      break;
    }
  }
}

// Every attribute of `from` onto `to` (variable-length ones left out).
void copy_attributes(hid_t from, hid_t to) {
  const auto copy = [](hid_t loc, const char* name, const H5A_info_t*, void* target) -> herr_t {
    h5::Handle a(H5Aopen(loc, name, H5P_DEFAULT), H5Aclose);
    h5::Handle type(H5Aget_type(a.id()), H5Tclose);
    h5::Handle space(H5Aget_space(a.id()), H5Sclose);
    if (!a.valid() || !type.valid() || !space.valid() || H5Tdetect_class(type.id(), H5T_VLEN) > 0 ||
        H5Tis_variable_str(type.id()) > 0) {
      return 0;
    }
    const hssize_t n = H5Sget_simple_extent_npoints(space.id());
    std::vector<char> bytes(size_t(std::max<hssize_t>(n, 1)) * H5Tget_size(type.id()) + 1);
    if (n > 0 && H5Aread(a.id(), type.id(), bytes.data()) < 0) return 0;
    write_raw_attr(*static_cast<hid_t*>(target), name, type.id(), space.id(), bytes.data());
    return 0;
  };
  H5Aiterate2(from, H5_INDEX_NAME, H5_ITER_INC, nullptr, copy, &to);
}

// Replaces dataset `path` of `file` by `created` (made at kTemporary), keeping its attributes.
constexpr const char* kTemporary = "/fuzz-new";
void replace_dataset(hid_t file, const std::string& path, hid_t old, h5::Handle created) {
  if (!created.valid()) return;
  copy_attributes(old, created.id());
  created = h5::Handle();
  H5Ldelete(file, path.c_str(), H5P_DEFAULT);
  H5Lmove(file, kTemporary, file, path.c_str(), H5P_DEFAULT, H5P_DEFAULT);
  if (H5Lexists(file, kTemporary, H5P_DEFAULT) > 0) H5Ldelete(file, kTemporary, H5P_DEFAULT);
}

// A piece of a rank file re-created: `numel` elements (0 to 64) of another type, shape or
// storage, its old elements kept where the type is the same, its crc32 that of the new bytes
// (flags bit 0) or the old one. Flags bits 1-2: 1-D, 2-D [n, 1], a scalar; bits 3-4: contiguous,
// chunked, compact or external storage (only combinations HDF5 supports: it crashes on others).
void rewrite_piece(hid_t file, const std::string& path, int64_t numel, uint8_t type_choice,
                   uint8_t flags) {
  if (!is_hard(file, path)) return;
  h5::Handle old(H5Dopen2(file, path.c_str(), H5P_DEFAULT), H5Dclose);
  if (!old.valid()) return;
  const int shape = (flags >> 1) % 4 % 3, storage = (flags >> 3) % 4;
  const hsize_t n = shape == 2 ? 1 : hsize_t(uint64_t(numel) % 65);
  h5::Handle type = element_type(type_choice);
  std::vector<std::byte> bytes(n * H5Tget_size(type.id()), std::byte{0x3c});
  {
    h5::Handle old_type(H5Dget_type(old.id()), H5Tclose);
    h5::Handle old_space(H5Dget_space(old.id()), H5Sclose);
    h5::Handle old_dcpl(H5Dget_create_plist(old.id()), H5Pclose);
    hsize_t old_n = 0;
    if (H5Tequal(old_type.id(), type.id()) > 0 && H5Sget_simple_extent_ndims(old_space.id()) == 1 &&
        H5Pget_layout(old_dcpl.id()) != H5D_VIRTUAL && H5Pget_external_count(old_dcpl.id()) == 0) {
      H5Sget_simple_extent_dims(old_space.id(), &old_n, nullptr);
      const hsize_t keep = std::min(old_n, n), zero = 0;
      if (keep > 0) {
        h5::Handle mem(H5Screate_simple(1, &keep, nullptr), H5Sclose);
        H5Sselect_hyperslab(old_space.id(), H5S_SELECT_SET, &zero, nullptr, &keep, nullptr);
        H5Dread(old.id(), type.id(), mem.id(), old_space.id(), H5P_DEFAULT, bytes.data());
      }
    }
  }
  h5::Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  const hsize_t dims[2] = {n, 1}, chunk[2] = {std::max<hsize_t>(n, 1), 1};
  if (storage == 1 && shape != 2) H5Pset_chunk(dcpl.id(), shape + 1, chunk);
  if (storage == 2) H5Pset_layout(dcpl.id(), H5D_COMPACT);
  if (storage == 3 && shape != 2) {
    const std::string external = (megatron::fuzz::scratch() / "external.bin").string();
    H5Pset_external(dcpl.id(), external.c_str(), 0, H5F_UNLIMITED);
  }
  h5::Handle space(shape == 2 ? H5Screate(H5S_SCALAR) : H5Screate_simple(shape + 1, dims, nullptr),
                   H5Sclose);
  h5::Handle created(H5Dcreate2(file, kTemporary, type.id(), space.id(), H5P_DEFAULT, dcpl.id(),
                                H5P_DEFAULT),
                     H5Dclose);
  if (!created.valid()) return;
  if (n > 0 && H5Dwrite(created.id(), type.id(), H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data()) < 0) {
    created = h5::Handle();
    H5Ldelete(file, kTemporary, H5P_DEFAULT);
    return;
  }
  replace_dataset(file, path, old.id(), std::move(created));
  if (flags & 1) {
    const h5::Handle piece = open_object(file, path);
    if (piece.valid()) h5::set_attr(piece.id(), "crc32", int64_t(ckpt::crc32_of(bytes)));
  }
}

// An index tensor as its pieces: type, shape, layout and mappings, to be edited and re-created.
struct Mapping {
  std::string file, dataset;
  std::vector<hsize_t> start, count;  // in the tensor
  hsize_t source_start = 0, source_count = 0, source_extent = 0, source_stride = 1;
};
struct IndexTensor {
  h5::Handle type;
  std::vector<hsize_t> dims;  // none: a scalar
  bool is_virtual = true;
  std::vector<Mapping> mappings;
};

bool load_index_tensor(hid_t file, const std::string& path, h5::Handle& dataset, IndexTensor& t) {
  if (!is_hard(file, path)) return false;
  dataset = h5::Handle(H5Dopen2(file, path.c_str(), H5P_DEFAULT), H5Dclose);
  if (!dataset.valid()) return false;
  t.type = h5::Handle(H5Dget_type(dataset.id()), H5Tclose);
  h5::Handle space(H5Dget_space(dataset.id()), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space.id());
  if (!t.type.valid() || rank < 0 || rank > 4) return false;
  t.dims.resize(size_t(rank));
  H5Sget_simple_extent_dims(space.id(), t.dims.data(), nullptr);
  h5::Handle dcpl(H5Dget_create_plist(dataset.id()), H5Pclose);
  size_t count = 0;
  t.is_virtual = H5Pget_layout(dcpl.id()) == H5D_VIRTUAL;
  if (!t.is_virtual || H5Pget_virtual_count(dcpl.id(), &count) < 0) return true;
  const auto text = [&](ssize_t (*get)(hid_t, size_t, char*, size_t), size_t i) {
    const ssize_t n = get(dcpl.id(), i, nullptr, 0);
    std::string out(size_t(std::max<ssize_t>(n, 0)) + 1, '\0');
    get(dcpl.id(), i, out.data(), out.size());
    out.resize(size_t(std::max<ssize_t>(n, 0)));
    return out;
  };
  for (size_t i = 0; i < count && i < 64; ++i) {
    Mapping m{.file = text(H5Pget_virtual_filename, i), .dataset = text(H5Pget_virtual_dsetname, i)};
    h5::Handle v(H5Pget_virtual_vspace(dcpl.id(), i), H5Sclose);
    h5::Handle s(H5Pget_virtual_srcspace(dcpl.id(), i), H5Sclose);
    const int vrank = H5Sget_simple_extent_ndims(v.id());
    if (vrank != rank || H5Sget_simple_extent_ndims(s.id()) != 1) continue;
    std::vector<hsize_t> v0(size_t(rank) + 1), v1(size_t(rank) + 1);
    hsize_t s0 = 0, s1 = 0;
    if (H5Sget_select_bounds(v.id(), v0.data(), v1.data()) < 0 ||
        H5Sget_select_bounds(s.id(), &s0, &s1) < 0) {
      continue;
    }
    for (int k = 0; k < rank; ++k) {
      m.start.push_back(v0[size_t(k)]);
      m.count.push_back(v1[size_t(k)] - v0[size_t(k)] + 1);
    }
    m.source_start = s0;
    m.source_count = s1 - s0 + 1;
    H5Sget_simple_extent_dims(s.id(), &m.source_extent, nullptr);
    t.mappings.push_back(std::move(m));
  }
  return true;
}

void store_index_tensor(hid_t file, const std::string& path, hid_t old, const IndexTensor& t) {
  const int rank = int(t.dims.size());
  h5::Handle space(rank == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(rank, t.dims.data(), nullptr),
                   H5Sclose);
  if (!space.valid()) return;
  h5::Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  for (const Mapping& m : t.is_virtual ? t.mappings : std::vector<Mapping>{}) {
    std::vector<hsize_t> start = m.start, count = m.count;
    start.resize(size_t(rank), 0);
    count.resize(size_t(rank), 1);
    h5::Handle v(H5Scopy(space.id()), H5Sclose);
    h5::Handle s(H5Screate_simple(1, &m.source_extent, nullptr), H5Sclose);
    if (rank == 0 || !s.valid() ||
        H5Sselect_hyperslab(v.id(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr) < 0 ||
        H5Sselect_hyperslab(s.id(), H5S_SELECT_SET, &m.source_start, &m.source_stride,
                            &m.source_count, nullptr) < 0) {
      continue;
    }
    H5Pset_virtual(dcpl.id(), v.id(), m.file.c_str(), m.dataset.c_str(), s.id());
  }
  h5::Handle created(H5Dcreate2(file, kTemporary, t.type.id(), space.id(), H5P_DEFAULT, dcpl.id(),
                                H5P_DEFAULT),
                     H5Dclose);
  replace_dataset(file, path, old, std::move(created));
}

hsize_t as_extent(int64_t v) { return hsize_t(v); }

// One edit; `log` names it (MEGATRON_FUZZ_VERBOSE).
void apply_edit(Input& in, Files& files, std::string& log) {
  enum Op : uint8_t {
    kSetInt, kSetText, kSetInts, kSetDouble, kSetOdd, kDeleteAttr, kDeleteObject, kRewritePiece,
    kEditMapping, kReshapeTensor, kAddLink, kAddObject, kFileOp, kOps
  };
  const uint8_t op = in.byte() % kOps;
  log += std::to_string(op) + " ";
  if (op == kFileOp) {
    files.close();
    const fs::path path = files.path(in.byte() % kFiles.size());
    const uint8_t kind = in.byte() % 4, arg = in.byte();
    std::error_code ec;
    if (kind == 0) {
      fs::remove(path, ec);
    } else if (kind == 1) {
      fs::copy_file(files.path(arg % kFiles.size()), path, fs::copy_options::overwrite_existing, ec);
    } else if (kind == 2) {
      const auto size = fs::file_size(path, ec);
      if (!ec) fs::resize_file(path, size * arg / 256, ec);
    } else {
      fs::remove(path, ec);
      fs::create_directory(path, ec);
    }
    return;
  }
  const hid_t file = files.open(in.byte() % kFiles.size());
  switch (op) {
    case kSetInt: case kSetText: case kSetInts: case kSetDouble: case kSetOdd: case kDeleteAttr: {
      const h5::Handle obj = open_object(file, in.pick(kObjects));
      const std::string name = in.pick(kAttributes);
      if (op == kSetInt) {
        const int64_t v = in.integer();
        if (obj.valid()) h5::set_attr(obj.id(), name, v);
      } else if (op == kSetText) {
        const std::string v = in.text();
        if (obj.valid()) h5::set_attr(obj.id(), name, v);
      } else if (op == kSetInts) {
        std::vector<int64_t> v(in.byte() % 4);
        for (int64_t& x : v) x = in.integer();
        if (obj.valid()) h5::set_attr(obj.id(), name, v);
      } else if (op == kSetDouble) {
        const int64_t v = in.integer();
        const uint8_t how = in.byte() % 4;
        const double d = how == 0   ? double(v)
                         : how == 1 ? std::nan("")
                         : how == 2 ? std::numeric_limits<double>::infinity()
                                    : std::bit_cast<double>(v);
        if (obj.valid()) h5::set_attr(obj.id(), name, d);
      } else if (op == kSetOdd) {
        const uint8_t kind = in.byte();
        const int64_t v = in.integer();
        if (obj.valid()) set_odd_attr(obj.id(), name, kind, v);
      } else if (obj.valid() && H5Aexists(obj.id(), name.c_str()) > 0) {
        H5Adelete(obj.id(), name.c_str());
      }
      return;
    }
    case kDeleteObject: {
      const std::string path = in.pick(kObjects);
      if (file >= 0 && path != "/") H5Ldelete(file, path.c_str(), H5P_DEFAULT);
      return;
    }
    case kRewritePiece: {
      const std::string path = in.pick(kTensors);
      const int64_t numel = in.integer();
      const uint8_t type = in.byte(), flags = in.byte();
      rewrite_piece(file, path, numel, type, flags);
      return;
    }
    case kEditMapping: case kReshapeTensor: {
      const std::string path = in.pick(kTensors);
      h5::Handle dataset;
      IndexTensor t;
      const bool loaded = load_index_tensor(file, path, dataset, t);
      if (op == kEditMapping) {
        const uint8_t which = in.byte(), field = in.byte() % 12;
        Mapping scratch;
        Mapping& m = t.mappings.empty() ? scratch : t.mappings[which % t.mappings.size()];
        switch (field) {
          case 0: m.file = in.text(); break;
          case 1: m.dataset = in.text(); break;
          case 2: case 3: {
            const hsize_t v = as_extent(in.integer());
            if (m.start.size() > size_t(field - 2)) m.start[size_t(field - 2)] = v;
            break;
          }
          case 4: case 5: {
            const hsize_t v = as_extent(in.integer());
            if (m.count.size() > size_t(field - 4)) m.count[size_t(field - 4)] = v;
            break;
          }
          case 6: m.source_start = as_extent(in.integer()); break;
          case 7: m.source_count = as_extent(in.integer()); break;
          case 8: m.source_extent = as_extent(in.integer()); break;
          case 9: if (!t.mappings.empty()) t.mappings.push_back(Mapping(m)); break;
          case 10: if (!t.mappings.empty()) t.mappings.erase(t.mappings.begin() + which % t.mappings.size()); break;
          default: m.source_stride = 2; break;  // the same count of every other element
        }
      } else {
        const uint8_t type = in.byte(), rank = in.byte() % 4, flags = in.byte();
        std::vector<hsize_t> dims(rank);
        for (hsize_t& d : dims) d = as_extent(in.integer());
        if (loaded) {
          if (!(flags & 1)) t.type = element_type(type);
          if (!(flags & 2)) t.dims = dims;
          if (flags & 4) t.is_virtual = false;
        }
      }
      if (loaded) store_index_tensor(file, path, dataset.id(), t);
      return;
    }
    case kAddLink: {
      const std::string path = in.pick(kObjects), target = in.pick(kObjects);
      const uint8_t kind = in.byte() % 4;
      const char* other = in.pick(kFiles);
      if (file < 0 || path == "/") return;
      if (H5Lexists(file, path.c_str(), H5P_DEFAULT) > 0) H5Ldelete(file, path.c_str(), H5P_DEFAULT);
      const h5::Handle lcpl = h5::link_create_plist();
      if (kind == 0) {
        H5Lcreate_soft(target.c_str(), file, path.c_str(), lcpl.id(), H5P_DEFAULT);
      } else if (kind == 1) {
        H5Lcreate_external(other, target.c_str(), file, path.c_str(), lcpl.id(), H5P_DEFAULT);
      } else if (kind == 2) {
        if (is_hard(file, target)) H5Lcreate_hard(file, target.c_str(), file, path.c_str(), lcpl.id(), H5P_DEFAULT);
      } else if (is_hard(file, target)) {
        // Without its attributes: Debian's HDF5 1.10 calls a null function pointer converting
        // a variable-length attribute held in dense storage during H5Ocopy (a crash of this
        // harness, not of the reader: tests/fuzz/crashes/checkpoint/ replays the input).
        h5::Handle ocpypl(H5Pcreate(H5P_OBJECT_COPY), H5Pclose);
        H5Pset_copy_object(ocpypl.id(), H5O_COPY_WITHOUT_ATTR_FLAG);
        H5Ocopy(file, target.c_str(), file, path.c_str(), ocpypl.id(), lcpl.id());
      }
      return;
    }
    case kAddObject: {
      const std::string path = in.pick(kObjects);
      const uint8_t kind = in.byte() % 3;
      if (file < 0 || path == "/" || H5Lexists(file, path.c_str(), H5P_DEFAULT) > 0) return;
      const h5::Handle lcpl = h5::link_create_plist();
      if (kind == 0) {
        h5::Handle g(H5Gcreate2(file, path.c_str(), lcpl.id(), H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
      } else {
        const hsize_t n = 3;
        h5::Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose);
        h5::Handle d(H5Dcreate2(file, path.c_str(), kind == 1 ? H5T_IEEE_F32LE : H5T_STD_I32LE,
                                space.id(), lcpl.id(), H5P_DEFAULT, H5P_DEFAULT),
                     H5Dclose);
      }
      return;
    }
    default: return;
  }
}

// Everything a command reads of a checkpoint: `ckpt inspect`'s metadata, the reader's index
// checks, `ckpt verify`, and every tensor read whole (larger ones in part), as `run` and
// `convert` read them, also past the last row (a vocabulary padded further).
void read_everything(const fs::path& dir, bool untouched) {
  ckpt::read_checkpoint_meta(dir);
  const ckpt::CheckpointReader reader(dir);
  const std::string problem = reader.verify(0, 1);
  if (megatron::fuzz::verbose() && !problem.empty())
    std::fprintf(stderr, "  verify: %s\n", problem.c_str());
  try {
    for (const ckpt::TensorInfo& t : reader.tensors()) {
      if (reader.find(t.kind, t.name) != &t) std::abort();
      const int64_t rows = t.shape.at(0), cols = t.shape.size() > 1 ? t.shape[1] : 1;
      const bool whole = rows <= kMaxReadElements / cols;
      const ckpt::Box box{0, whole ? rows : 1, 0, std::min<int64_t>(cols, 64)};
      std::vector<float> values(size_t(box.numel()));
      reader.read_f32(t, {box}, values);
      std::vector<std::byte> raw(values.size() * megatron::tensor::size_of(t.dtype));
      reader.read_raw(t, {box}, raw);
      const ckpt::Box past{rows - 1, 3, 0, box.cols};
      std::vector<float> padded(size_t(past.numel()));
      reader.read_f32(t, {past}, padded, /*zero_past_end=*/false);
      reader.read_f32(t, {past}, padded, /*zero_past_end=*/true);
      if (untouched) {
        const size_t which = size_t(std::find(kTensors.begin(), kTensors.end(), t.path()) - kTensors.begin());
        for (size_t i = 0; i < values.size(); ++i) {
          if (which == kTensors.size() || values[i] != expected_value(which, int64_t(i))) {
            std::fprintf(stderr, "untouched checkpoint: %s[%zu] reads %g\n", t.path().c_str(), i,
                         double(values[i]));
            std::abort();
          }
        }
      }
    }
  } catch (const UserError& e) {
    if (problem.empty()) {
      std::fprintf(stderr, "ckpt verify passed a checkpoint that reading refuses: %s\n", e.what());
      std::abort();
    }
    throw;
  }
  if (untouched && (!problem.empty() || reader.tensors().size() != kTensors.size())) {
    std::fprintf(stderr, "untouched checkpoint refused: %s\n", problem.c_str());
    std::abort();
  }
  if (!problem.empty()) throw UserError(problem);  // what `megatron ckpt verify` prints
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace megatron;
  h5::quiet();
  const std::array<std::string, 3>& base = base_files();
  const fs::path dir = fuzz::scratch() / "iter_0000007";
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir);
  for (size_t i = 0; i < kFiles.size(); ++i) fuzz::write_file(std::string("iter_0000007/") + kFiles[i], base[i]);
  Input in(data, size);
  std::string log;
  {
    Files files(dir);
    for (int i = 0; i < kMaxEdits && !in.done(); ++i) {
      try {
        apply_edit(in, files, log);
      } catch (const std::exception&) {
        // An edit our h5 helpers refused to make (a write HDF5 failed): the files are as they are.
      }
    }
  }
  if (fuzz::verbose()) std::fprintf(stderr, "  edits: %s\n", log.empty() ? "none" : log.c_str());
  return fuzz::expect_user_errors_only([&] { read_everything(dir, size == 0); });
}
