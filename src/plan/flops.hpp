// FLOPs per iteration in Megatron's convention (Narayanan et al. 2021): matrix multiplies
// only, 2 FLOPs per multiply-add, full s x s attention scores (no causal halving).
#pragma once

#include <vector>

#include "plan/plan.hpp"
#include "plan/shape.hpp"

namespace megatron::plan {

// Forward FLOPs of one layer over the whole global batch (B sequences).
double layer_forward_flops(const ModelShape& x, LayerKind kind);
// The attention core's share of that (scores QK^T and the weighted sum of V): what selective
// recompute runs again.
double attention_core_forward_flops(const ModelShape& x, LayerKind kind);
// Forward FLOPs of the output side: logits (and BERT's LM head dense).
double output_forward_flops(const ModelShape& x);

// One stage's FLOPs per iteration summed over its tensor-, context- and data-parallel ranks.
Flops stage_flops(const ModelShape& x, const Stage& stage);
// The model's: the sum over stages.
Flops count_flops(const ModelShape& x, const std::vector<Stage>& stages);

}  // namespace megatron::plan
