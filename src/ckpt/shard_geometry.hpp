// Where a rank's part of a tensor sits in the whole (global) tensor: the rectangles a
// tensor-parallel shard covers, and those a flat range of the shard covers (a distributed
// optimizer's slice). Pure arithmetic, shared by saving, loading and resharding.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace megatron::ckpt {

// Which dimension of the global tensor tensor parallelism divides (as model::TpSplit).
enum class Split { None, Rows, Columns };
std::string split_name(Split split);
Split split_from_name(const std::string& name);  // throws UserError on an unknown name

// One rank's shard of a global tensor of 1 or 2 dimensions. A fused tensor of `parts` stacked
// blocks of rows (SwiGLU's gate and up) is divided block by block.
struct ShardLayout {
  std::vector<int64_t> global_shape;
  Split split = Split::None;
  int64_t parts = 1;
  int64_t tp_rank = 0;
  int64_t tp_size = 1;
};

// A rectangle of the global tensor seen as [rows, cols] (a 1-D tensor of n as [n, 1]).
struct Box {
  int64_t row0 = 0, rows = 0, col0 = 0, cols = 0;
  int64_t numel() const { return rows * cols; }
  bool operator==(const Box&) const = default;
};

// The rectangles a shard covers, in the order of its elements: the shard's row-major elements
// are the boxes' row-major elements one box after the other.
std::vector<Box> shard_boxes(const ShardLayout& layout);
int64_t total_numel(const std::vector<Box>& boxes);

// Elements [begin, end) of the sequence `boxes` describes, as rectangles; `offset` is where
// each one's first element sits in [begin, end).
struct Segment {
  Box box;
  int64_t offset = 0;
};
std::vector<Segment> range_segments(const std::vector<Box>& boxes, int64_t begin, int64_t end);

}  // namespace megatron::ckpt
