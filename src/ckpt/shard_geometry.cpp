#include "ckpt/shard_geometry.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace megatron::ckpt {

std::string split_name(Split split) {
  switch (split) {
    case Split::None: return "none";
    case Split::Rows: return "rows";
    case Split::Columns: return "columns";
  }
  return "none";
}

Split split_from_name(const std::string& name) {
  if (name == "none") return Split::None;
  if (name == "rows") return Split::Rows;
  if (name == "columns") return Split::Columns;
  throw UserError("unknown tensor split '" + name + "' (damaged checkpoint?)");
}

std::vector<Box> shard_boxes(const ShardLayout& l) {
  const int64_t rows = l.global_shape.at(0);
  const int64_t cols = l.global_shape.size() > 1 ? l.global_shape[1] : 1;
  if (l.tp_size == 1 || l.split == Split::None) return {Box{0, rows, 0, cols}};
  if (l.split == Split::Columns) {
    const int64_t local = cols / l.tp_size;
    return {Box{0, rows, l.tp_rank * local, local}};
  }
  const int64_t part_rows = rows / l.parts, local = part_rows / l.tp_size;
  std::vector<Box> boxes;
  for (int64_t part = 0; part < l.parts; ++part) {
    boxes.push_back(Box{part * part_rows + l.tp_rank * local, local, 0, cols});
  }
  return boxes;
}

int64_t total_numel(const std::vector<Box>& boxes) {
  int64_t n = 0;
  for (const Box& b : boxes) n += b.numel();
  return n;
}

std::vector<Segment> range_segments(const std::vector<Box>& boxes, int64_t begin, int64_t end) {
  std::vector<Segment> runs;
  int64_t box_start = 0;  // the box's first element in the sequence
  for (const Box& b : boxes) {
    const int64_t lo = std::max(begin, box_start), hi = std::min(end, box_start + b.numel());
    if (lo < hi) {
      // [lo, hi) within this box, row-major: a partial first row, whole rows, a partial last row.
      int64_t at = lo - box_start;
      const int64_t stop = hi - box_start;
      while (at < stop) {
        const int64_t row = at / b.cols, col = at % b.cols;
        Segment run{.box = {b.row0 + row, 1, b.col0 + col, 0}, .offset = box_start + at - begin};
        if (col != 0 || stop - at < b.cols) {
          run.box.cols = std::min(b.cols - col, stop - at);
        } else {
          run.box.rows = (stop - at) / b.cols;
          run.box.cols = b.cols;
        }
        at += run.box.numel();
        runs.push_back(run);
      }
    }
    box_start += b.numel();
  }
  return runs;
}

}  // namespace megatron::ckpt
