// Activation memory: the bytes each layer keeps for its backward pass, per micro-batch and
// rank (Korthikanti et al. 2022, generalised term by term), and how many micro-batches the
// pipeline schedule keeps alive on each stage. Formulas: docs/plan.md, "Activations".
#pragma once

#include <cstdint>

#include "plan/plan.hpp"
#include "plan/shape.hpp"

namespace megatron::plan {

// One layer that keeps everything its backward needs (selective recompute drops the
// attention core's share).
double layer_activation_bytes(const ModelShape& x, LayerKind kind);
// One layer under full recompute: only its input is kept.
double recomputed_layer_activation_bytes(const ModelShape& x, LayerKind kind);
// What a stage keeps besides its layers: embedding dropout mask, final norm input, the output
// layer's input (fused classifier: its gradient) and, unfused, the f32 logits for the
// cross-entropy, and (T5) the encoder output the decoder attends to.
double stage_extra_activation_bytes(const ModelShape& x, const Stage& stage);
// What a stage holds only while one micro-batch's forward runs, once however many are in
// flight: the fused classifier's chunk of f32 logits (at most ModelConfig::classifier_chunk_bytes).
double stage_transient_activation_bytes(const ModelShape& x, const Stage& stage);
// All layers of the stage (the first recompute_layers of them recomputed) plus the extras.
double stage_activation_bytes(const ModelShape& x, const Stage& stage);

// Micro-batches whose activations are alive on `stage` at its peak, in whole-stage units:
// 1F1B min(p - r, m); interleaved min(m v, 2(p - r - 1) + (v - 1) p + 1) chunks / v;
// all-forward-all-backward m.
double microbatches_in_flight(const ModelShape& x, int64_t stage);

}  // namespace megatron::plan
