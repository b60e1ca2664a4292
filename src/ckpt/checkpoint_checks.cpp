#include "ckpt/checkpoint_checks.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "core/checked.hpp"
#include "core/error.hpp"
#include "core/printable.hpp"

namespace megatron::ckpt {
namespace {

constexpr const char* kDamaged = "the checkpoint is damaged or was not written by megatron";

void in_range(int64_t value, int64_t lo, int64_t hi, const std::string& index, const char* attr) {
  if (value < lo || value > hi) {
    throw UserError(fmt::format("{}: attribute {} is {}, expected {} to {}; {}", index, attr, value,
                                lo, hi, kDamaged));
  }
}

// "<index>: tensor /model/x ..." with the tensor's name (from the file) escaped.
std::string tensor_at(const std::string& file, const TensorInfo& t) {
  return fmt::format("{}: tensor {}", file, printable(t.path()));
}

int64_t dim_or_one(const std::vector<int64_t>& shape, size_t i) {
  return shape.size() > i ? shape[i] : 1;
}

}  // namespace

void check_meta(const CheckpointMeta& m, const std::string& index) {
  const TrainingState& s = m.state;
  in_range(s.iteration, 0, kMaxIteration, index, "iteration");
  in_range(s.consumed_samples, 0, kMaxConsumedSamples, index, "consumed_samples");
  in_range(s.skipped_iterations, 0, kMaxIteration, index, "skipped_iterations");
  in_range(s.optimizer_steps, 0, kMaxIteration, index, "optimizer_steps");
  in_range(s.growth_tracker, 0, kMaxIteration, index, "loss_scale_growth_tracker");
  // Consecutive overflows count the hysteresis tracker below zero.
  in_range(s.hysteresis_tracker, -kMaxIteration, kMaxIteration, index,
           "loss_scale_hysteresis_tracker");
  if (!std::isfinite(s.loss_scale) || s.loss_scale <= 0) {
    throw UserError(fmt::format("{}: attribute loss_scale is {}, expected a positive finite number; "
                                "{}",
                                index, s.loss_scale, kDamaged));
  }
  const SavedLayout& l = m.layout;
  in_range(l.world, 1, kMaxWorld, index, "world_size");
  in_range(l.tensor, 1, l.world, index, "tensor_parallel");
  in_range(l.pipeline, 1, l.world, index, "pipeline_parallel");
  in_range(l.data, 1, l.world, index, "data_parallel");
  in_range(l.virtual_pipeline, 1, kMaxWorld, index, "virtual_pipeline");
  const std::string what = index + ": tensor_parallel x pipeline_parallel x data_parallel";
  const int64_t ranks = checked_mul(checked_mul(l.tensor, l.pipeline, what), l.data, what);
  if (l.world % ranks != 0) {  // the rest is context parallelism
    throw UserError(fmt::format("{}: tensor {} x pipeline {} x data {} = {} ranks does not divide "
                                "world_size {}; {}",
                                index, l.tensor, l.pipeline, l.data, ranks, l.world, kDamaged));
  }
  if (m.dtype != "f32" && m.dtype != "bf16" && m.dtype != "f16") {
    throw UserError(fmt::format("{}: attribute dtype is '{}', expected f32, bf16 or f16; {}", index,
                                printable(m.dtype), kDamaged));
  }
  if (m.optimizer != "adamw" && m.optimizer != "sgd" && m.optimizer != "none") {
    throw UserError(fmt::format("{}: attribute optimizer is '{}', expected adamw, sgd or none; {}",
                                index, printable(m.optimizer), kDamaged));
  }
}

void check_tensor(const TensorInfo& t, const CheckpointMeta& meta, const std::string& index) {
  if (t.shape.empty() || int64_t(t.shape.size()) > kMaxTensorRank ||
      std::any_of(t.shape.begin(), t.shape.end(), [](int64_t d) { return d < 1; })) {
    throw UserError(fmt::format("{} has shape {}, expected 1 or 2 positive dimensions; {}",
                                tensor_at(index, t), fmt::join(t.shape, " x "), kDamaged));
  }
  const std::string what = tensor_at(index, t) + ": bytes";
  int64_t bytes = int64_t(tensor::size_of(t.dtype));
  for (int64_t d : t.shape) bytes = checked_mul(bytes, d, what);
  if (t.parts < 1 || (t.split == Split::Rows && t.shape[0] % t.parts != 0)) {
    throw UserError(fmt::format("{}: parts = {} does not divide its {} rows; {}", tensor_at(index, t),
                                t.parts, t.shape[0], kDamaged));
  }
  if (t.split == Split::Columns && t.shape.size() != 2) {
    throw UserError(fmt::format("{} is split by columns but has 1 dimension; {}", tensor_at(index, t),
                                kDamaged));
  }
  const std::string expected = t.kind == kModel ? meta.dtype : "f32";
  if (tensor::name(t.dtype) != expected) {
    throw UserError(fmt::format("{} is {}, but the checkpoint's {} tensors are {}; {}",
                                tensor_at(index, t), tensor::name(t.dtype), t.kind, expected,
                                kDamaged));
  }
}

int64_t rank_of_file_name(const std::string& name) {
  constexpr std::string_view prefix = "rank_", suffix = ".h5";
  if (name.size() < prefix.size() + 5 + suffix.size() || !name.starts_with(prefix) ||
      !name.ends_with(suffix)) {
    return -1;
  }
  const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.size() > 9 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return -1;
  }
  const int64_t rank = std::stoll(digits);
  return fmt::format("rank_{:05d}.h5", rank) == name ? rank : -1;  // one spelling per rank
}

