#include "ckpt/hdf5.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/printable.hpp"

namespace megatron::ckpt::h5 {
namespace {

// "file.h5:/model/x" for messages.
std::string describe(hid_t obj) {
  std::string file(1024, '\0'), name(1024, '\0');
  const ssize_t f = H5Fget_name(obj, file.data(), file.size());
  const ssize_t n = H5Iget_name(obj, name.data(), name.size());
  file.resize(f > 0 ? std::min(size_t(f), file.size() - 1) : 0);
  name.resize(n > 0 ? std::min(size_t(n), name.size() - 1) : 0);
  // Object names come from the file: escaped, so a damaged file cannot break the error line.
  if (!name.empty() && name != "/") {
    file += ':';
    file += printable(name);
  }
  return file;
}

[[noreturn]] void fail_read(const std::string& what) { throw UserError(what); }
[[noreturn]] void fail_write(const std::string& what) { throw RuntimeFailure(what); }

Handle attr_handle(hid_t obj, const std::string& name) {
  const hid_t a = H5Aopen(obj, name.c_str(), H5P_DEFAULT);
  if (a < 0) fail_read(describe(obj) + ": missing attribute '" + name + "' (not a megatron checkpoint, or damaged)");
  return {a, H5Aclose};
}

// The attribute's element count; H5Aread writes that many elements, so a reader that expects
// one value must refuse an array before reading (a damaged file must not overrun the buffer).
hssize_t attr_points(hid_t obj, hid_t attr, const std::string& name) {
  Handle space(H5Aget_space(attr), H5Sclose);
  const hssize_t n = space.valid() ? H5Sget_simple_extent_npoints(space.id()) : -1;
  if (n < 0) fail_read(describe(obj) + ": cannot read attribute '" + name + "' (damaged file?)");
  return n;
}

// An attribute of one value of `type_class`, open and checked.
Handle scalar_attr(hid_t obj, const std::string& name, H5T_class_t type_class, const char* what) {
  Handle a = attr_handle(obj, name);
  Handle type(H5Aget_type(a.id()), H5Tclose);
  if (H5Tget_class(type.id()) != type_class || attr_points(obj, a.id(), name) != 1) {
    fail_read(describe(obj) + ": attribute '" + name + "' is not " + what +
              " (damaged checkpoint, or not written by megatron)");
  }
  return a;
}

void write_attr(hid_t obj, const std::string& name, hid_t type, hid_t space, const void* data) {
  if (H5Aexists(obj, name.c_str()) > 0) H5Adelete(obj, name.c_str());
  Handle a(H5Acreate2(obj, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!a.valid() || H5Awrite(a.id(), type, data) < 0) {
    fail_write("cannot write attribute '" + name + "' of " + describe(obj));
  }
}

}  // namespace

Handle& Handle::operator=(Handle&& other) noexcept {
  if (this != &other) {
    if (id_ >= 0 && close_) close_(id_);
    id_ = other.id_;
    close_ = other.close_;
    other.id_ = -1;
  }
  return *this;
}

Handle::~Handle() {
  if (id_ >= 0 && close_) close_(id_);
}

void quiet() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

Handle create_file(const std::filesystem::path& path) {
  quiet();
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  // Files readable by HDF5 1.10 and later (h5py included), with the compact 1.10 structures.
  H5Pset_libver_bounds(fapl.id(), H5F_LIBVER_V110, H5F_LIBVER_LATEST);
  const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.id());
  if (f < 0) fail_write("cannot create " + path.string() + " (is the directory writable?)");
  return {f, H5Fclose};
}

Handle open_file(const std::filesystem::path& path) {
  quiet();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) fail_read(path.string() + ": no such file");
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) fail_read(path.string() + ": not a readable HDF5 file (truncated or damaged?)");
  return {f, H5Fclose};
}

