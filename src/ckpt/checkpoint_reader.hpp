// Reading a checkpoint in any layout: the metadata, the list of global tensors, and any
// rectangles of a global tensor (through the index file's virtual datasets, so the layout it was
// saved under does not matter), plus a checksum pass over the rank files.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "ckpt/format.hpp"
#include "ckpt/hdf5.hpp"
#include "ckpt/tensor_source.hpp"

namespace megatron::ckpt {

class CheckpointReader : public TensorSource {
 public:
  // `dir`: a checkpoint directory (iter_NNNNNNN, holding checkpoint.h5).
  explicit CheckpointReader(std::filesystem::path dir);

  const std::filesystem::path& dir() const { return dir_; }
  const CheckpointMeta& meta() const { return meta_; }
  const std::vector<TensorInfo>& tensors() const override { return tensors_; }
  const TensorInfo* find(const std::string& kind, const std::string& name) const;

  // The rectangles `boxes` of a tensor, one after the other, in its own dtype (raw bytes:
  // copying between checkpoints is bitwise) or converted to f32. Rows at or past the tensor's
  // row count (a vocabulary padded further under another tensor-parallel size) repeat its last
  // row; `zero_past_end` makes them zeros instead (optimizer moments).
  void read_raw(const TensorInfo& t, const std::vector<Box>& boxes, std::span<std::byte> out,
                bool zero_past_end = false) const override;
  void read_f32(const TensorInfo& t, const std::vector<Box>& boxes, std::span<float> out,
                bool zero_past_end = false) const;

  // Checks the CRC-32 of every piece in the rank files with index % parts == part (so ranks can
  // share the work). Returns the first problem as a one-line message, or "" when all pass.
  std::string verify(int part, int parts) const;

 private:
  std::filesystem::path dir_;
  h5::Handle file_;
  CheckpointMeta meta_;
  std::vector<TensorInfo> tensors_;
};

// Reads just the metadata of a checkpoint directory.
CheckpointMeta read_checkpoint_meta(const std::filesystem::path& dir);

}  // namespace megatron::ckpt
