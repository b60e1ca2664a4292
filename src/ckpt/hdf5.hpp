// A thin RAII layer over the HDF5 C API for checkpoints: handles that close themselves, errors
// as exceptions naming the file and object, attributes, 16-bit float types and hyperslab I/O.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "tensor/dtype.hpp"

namespace megatron::ckpt::h5 {

// One HDF5 identifier, closed with the function that fits its kind.
class Handle {
 public:
  Handle() = default;
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  Handle(Handle&& other) noexcept : id_(other.id_), close_(other.close_) { other.id_ = -1; }
  Handle& operator=(Handle&& other) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle();
  hid_t id() const { return id_; }
  bool valid() const { return id_ >= 0; }

 private:
  hid_t id_ = -1;
  herr_t (*close_)(hid_t) = nullptr;
};

// Silences HDF5's own error printing (errors become exceptions with one line each).
void quiet();

// Files. create_file truncates; open_file fails with the file named when it is missing,
// truncated or not HDF5. Reading errors are UserErrors (the checkpoint is the user's input),
// writing errors RuntimeFailures.
Handle create_file(const std::filesystem::path& path);
Handle open_file(const std::filesystem::path& path);

// Whether every component of an absolute path exists; UserError when one is a soft or external
// link (a checkpoint never holds one: following it could read another file).
bool exists(hid_t loc, const std::string& path);
Handle open_dataset(hid_t loc, const std::string& path, const std::string& file_for_errors);
std::vector<std::string> children(hid_t loc, const std::string& group);  // names, sorted

// Attributes on a file, group or dataset. Readers refuse an attribute of another type class or
// of more than the one value they expect (UserError naming the file and attribute).
void set_attr(hid_t obj, const std::string& name, const std::string& value);
void set_attr(hid_t obj, const std::string& name, int64_t value);
void set_attr(hid_t obj, const std::string& name, double value);
void set_attr(hid_t obj, const std::string& name, const std::vector<int64_t>& value);
bool has_attr(hid_t obj, const std::string& name);
std::string string_attr(hid_t obj, const std::string& name);
int64_t int_attr(hid_t obj, const std::string& name);
double double_attr(hid_t obj, const std::string& name);
// An integer list of at most `max_count` values (a damaged file cannot make it large).
std::vector<int64_t> ints_attr(hid_t obj, const std::string& name, int64_t max_count);

// The file type of a tensor dtype: IEEE f32, IEEE half, and bfloat16 as a 16-bit float with
// an 8-bit exponent (what h5py and HDF5 tools see). Data moves in these types unconverted.
Handle file_type(tensor::DType dtype);
tensor::DType dtype_of_dataset(hid_t dataset);

// A new 1-D contiguous dataset of `count` elements of `dtype` holding `data` (raw bytes).
Handle write_vector(hid_t file, const std::string& path, tensor::DType dtype, const void* data,
                    int64_t count);
// Elements [offset, offset + count) of a 1-D dataset, or a rectangle [row0, row0 + rows) x
// [col0, col0 + cols) of a 1-D (cols == 1) or 2-D one, into `out` in the dataset's own type.
void read_box(hid_t dataset, const std::vector<int64_t>& start, const std::vector<int64_t>& count,
              void* out);
std::vector<int64_t> dataset_shape(hid_t dataset);
// UserError unless the dataset's bytes are contiguous in its own file (what rank files hold).
void check_plain_storage(hid_t dataset);

// Creates parent groups of `path` as needed.
Handle link_create_plist();

}  // namespace megatron::ckpt::h5
