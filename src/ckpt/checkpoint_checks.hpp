// What a checkpoint read from disk must satisfy before any of it is used: metadata in range,
// tensor shapes and dtypes as the format writes them, and the index's mappings confined to the
// checkpoint's rank files, inside each tensor, covering it exactly once, within each piece.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ckpt/format.hpp"

namespace megatron::ckpt {

// Far above any real run, low enough that nothing derived from them overflows int64.
inline constexpr int64_t kMaxIteration = 1'000'000'000'000;             // 10^12
inline constexpr int64_t kMaxConsumedSamples = 1'000'000'000'000'000;   // 10^15
inline constexpr int64_t kMaxWorld = 1 << 24;                           // ranks that saved
inline constexpr int64_t kMaxTensorRank = 2;                            // checkpoints hold 1-D and 2-D tensors

// One rectangle of a global tensor, filled from elements [offset, offset + box.numel()) of the
// 1-D dataset `dataset` of rank file `file` (a name relative to the checkpoint directory).
struct PieceMapping {
  std::string file, dataset;
  Box box;
  int64_t offset = 0;
};

// The index's root attributes: counts non-negative and bounded, layout sizes positive and
// consistent, dtype and optimizer known. UserError naming `index` and the attribute.
void check_meta(const CheckpointMeta& meta, const std::string& index);

// A global tensor of the index: 1 or 2 dimensions, each positive, bytes overflow-checked;
// parts and split fit the shape; the dtype the format gives its kind (the model's for model/,
// f32 for optimizer state).
void check_tensor(const TensorInfo& t, const CheckpointMeta& meta, const std::string& index);

// The mappings of `t`: each from a rank file rank_NNNNN.h5 (NNNNN below `world`) of the
// checkpoint directory itself and the dataset at t's own path, each rectangle inside t, and all
// of them covering every element of t exactly once.
void check_mappings(const TensorInfo& t, const std::vector<PieceMapping>& mappings, int64_t world,
                    const std::string& index);

// A piece of `piece_numel` elements must hold the elements mapping `m` takes from it.
void check_piece_extent(const PieceMapping& m, int64_t piece_numel, const std::string& rank_file);

// A rank file's piece as its own attributes describe it: the same global tensor as the index's
// `t`, a valid tensor-parallel shard of it, and `numel` elements from `offset` inside that shard.
void check_piece_layout(const TensorInfo& t, const ShardLayout& layout, int64_t offset,
                        int64_t numel, const std::string& rank_file);

// A name rank_NNNNN.h5 as rank_file_name writes it, and its rank; -1 for anything else.
int64_t rank_of_file_name(const std::string& name);

}  // namespace megatron::ckpt