bool exists(hid_t loc, const std::string& path) {
  // H5Lexists needs every parent to exist: check component by component. Each must be a hard
  // link: a soft or external link would make HDF5 follow it to another object or file.
  std::string prefix;
  size_t at = path.front() == '/' ? 1 : 0;
  prefix = path.substr(0, at);
  while (at <= path.size()) {
    const size_t end = std::min(path.find('/', at), path.size());
    prefix += path.substr(at, end - at);
    if (H5Lexists(loc, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    H5L_info_t info{};
    if (H5Lget_info(loc, prefix.c_str(), &info, H5P_DEFAULT) < 0 || info.type != H5L_TYPE_HARD) {
      fail_read(describe(loc) + ": " + printable(prefix) +
                " is a soft or external link; a checkpoint holds its own objects (damaged or "
                "tampered file)");
    }
    prefix += '/';
    at = end + 1;
  }
  return true;
}

Handle open_dataset(hid_t loc, const std::string& path, const std::string& file_for_errors) {
  if (!exists(loc, path)) fail_read(file_for_errors + ": no tensor " + printable(path));
  const hid_t d = H5Dopen2(loc, path.c_str(), H5P_DEFAULT);
  if (d < 0) fail_read(file_for_errors + ": cannot open tensor " + printable(path) + " (damaged file?)");
  return {d, H5Dclose};
}

std::vector<std::string> children(hid_t loc, const std::string& group) {
  std::vector<std::string> names;
  if (!exists(loc, group)) return names;
  Handle g(H5Gopen2(loc, group.c_str(), H5P_DEFAULT), H5Gclose);
  if (!g.valid()) fail_read(describe(loc) + ": cannot open group " + printable(group));
  H5G_info_t info{};
  H5Gget_info(g.id(), &info);
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t n = H5Lget_name_by_idx(g.id(), ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0,
                                         H5P_DEFAULT);
    std::string name(size_t(std::max<ssize_t>(n, 0)) + 1, '\0');
    H5Lget_name_by_idx(g.id(), ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(), name.size(),
                       H5P_DEFAULT);
    name.resize(size_t(std::max<ssize_t>(n, 0)));
    names.push_back(std::move(name));
  }
  std::sort(names.begin(), names.end());
  return names;
}

void set_attr(hid_t obj, const std::string& name, const std::string& value) {
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.id(), std::max<size_t>(value.size(), 1));
  H5Tset_strpad(type.id(), H5T_STR_NULLPAD);
  H5Tset_cset(type.id(), H5T_CSET_UTF8);
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  const std::string stored = value.empty() ? std::string(1, '\0') : value;
  write_attr(obj, name, type.id(), space.id(), stored.data());
}

void set_attr(hid_t obj, const std::string& name, int64_t value) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  write_attr(obj, name, H5T_STD_I64LE, space.id(), &value);
}

void set_attr(hid_t obj, const std::string& name, double value) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  write_attr(obj, name, H5T_IEEE_F64LE, space.id(), &value);
}

void set_attr(hid_t obj, const std::string& name, const std::vector<int64_t>& value) {
  const hsize_t n = value.size();
  Handle space(n ? H5Screate_simple(1, &n, nullptr) : H5Screate(H5S_NULL), H5Sclose);
  write_attr(obj, name, H5T_STD_I64LE, space.id(), value.data());
}

bool has_attr(hid_t obj, const std::string& name) { return H5Aexists(obj, name.c_str()) > 0; }

std::string string_attr(hid_t obj, const std::string& name) {
  Handle a = attr_handle(obj, name);
  Handle type(H5Aget_type(a.id()), H5Tclose);
  if (H5Tget_class(type.id()) != H5T_STRING || H5Tis_variable_str(type.id()) > 0 ||
      attr_points(obj, a.id(), name) != 1) {
    fail_read(describe(obj) + ": attribute '" + name + "' is not a fixed-length string");
  }
  std::string value(H5Tget_size(type.id()), '\0');
  if (H5Aread(a.id(), type.id(), value.data()) < 0) fail_read(describe(obj) + ": cannot read attribute '" + name + "'");
  value.resize(std::min(value.size(), value.find('\0')));
  return value;
}

int64_t int_attr(hid_t obj, const std::string& name) {
  Handle a = scalar_attr(obj, name, H5T_INTEGER, "one integer");
  int64_t v = 0;
  if (H5Aread(a.id(), H5T_NATIVE_INT64, &v) < 0) fail_read(describe(obj) + ": cannot read attribute '" + name + "'");
  return v;
}

double double_attr(hid_t obj, const std::string& name) {
  Handle a = scalar_attr(obj, name, H5T_FLOAT, "one number");
  double v = 0;
  if (H5Aread(a.id(), H5T_NATIVE_DOUBLE, &v) < 0) fail_read(describe(obj) + ": cannot read attribute '" + name + "'");
  return v;
}

std::vector<int64_t> ints_attr(hid_t obj, const std::string& name, int64_t max_count) {
  Handle a = attr_handle(obj, name);
  Handle type(H5Aget_type(a.id()), H5Tclose);
  const hssize_t n = attr_points(obj, a.id(), name);
  if (H5Tget_class(type.id()) != H5T_INTEGER || n > max_count) {
    fail_read(fmt::format("{}: attribute '{}' is not a list of at most {} integers (damaged "
                          "checkpoint?)",
                          describe(obj), name, max_count));
  }
  std::vector<int64_t> v(static_cast<size_t>(n));
  if (!v.empty() && H5Aread(a.id(), H5T_NATIVE_INT64, v.data()) < 0) {
    fail_read(describe(obj) + ": cannot read attribute '" + name + "'");
  }
  return v;
}

