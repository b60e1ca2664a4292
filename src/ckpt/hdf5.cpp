#include "ckpt/hdf5.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace megatron::ckpt::h5 {
namespace {

// "file.h5:/model/x" for messages.
std::string describe(hid_t obj) {
  std::string file(1024, '\0'), name(1024, '\0');
  const ssize_t f = H5Fget_name(obj, file.data(), file.size());
  const ssize_t n = H5Iget_name(obj, name.data(), name.size());
  file.resize(f > 0 ? size_t(f) : 0);
  name.resize(n > 0 ? size_t(n) : 0);
  return file + (name.empty() || name == "/" ? "" : ":" + name);
}

[[noreturn]] void fail_read(const std::string& what) { throw UserError(what); }
[[noreturn]] void fail_write(const std::string& what) { throw RuntimeFailure(what); }

Handle attr_handle(hid_t obj, const std::string& name) {
  const hid_t a = H5Aopen(obj, name.c_str(), H5P_DEFAULT);
  if (a < 0) fail_read(describe(obj) + ": missing attribute '" + name + "' (not a megatron checkpoint, or damaged)");
  return {a, H5Aclose};
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
  // H5Lexists needs every parent to exist: check component by component.
  std::string prefix;
  size_t at = path.front() == '/' ? 1 : 0;
  prefix = path.substr(0, at);
  while (at <= path.size()) {
    const size_t end = std::min(path.find('/', at), path.size());
    prefix += path.substr(at, end - at);
    if (H5Lexists(loc, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    prefix += '/';
    at = end + 1;
  }
  return true;
}

Handle open_dataset(hid_t loc, const std::string& path, const std::string& file_for_errors) {
  if (!exists(loc, path)) fail_read(file_for_errors + ": no tensor " + path);
  const hid_t d = H5Dopen2(loc, path.c_str(), H5P_DEFAULT);
  if (d < 0) fail_read(file_for_errors + ": cannot open tensor " + path + " (damaged file?)");
  return {d, H5Dclose};
}

std::vector<std::string> children(hid_t loc, const std::string& group) {
  std::vector<std::string> names;
  if (!exists(loc, group)) return names;
  Handle g(H5Gopen2(loc, group.c_str(), H5P_DEFAULT), H5Gclose);
  if (!g.valid()) fail_read(describe(loc) + ": cannot open group " + group);
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
  if (H5Tget_class(type.id()) != H5T_STRING || H5Tis_variable_str(type.id()) > 0) {
    fail_read(describe(obj) + ": attribute '" + name + "' is not a fixed-length string");
  }
  std::string value(H5Tget_size(type.id()), '\0');
  if (H5Aread(a.id(), type.id(), value.data()) < 0) fail_read(describe(obj) + ": cannot read attribute '" + name + "'");
  value.resize(std::min(value.size(), value.find('\0')));
  return value;
}

int64_t int_attr(hid_t obj, const std::string& name) {
  Handle a = attr_handle(obj, name);
  int64_t v = 0;
  if (H5Aread(a.id(), H5T_NATIVE_INT64, &v) < 0) fail_read(describe(obj) + ": cannot read attribute '" + name + "'");
  return v;
}

double double_attr(hid_t obj, const std::string& name) {
  Handle a = attr_handle(obj, name);
  double v = 0;
  if (H5Aread(a.id(), H5T_NATIVE_DOUBLE, &v) < 0) fail_read(describe(obj) + ": cannot read attribute '" + name + "'");
  return v;
}

std::vector<int64_t> ints_attr(hid_t obj, const std::string& name) {
  Handle a = attr_handle(obj, name);
  Handle space(H5Aget_space(a.id()), H5Sclose);
  const hssize_t n = H5Sget_simple_extent_npoints(space.id());
  std::vector<int64_t> v(size_t(std::max<hssize_t>(n, 0)));
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
  if (H5Tget_class(type.id()) == H5T_FLOAT) {
    if (H5Tget_size(type.id()) == 4) return tensor::DType::F32;
    if (H5Tget_size(type.id()) == 2) {
      size_t spos, epos, esize, mpos, msize;
      H5Tget_fields(type.id(), &spos, &epos, &esize, &mpos, &msize);
      if (esize == 8 && msize == 7) return tensor::DType::Bf16;
      if (esize == 5 && msize == 10) return tensor::DType::F16;
    }
  }
  fail_read(describe(dataset) + ": not an f32, f16 or bf16 tensor");
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
  const int rank = H5Sget_simple_extent_ndims(space.id());
  std::vector<hsize_t> dims(size_t(std::max(rank, 0)));
  H5Sget_simple_extent_dims(space.id(), dims.data(), nullptr);
  return {dims.begin(), dims.end()};
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
