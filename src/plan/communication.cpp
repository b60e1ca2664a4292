#include "plan/communication.hpp"

#include <algorithm>

#include "plan/memory.hpp"

namespace megatron::plan {
namespace {

// One (s, b, h) activation of a micro-batch on this context-parallel rank, in bytes.
double activation(const ModelShape& x, int64_t sequence) {
  return x.e() * static_cast<double>(sequence) / x.c * x.b * x.h;
}

// Ring all-reduce: every rank sends 2 (n - 1) / n of the buffer.
double all_reduce(double bytes, int64_t ranks) { return 2.0 * (ranks - 1) / ranks * bytes; }
// Ring all-gather or reduce-scatter: (n - 1) / n of the full buffer.
double gather_or_scatter(double bytes, int64_t ranks) { return 1.0 * (ranks - 1) / ranks * bytes; }

// What crosses a chunk boundary: the hidden state; T5 passes both sides at every boundary, the
// encoder's (its hidden states, then the encoder output) and the decoder's (its embedded input,
// then its hidden states), as the engine does.
double boundary_message(const ModelShape& x) {
  double bytes = activation(x, x.s) + (x.arch == recipe::Arch::T5 ? activation(x, x.sd) : 0.0);
  // With sequence parallelism the stage boundary carries each rank's s/t shard.
  return x.sp ? bytes / x.t : bytes;
}

}  // namespace

double tensor_parallel_bytes(const ModelShape& x, const Stage& stage) {
  if (x.t == 1) return 0;
  // Each attention or MLP block all-reduces its output in forward and its input gradient in
  // backward (sequence parallelism: all-gather + reduce-scatter instead, the same bytes).
  const int64_t recomputed =
      x.recompute == recipe::Recompute::Full
          ? std::min<int64_t>(x.recompute_layers, static_cast<int64_t>(stage.layers.size()))
          : 0;
  double per_microbatch = 0;
  for (std::size_t i = 0; i < stage.layers.size(); ++i) {
    const LayerKind kind = x.kind(stage.layers[i]);
    const double blocks = kind == LayerKind::Decoder ? 3 : 2;
    const double one = all_reduce(activation(x, x.tokens(kind)), x.t);
    per_microbatch += 2 * blocks * one;                                        // forward + backward
    if (static_cast<int64_t>(i) < recomputed) per_microbatch += blocks * one;  // forward again
  }
  // Vocab-parallel embedding: forward all-reduce of its output (T5: of both stacks' inputs).
  if (stage.has_embedding) {
    per_microbatch += all_reduce(activation(x, x.s), x.t);
    if (x.arch == recipe::Arch::T5) per_microbatch += all_reduce(activation(x, x.sd), x.t);
  }
  // Column-parallel output layer: backward all-reduce of its input gradient.
  if (stage.has_output_layer) per_microbatch += all_reduce(activation(x, x.output_tokens()), x.t);
  return per_microbatch * x.m;
}

PipelineSends pipeline_sends(const ModelShape& x, const Chunks& /*every boundary's message is
                                                                    the same*/,
                             const Stage& stage) {
  PipelineSends out;
  if (x.p == 1) return out;
  for (int64_t c = 0; c < x.v; ++c) {
    const double message = boundary_message(x) * x.m;
    const bool last_chunk_of_model = c == x.v - 1 && stage.index == x.p - 1;
    const bool first_chunk_of_model = c == 0 && stage.index == 0;
    if (!last_chunk_of_model) out.to_next += message;       // activations forward
    if (!first_chunk_of_model) out.to_previous += message;  // their gradients backward
  }
  return out;
}

double data_parallel_bytes(const ModelShape& x, const Stage& stage) {
  const int64_t ranks = x.gradient_group();
  if (ranks == 1) return 0;
  const double gradients = 4.0 * static_cast<double>(stage.parameters_per_rank);  // f32 main grads
  if (!x.distributed_optimizer) return all_reduce(gradients, ranks);
  // Reduce-scatter the gradients, then all-gather the updated weights in their own dtype.
  const double weights =
      bytes_per_parameter(x).weights * static_cast<double>(stage.parameters_per_rank);
  return gather_or_scatter(gradients, ranks) + gather_or_scatter(weights, ranks);
}

double embedding_sync_bytes(const ModelShape& x, const Stage& stage) {
  if (!x.tied || x.p == 1 || !(stage.has_embedding || stage.has_output_layer)) return 0;
  // All-reduce of the word embedding's f32 gradient between its two copies (2 ranks).
  const double gradient = 4.0 * static_cast<double>(x.V) / x.t * x.h;
  return all_reduce(gradient, 2);
}

Communication count_communication(const ModelShape& x, const Chunks& chunks,
                                  const std::vector<Stage>& stages) {
  Communication out;
  for (const Stage& stage : stages) {
    out.tensor_parallel = std::max(out.tensor_parallel, tensor_parallel_bytes(x, stage));
    out.pipeline_parallel =
        std::max(out.pipeline_parallel, pipeline_sends(x, chunks, stage).total());
    out.data_parallel = std::max(out.data_parallel, data_parallel_bytes(x, stage));
    out.embedding_sync = std::max(out.embedding_sync, embedding_sync_bytes(x, stage));
  }
  return out;
}

}  // namespace megatron::plan