Handle file_type(tensor::DType dtype) {
  switch (dtype) {
    case tensor::DType::F32: return {H5Tcopy(H5T_IEEE_F32LE), H5Tclose};
    case tensor::DType::F16: {
      Handle t(H5Tcopy(H5T_IEEE_F32LE), H5Tclose);
      H5Tset_fields(t.id(), 15, 10, 5, 0, 10);
      H5Tset_size(t.id(), 2);
      H5Tset_ebias(t.id(), 15);
      return t;
    }
    case tensor::DType::Bf16: {
      Handle t(H5Tcopy(H5T_IEEE_F32LE), H5Tclose);
      H5Tset_fields(t.id(), 15, 7, 8, 0, 7);
      H5Tset_size(t.id(), 2);
      H5Tset_ebias(t.id(), 127);
      return t;
    }
    default: break;
  }
  fail_write("checkpoints hold float tensors only");
}

tensor::DType dtype_of_dataset(hid_t dataset) {
  Handle type(H5Dget_type(dataset), H5Tclose);
  // Data moves in the file's own type, unconverted: only the exact little-endian layouts that
  // file_type writes are these dtypes (a big-endian or oddly packed float would read as garbage).
  if (type.valid() && H5Tget_class(type.id()) == H5T_FLOAT &&
      H5Tget_order(type.id()) == H5T_ORDER_LE) {
    size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
    H5Tget_fields(type.id(), &spos, &epos, &esize, &mpos, &msize);
    const size_t size = H5Tget_size(type.id()), bias = H5Tget_ebias(type.id());
    const auto is = [&](size_t bytes, size_t exponent, size_t mantissa, size_t ebias) {
      return size == bytes && spos == bytes * 8 - 1 && epos == mantissa && esize == exponent &&
             mpos == 0 && msize == mantissa && bias == ebias;
    };
    if (is(4, 8, 23, 127)) return tensor::DType::F32;
    if (is(2, 8, 7, 127)) return tensor::DType::Bf16;
    if (is(2, 5, 10, 15)) return tensor::DType::F16;
  }
  fail_read(describe(dataset) + ": not an f32, f16 or bf16 tensor (little-endian IEEE layout)");
}

Handle write_vector(hid_t file, const std::string& path, tensor::DType dtype, const void* data,
                    int64_t count) {
  const hsize_t n = hsize_t(count);
  Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose);
  Handle type = file_type(dtype);
  Handle lcpl = link_create_plist();
  Handle d(H5Dcreate2(file, path.c_str(), type.id(), space.id(), lcpl.id(), H5P_DEFAULT,
                      H5P_DEFAULT),
           H5Dclose);
  if (!d.valid() || (count > 0 && H5Dwrite(d.id(), type.id(), H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)) {
    fail_write("cannot write " + path + " to " + describe(file) + " (disk full?)");
  }
  return d;
}

std::vector<int64_t> dataset_shape(hid_t dataset) {
  Handle space(H5Dget_space(dataset), H5Sclose);
  const int rank = space.valid() ? H5Sget_simple_extent_ndims(space.id()) : -1;
  if (rank < 0) fail_read(describe(dataset) + ": cannot read the tensor's shape (damaged file?)");
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  H5Sget_simple_extent_dims(space.id(), dims.data(), nullptr);
  std::vector<int64_t> shape;
  for (hsize_t d : dims) {
    if (d > hsize_t(INT64_MAX)) fail_read(fmt::format("{}: dimension {} is too large", describe(dataset), d));
    shape.push_back(int64_t(d));
  }
  return shape;
}

void check_plain_storage(hid_t dataset) {
  Handle dcpl(H5Dget_create_plist(dataset), H5Pclose);
  // Contiguous bytes in this file, as RankFileWriter writes them: no external raw-data files
  // (they could name any file on the machine) and no filters to decompress.
  if (!dcpl.valid() || H5Pget_layout(dcpl.id()) != H5D_CONTIGUOUS ||
      H5Pget_external_count(dcpl.id()) != 0) {
    fail_read(describe(dataset) +
              ": not stored as contiguous bytes in this file (external, chunked or compressed "
              "storage is not megatron's format; damaged or tampered file)");
  }
}

void read_box(hid_t dataset, const std::vector<int64_t>& start, const std::vector<int64_t>& count,
              void* out) {
  Handle file_space(H5Dget_space(dataset), H5Sclose);
  std::vector<hsize_t> s(start.begin(), start.end()), c(count.begin(), count.end());
  hsize_t total = 1;
  for (hsize_t v : c) total *= v;
  if (total == 0) return;
  if (H5Sselect_hyperslab(file_space.id(), H5S_SELECT_SET, s.data(), nullptr, c.data(), nullptr) < 0) {
    fail_read(describe(dataset) + ": selection outside the tensor");
  }
  Handle mem_space(H5Screate_simple(1, &total, nullptr), H5Sclose);
  Handle type(H5Dget_type(dataset), H5Tclose);
  if (H5Dread(dataset, type.id(), mem_space.id(), file_space.id(), H5P_DEFAULT, out) < 0) {
    fail_read(describe(dataset) + ": cannot read (truncated or damaged file?)");
  }
}

Handle link_create_plist() {
  Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  H5Pset_create_intermediate_group(lcpl.id(), 1);
  return lcpl;
}

}  // namespace megatron::ckpt::h5
