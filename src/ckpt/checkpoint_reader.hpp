// Reading a checkpoint in any layout: the metadata, the list of global tensors, and any
// rectangles of a global tensor, whatever layout saved it. The index's virtual-dataset mappings
// say which rank file piece holds which rectangle; all of them are checked when the reader
// opens (checkpoint_checks.hpp), and each piece is read whole, once, its attributes, extent and
// CRC-32 checked before any of it is used.
#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "ckpt/checkpoint_checks.hpp"
#include "ckpt/format.hpp"
#include "ckpt/hdf5.hpp"
#include "ckpt/tensor_source.hpp"

namespace megatron::ckpt {

class CheckpointReader : public TensorSource {
 public:
  // `dir`: a checkpoint directory (iter_NNNNNNN, holding checkpoint.h5). Reads and checks the
  // whole index (metadata, shapes, dtypes, mappings); UserError naming the file on any fault.
  explicit CheckpointReader(std::filesystem::path dir);

  const std::filesystem::path& dir() const { return dir_; }
  const CheckpointMeta& meta() const { return meta_; }
  const std::vector<TensorInfo>& tensors() const override { return tensors_; }
  const TensorInfo* find(const std::string& kind, const std::string& name) const;

  // The rectangles `boxes` of a tensor, one after the other, in its own dtype (raw bytes:
  // copying between checkpoints is bitwise) or converted to f32. Rows at or past the tensor's
  // row count (a vocabulary padded further under another tensor-parallel size) repeat its last
  // row; `zero_past_end` makes them zeros instead (optimizer moments). A piece that fails its
  // checksum, or a missing rank file, is a UserError naming the file and the tensor.
  void read_raw(const TensorInfo& t, const std::vector<Box>& boxes, std::span<std::byte> out,
                bool zero_past_end = false) const override;
  void read_f32(const TensorInfo& t, const std::vector<Box>& boxes, std::span<float> out,
                bool zero_past_end = false) const;

  // Checks every piece in the rank files with index % parts == part (so ranks can share the
  // work): its attributes against the index, that it holds what the index maps from it, and its
  // CRC-32. Returns the first problem as a one-line message, or "" when all pass.
  std::string verify(int part, int parts) const;

 private:
  std::vector<PieceMapping> read_mappings(hid_t dataset, const TensorInfo& t) const;
  // A piece's bytes, read whole and checked (the last one is kept: a tensor's rectangles come
  // one after the other).
  const std::vector<std::byte>& piece(const TensorInfo& t, const PieceMapping& m) const;
  void copy_rows(const TensorInfo& t, const Box& box, std::byte* out) const;

  struct RankFile {
    h5::Handle file;
    int64_t bytes = 0;  // its size on disk: no piece can hold more
  };

  std::filesystem::path dir_;
  h5::Handle file_;
  CheckpointMeta meta_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::vector<PieceMapping>> mappings_;  // by tensor path
  mutable std::map<std::string, RankFile> rank_files_;
  mutable std::string cached_piece_;  // file + ":" + dataset
  mutable std::vector<std::byte> cached_bytes_;
};

// Reads just the metadata of a checkpoint directory.
CheckpointMeta read_checkpoint_meta(const std::filesystem::path& dir);

}  // namespace megatron::ckpt
