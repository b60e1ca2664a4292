// What a checkpoint holds (docs/checkpoint-format.md): the training state and layout it was
// saved under, the model's shape, and the tensors, each named by kind and parameter name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ckpt/shard_geometry.hpp"
#include "tensor/dtype.hpp"

namespace megatron::ckpt {

inline constexpr int64_t kFormatVersion = 1;
inline constexpr const char* kIndexFile = "checkpoint.h5";  // in each iter_NNNNNNN directory

// Tensor kinds: HDF5 groups of the index and rank files.
inline constexpr const char* kModel = "model";                      // weights, model dtype
inline constexpr const char* kMaster = "optimizer/master";          // f32, 16-bit models only
inline constexpr const char* kExpAvg = "optimizer/exp_avg";         // Adam m
inline constexpr const char* kExpAvgSq = "optimizer/exp_avg_sq";    // Adam v
inline constexpr const char* kMomentum = "optimizer/momentum";      // SGD
inline const std::vector<std::string>& tensor_kinds() {
  static const std::vector<std::string> kinds{kModel, kMaster, kExpAvg, kExpAvgSq, kMomentum};
  return kinds;
}

// Where the run stood: everything besides the tensors that an exact resume needs. Random
// numbers are drawn from counters keyed by (seed, iteration, ...), so the seed and the
// iteration are the whole random state; the data position is consumed_samples.
struct TrainingState {
  int64_t iteration = 0;
  int64_t consumed_samples = 0;
  int64_t skipped_iterations = 0;
  int64_t optimizer_steps = 0;  // Adam's bias-correction count (skipped steps excluded)
  double loss_scale = 1.0;
  int64_t growth_tracker = 0;
  int64_t hysteresis_tracker = 0;
};

// The layout a checkpoint was written under (loading does not need it to match).
struct SavedLayout {
  int64_t world = 1, tensor = 1, pipeline = 1, data = 1, virtual_pipeline = 1;
  bool sequence_parallel = false, distributed_optimizer = false;
};

struct CheckpointMeta {
  TrainingState state;
  SavedLayout layout;
  std::string dtype;      // the model weights' dtype: f32, bf16, f16
  std::string optimizer;  // adamw, sgd, or none (weights only: an import)
  int64_t seed = 0;
  // The fields that decide the model's tensors and what they mean, as recipe keys
  // ("model.num_layers") and rendered values; loading compares them in this order.
  std::vector<std::pair<std::string, std::string>> model;
  std::string recipe;           // the resolved recipe (YAML)
  std::string recipe_original;  // the recipe file as written, when known
  std::string overrides;        // command-line --set overrides, one per line
  std::string created;          // UTC time, ISO 8601
  std::string version;          // megatron version that wrote it
};

// The checkpoint's value of a model field ("model.num_layers"), or nullopt when not recorded.
// Checkpoints written before the family was recorded are GPT's.
inline std::optional<std::string> model_field(const CheckpointMeta& meta, const std::string& key) {
  for (const auto& [k, v] : meta.model)
    if (k == key) return v;
  if (key == "model.arch") return "gpt";
  return std::nullopt;
}

// One rank's part of one tensor: elements [offset, offset + numel) of its tensor-parallel shard
// (offset 0 and the whole shard unless a distributed optimizer owns a slice), as raw bytes of
// `dtype`. It owns its bytes (a copy a background thread can write while training goes on), or
// borrows them from a tensor in host memory for a save that completes before training resumes.
struct Piece {
  std::string kind;
  std::string name;
  ShardLayout layout;
  int64_t offset = 0;
  tensor::DType dtype = tensor::DType::F32;
  std::vector<std::byte> bytes;
  std::span<const std::byte> borrowed;  // used when `bytes` is empty
  std::span<const std::byte> data() const { return bytes.empty() ? borrowed : std::span(bytes); }
  int64_t numel() const { return int64_t(data().size() / tensor::size_of(dtype)); }
};

// A global tensor of a checkpoint, as its index file describes it.
struct TensorInfo {
  std::string kind;
  std::string name;
  std::vector<int64_t> shape;
  tensor::DType dtype = tensor::DType::F32;
  Split split = Split::None;
  int64_t parts = 1;
  std::string path() const { return "/" + kind + "/" + name; }
};

}  // namespace megatron::ckpt
