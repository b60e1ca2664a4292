// Damage made to order for checkpoint tests: attributes rewritten, a piece shortened with its
// CRC-32 made to match, an index tensor's mappings edited. Each builds a file that only the
// reader's geometry and metadata checks can refuse.
#pragma once

#include <hdf5.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "ckpt/checksum.hpp"
#include "ckpt/hdf5.hpp"

namespace megatron::test_support {

inline ckpt::h5::Handle open_for_writing(const std::filesystem::path& file) {
  ckpt::h5::quiet();
  return {H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose};
}

// Sets (replaces) attribute `name` of object `object` ("/" for the root) in `file`.
template <class T>
void set_attribute(const std::filesystem::path& file, const std::string& object,
                   const std::string& name, const T& value) {
  ckpt::h5::Handle f = open_for_writing(file);
  ckpt::h5::Handle o(H5Oopen(f.id(), object.c_str(), H5P_DEFAULT), H5Oclose);
  ckpt::h5::set_attr(o.id(), name, value);
}

// Rewrites piece `path` (f32) of a rank file with its first `numel` elements, its attributes
// kept and its crc32 that of the new bytes.
inline void shorten_piece(const std::filesystem::path& file, const std::string& path, int64_t numel) {
  namespace h5 = ckpt::h5;
  h5::Handle f = open_for_writing(file);
  std::vector<std::byte> bytes(size_t(numel) * 4);
  std::vector<int64_t> shape;
  std::string split;
  int64_t parts, tp_rank, tp_size, offset;
  {
    h5::Handle d = h5::open_dataset(f.id(), path, file.string());
    h5::read_box(d.id(), {0}, {numel}, bytes.data());
    shape = h5::ints_attr(d.id(), "global_shape", 2);
    split = h5::string_attr(d.id(), "split");
    parts = h5::int_attr(d.id(), "parts");
    tp_rank = h5::int_attr(d.id(), "tp_rank");
    tp_size = h5::int_attr(d.id(), "tp_size");
    offset = h5::int_attr(d.id(), "shard_offset");
  }
  H5Ldelete(f.id(), path.c_str(), H5P_DEFAULT);
  h5::Handle d = h5::write_vector(f.id(), path, tensor::DType::F32, bytes.data(), numel);
  h5::set_attr(d.id(), "global_shape", shape);
  h5::set_attr(d.id(), "split", split);
  h5::set_attr(d.id(), "parts", parts);
  h5::set_attr(d.id(), "tp_rank", tp_rank);
  h5::set_attr(d.id(), "tp_size", tp_size);
  h5::set_attr(d.id(), "shard_offset", offset);
  h5::set_attr(d.id(), "crc32", int64_t(ckpt::crc32_of(bytes)));
}

// One mapping of a virtual dataset, as H5Pset_virtual takes it (hyperslab blocks).
struct Mapping {
  std::string file, dataset;
  std::vector<hsize_t> start, count;  // in the tensor
  hsize_t source_start = 0, source_count = 0, source_extent = 0;
};

// Replaces index tensor `path` by a virtual dataset of the same type, shape and attributes
// whose mappings are `edit` of the original ones.
inline void edit_mappings(const std::filesystem::path& index, const std::string& path,
                          const std::function<void(std::vector<Mapping>&)>& edit) {
  namespace h5 = ckpt::h5;
  h5::Handle f = open_for_writing(index);
  std::vector<Mapping> maps;
  h5::Handle type, space;
  std::string split;
  int64_t parts;
  {
    h5::Handle d = h5::open_dataset(f.id(), path, index.string());
    type = h5::Handle(H5Dget_type(d.id()), H5Tclose);
    space = h5::Handle(H5Dget_space(d.id()), H5Sclose);
    split = h5::string_attr(d.id(), "split");
    parts = h5::int_attr(d.id(), "parts");
    h5::Handle dcpl(H5Dget_create_plist(d.id()), H5Pclose);
    size_t count = 0;
    H5Pget_virtual_count(dcpl.id(), &count);
    const int rank = H5Sget_simple_extent_ndims(space.id());
    for (size_t i = 0; i < count; ++i) {
      Mapping m;
      m.file.resize(size_t(H5Pget_virtual_filename(dcpl.id(), i, nullptr, 0)) + 1);
      H5Pget_virtual_filename(dcpl.id(), i, m.file.data(), m.file.size());
      m.file.pop_back();
      m.dataset.resize(size_t(H5Pget_virtual_dsetname(dcpl.id(), i, nullptr, 0)) + 1);
      H5Pget_virtual_dsetname(dcpl.id(), i, m.dataset.data(), m.dataset.size());
      m.dataset.pop_back();
      h5::Handle v(H5Pget_virtual_vspace(dcpl.id(), i), H5Sclose);
      h5::Handle s(H5Pget_virtual_srcspace(dcpl.id(), i), H5Sclose);
      hsize_t v0[2], v1[2], s0[1], s1[1];
      H5Sget_select_bounds(v.id(), v0, v1);
      H5Sget_select_bounds(s.id(), s0, s1);
      for (int k = 0; k < rank; ++k) {
        m.start.push_back(v0[k]);
        m.count.push_back(v1[k] - v0[k] + 1);
      }
      m.source_start = s0[0];
      m.source_count = s1[0] - s0[0] + 1;
      H5Sget_simple_extent_dims(s.id(), &m.source_extent, nullptr);
      maps.push_back(std::move(m));
    }
  }
  edit(maps);
  h5::Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  for (const Mapping& m : maps) {
    h5::Handle v(H5Scopy(space.id()), H5Sclose);
    H5Sselect_hyperslab(v.id(), H5S_SELECT_SET, m.start.data(), nullptr, m.count.data(), nullptr);
    h5::Handle s(H5Screate_simple(1, &m.source_extent, nullptr), H5Sclose);
    H5Sselect_hyperslab(s.id(), H5S_SELECT_SET, &m.source_start, nullptr, &m.source_count, nullptr);
    H5Pset_virtual(dcpl.id(), v.id(), m.file.c_str(), m.dataset.c_str(), s.id());
  }
  H5Ldelete(f.id(), path.c_str(), H5P_DEFAULT);
  h5::Handle lcpl = h5::link_create_plist();
  h5::Handle d(H5Dcreate2(f.id(), path.c_str(), type.id(), space.id(), lcpl.id(), dcpl.id(),
                          H5P_DEFAULT),
               H5Dclose);
  h5::set_attr(d.id(), "split", split);
  h5::set_attr(d.id(), "parts", parts);
}

}  // namespace megatron::test_support