void check_mappings(const TensorInfo& t, const std::vector<PieceMapping>& mappings, int64_t world,
                    const std::string& index) {
  const int64_t rows = t.shape[0], cols = dim_or_one(t.shape, 1);
  for (const PieceMapping& m : mappings) {
    // The source is resolved against the checkpoint directory: only a rank file of this
    // checkpoint may be named, never a path elsewhere (absolute, "..", or a subdirectory).
    const int64_t rank = rank_of_file_name(m.file);
    if (rank < 0 || rank >= world) {
      throw UserError(fmt::format("{} maps a piece from '{}', which is not one of the checkpoint's "
                                  "rank files rank_00000.h5 to {}; {}",
                                  tensor_at(index, t), printable(m.file),
                                  fmt::format("rank_{:05d}.h5", world - 1), kDamaged));
    }
    if (m.dataset != t.path()) {
      throw UserError(fmt::format("{} maps a piece from dataset '{}' of {}, expected {}; {}",
                                  tensor_at(index, t), printable(m.dataset), m.file,
                                  printable(t.path()), kDamaged));
    }
    const Box& b = m.box;
    if (b.row0 < 0 || b.rows < 1 || b.col0 < 0 || b.cols < 1 || b.row0 > rows - b.rows ||
        b.col0 > cols - b.cols || m.offset < 0 || m.offset > INT64_MAX - b.numel()) {
      throw UserError(fmt::format("{} maps rows [{}, +{}) x columns [{}, +{}) from element {} of {}, "
                                  "outside the tensor's {} x {}; {}",
                                  tensor_at(index, t), b.row0, b.rows, b.col0, b.cols, m.offset,
                                  m.file, rows, cols, kDamaged));
    }
  }
  // Exactly once: sweep the rows; between two consecutive row edges of any rectangle, the
  // rectangles spanning those rows must tile the columns [0, cols) without gap or overlap.
  struct Edge {
    int64_t row;
    bool opens;
    int64_t col0, col1;
  };
  std::vector<Edge> edges;
  edges.reserve(mappings.size() * 2);
  for (const PieceMapping& m : mappings) {
    edges.push_back({m.box.row0, true, m.box.col0, m.box.col0 + m.box.cols});
    edges.push_back({m.box.row0 + m.box.rows, false, m.box.col0, m.box.col0 + m.box.cols});
  }
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) { return a.row < b.row; });
  std::multimap<int64_t, int64_t> open;  // col0 -> col1 of the rectangles spanning the row
  const auto fail = [&](int64_t row, const char* how, int64_t col) {
    throw UserError(fmt::format("{}: its pieces {} row {} at column {}; every element must come "
                                "from exactly one piece; {}",
                                tensor_at(index, t), how, row, col, kDamaged));
  };
  if (edges.empty() || edges.front().row != 0) fail(0, "leave out", 0);
  for (size_t i = 0; i < edges.size();) {
    const int64_t row = edges[i].row;
    for (; i < edges.size() && edges[i].row == row; ++i) {
      const Edge& e = edges[i];
      if (e.opens) {
        open.emplace(e.col0, e.col1);
        continue;
      }
      auto [lo, hi] = open.equal_range(e.col0);
      while (lo != hi && lo->second != e.col1) ++lo;
      open.erase(lo);  // present: every closing edge follows its own opening edge
    }
    if (row >= rows) break;  // no rectangle extends past the last row (checked above)
    int64_t col = 0;
    for (const auto& [c0, c1] : open) {
      if (c0 > col) fail(row, "leave out", col);
      if (c0 < col) fail(row, "map twice", c0);
      col = c1;
    }
    if (col != cols) fail(row, "leave out", col);
  }
}

void check_piece_extent(const PieceMapping& m, int64_t piece_numel, const std::string& rank_file) {
  if (m.offset + m.box.numel() > piece_numel) {
    throw UserError(fmt::format("{}: tensor {} holds {} elements, but the index maps elements "
                                "[{}, {}) of it; {}",
                                rank_file, printable(m.dataset), piece_numel, m.offset,
                                m.offset + m.box.numel(), kDamaged));
  }
}

void check_piece_layout(const TensorInfo& t, const ShardLayout& l, int64_t offset, int64_t numel,
                        const std::string& rank_file) {
  const std::string at = tensor_at(rank_file, t);
  if (l.global_shape != t.shape || l.split != t.split || l.parts != t.parts) {
    throw UserError(fmt::format("{} records global shape [{}] split {} in {} parts, the index "
                                "[{}] split {} in {} parts; {}",
                                at, fmt::join(l.global_shape, ", "), split_name(l.split), l.parts,
                                fmt::join(t.shape, ", "), split_name(t.split), t.parts, kDamaged));
  }
  if (l.tp_size < 1 || l.tp_size > kMaxWorld || l.tp_rank < 0 || l.tp_rank >= l.tp_size) {
    throw UserError(fmt::format("{} records tensor-parallel rank {} of {}; {}", at, l.tp_rank,
                                l.tp_size, kDamaged));
  }
  if (l.split != Split::None) {
    const int64_t dim = l.split == Split::Rows ? t.shape[0] / t.parts : t.shape[1];
    if (dim % l.tp_size != 0) {
      throw UserError(fmt::format("{}: its {} {} do not divide over {} tensor-parallel ranks; {}", at,
                                  dim, l.split == Split::Rows ? "rows" : "columns", l.tp_size,
                                  kDamaged));
    }
  }
  const int64_t shard = total_numel(shard_boxes(l));
  if (offset < 0 || numel < 0 || offset > shard || numel > shard - offset) {
    throw UserError(fmt::format("{} holds elements [{}, +{}) of a shard of {}; {}", at, offset, numel,
                                shard, kDamaged));
  }
}

}  // namespace megatron::ckpt
