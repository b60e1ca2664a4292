// Writing a complete checkpoint from whole tensors for a chosen layout (tensor x pipeline
// ranks, data parallel 1) and dtype, one rank file at a time and tensor by tensor, so memory
// holds one tensor's shard, never the model: `megatron convert` and Hugging Face import.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/tensor_source.hpp"

namespace megatron::ckpt {

struct RewriteTarget {
  int64_t tensor = 1;
  int64_t pipeline = 1;
  // The pipeline stage of each transformer layer (size = the model's layers; empty: an even
  // split, as the plan makes it). The embedding is on stage 0, the final norm and the output
  // layer on the last.
  std::vector<int64_t> layer_stage;
  // The model weights' dtype; nullopt keeps the source's. 16-bit weights get f32 masters (the
  // source's masters, else its weights); f32 weights are their own masters.
  std::optional<tensor::DType> dtype;
};

// The pipeline stage of tensor `name` ("decoder.layers.3.mlp.linear_fc1.weight" -> layer_stage[3];
// embeddings on the first stage, the final norm and heads on the last), by model::place_of.
// `encoder_layers`: T5's encoder layers (model::place_of), else 0.
int64_t stage_of(const std::string& name, const std::vector<int64_t>& layer_stage, int64_t stages,
                 int64_t encoder_layers = 0);

// Progress: (tensors done, tensors in all).
using RewriteProgress = std::function<void(int64_t done, int64_t total)>;

// Writes `meta` (its layout and dtype replaced by the target's) and every tensor of `source`
// as save/iter_<meta.state.iteration>, written under the staging name and published (latest)
// when complete. Returns the checkpoint directory.
std::filesystem::path rewrite_checkpoint(const TensorSource& source, CheckpointMeta meta,
                                         const RewriteTarget& target,
                                         const std::filesystem::path& save,
                                         const RewriteProgress& progress = {});

}  // namespace megatron::ckpt
