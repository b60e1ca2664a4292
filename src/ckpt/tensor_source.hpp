// Anything whole tensors can be read from, rectangle by rectangle: a checkpoint (through its
// index) or a Hugging Face safetensors file. What `megatron convert` rewrites from.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "ckpt/format.hpp"

namespace megatron::ckpt {

class TensorSource {
 public:
  virtual ~TensorSource() = default;
  // Every tensor, with kind (model, optimizer/...), name, global shape, dtype and split.
  virtual const std::vector<TensorInfo>& tensors() const = 0;
  // The rectangles `boxes` of `t` one after the other, raw in t.dtype (out holds exactly
  // total_numel(boxes) elements). Rows past t's row count repeat its last row, or are zeros
  // with `zero_past_end`.
  virtual void read_raw(const TensorInfo& t, const std::vector<Box>& boxes,
                        std::span<std::byte> out, bool zero_past_end = false) const = 0;
};

}  // namespace megatron::ckpt
