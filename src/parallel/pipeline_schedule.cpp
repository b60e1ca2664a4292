#include "parallel/pipeline_schedule.hpp"

#include <algorithm>
#include <stdexcept>

namespace megatron::parallel {
namespace {

struct Sizes {
  int p, stage, v, m;
};

void require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument(message);
}

void validate(ScheduleKind kind, const Sizes& n) {
  require(n.p >= 1,
          "pipeline schedule: the pipeline size must be at least 1, got " + std::to_string(n.p));
  require(n.stage >= 0 && n.stage < n.p, "pipeline schedule: stage " + std::to_string(n.stage) +
                                             " is outside the pipeline's " + std::to_string(n.p) +
                                             " stages (0.." + std::to_string(n.p - 1) + ")");
  require(n.v >= 1, "pipeline schedule: each stage must hold at least 1 model chunk, got " +
                        std::to_string(n.v));
  require(n.m >= 1, "pipeline schedule: an iteration needs at least 1 micro-batch, got " +
                        std::to_string(n.m));
  if (kind == ScheduleKind::OneFOneB)
    require(n.v == 1, "1F1B pipeline schedule: stages hold " + std::to_string(n.v) +
                          " model chunks; use the interleaved schedule for more than 1");
  if (kind == ScheduleKind::Interleaved) {
    require(n.v > 1,
            "interleaved pipeline schedule: stages hold 1 model chunk; use 1F1B, or give each "
            "stage 2 or more chunks");
    // Megatron's grouping walks micro-batches p at a time through every chunk, so a partial
    // group has no place in the order.
    require(n.m % n.p == 0, "interleaved pipeline schedule: " + std::to_string(n.m) +
                                " micro-batches per iteration is not a multiple of the "
                                "pipeline size " +
                                std::to_string(n.p));
  }
}

PipelineOp forward(int chunk, int microbatch) { return {Phase::Forward, chunk, microbatch}; }
PipelineOp backward(int chunk, int microbatch) { return {Phase::Backward, chunk, microbatch}; }

// GPipe: chunk by chunk, so stage 0's chunk c+1 forward finds chunk c done on the last stage;
// backwards mirror it from the last chunk, since gradients enter at the model's end.
std::vector<PipelineOp> all_forward_all_backward(const Sizes& n) {
  std::vector<PipelineOp> ops;
  ops.reserve(2 * n.v * n.m);
  for (int c = 0; c < n.v; ++c)
    for (int mb = 0; mb < n.m; ++mb) ops.push_back(forward(c, mb));
  for (int c = n.v - 1; c >= 0; --c)
    for (int mb = 0; mb < n.m; ++mb) ops.push_back(backward(c, mb));
  return ops;
}

// Warm-up fills the pipeline below this stage: stage s must run p - s - 1 forwards before the
// first gradient can come back from the last stage. Then each forward pairs with the oldest
// backward, which caps the activations alive at p - s.
std::vector<PipelineOp> one_f_one_b(const Sizes& n) {
  const int warmup = std::min(n.p - n.stage - 1, n.m);
  const int steady = n.m - warmup;
  std::vector<PipelineOp> ops;
  ops.reserve(2 * n.m);
  for (int mb = 0; mb < warmup; ++mb) ops.push_back(forward(0, mb));
  for (int i = 0; i < steady; ++i) {
    ops.push_back(forward(0, warmup + i));
    ops.push_back(backward(0, i));
  }
  for (int mb = steady; mb < n.m; ++mb) ops.push_back(backward(0, mb));
  return ops;
}

// Megatron's get_model_chunk_id and micro-batch counting: virtual micro-batches go p at a time
// through chunk 0, then chunk 1, ..., before the next p micro-batches start.
PipelineOp virtual_op(const Sizes& n, Phase phase, int k) {
  const int in_group = k % (n.p * n.v);
  const int forward_chunk = in_group / n.p;
  const int chunk = phase == Phase::Forward ? forward_chunk : n.v - 1 - forward_chunk;
  const int microbatch = (k / (n.p * n.v)) * n.p + k % n.p;
  return {phase, chunk, microbatch};
}

// A stage runs (v - 1) p forwards to reach its last chunk, plus twice its distance from the last
// stage: the round trip before a gradient comes back. Megatron-Core caps this at every virtual
// micro-batch (its older m == p rule, all forward on every stage, is gone).
int interleaved_warmup(const Sizes& n) {
  return std::min((n.p - n.stage - 1) * 2 + (n.v - 1) * n.p, n.m * n.v);
}

std::vector<PipelineOp> interleaved(const Sizes& n) {
  const int total = n.m * n.v;
  const int warmup = interleaved_warmup(n);
  const int steady = total - warmup;
  std::vector<PipelineOp> ops;
  ops.reserve(2 * total);
  for (int k = 0; k < warmup; ++k) ops.push_back(virtual_op(n, Phase::Forward, k));
  for (int k = 0; k < steady; ++k) {
    ops.push_back(virtual_op(n, Phase::Forward, warmup + k));
    ops.push_back(virtual_op(n, Phase::Backward, k));
  }
  for (int k = steady; k < total; ++k) ops.push_back(virtual_op(n, Phase::Backward, k));
  return ops;
}

}  // namespace

std::string to_string(const PipelineOp& op) {
  return std::string(op.phase == Phase::Forward ? "F" : "B") + "(c" + std::to_string(op.chunk) +
         ",mb" + std::to_string(op.microbatch) + ")";
}

std::vector<PipelineOp> stage_schedule(ScheduleKind kind, int stages, int stage, int chunks,
                                       int microbatches) {
  const Sizes n{stages, stage, chunks, microbatches};
  validate(kind, n);
  switch (kind) {
    case ScheduleKind::AllForwardAllBackward:
      return all_forward_all_backward(n);
    case ScheduleKind::OneFOneB:
      return one_f_one_b(n);
    case ScheduleKind::Interleaved:
      return interleaved(n);
  }
  throw std::invalid_argument("pipeline schedule: unknown schedule kind");
}

int peak_in_flight(const std::vector<PipelineOp>& ops) {
  int alive = 0, peak = 0;
  for (const PipelineOp& op : ops) {
    alive += op.phase == Phase::Forward ? 1 : -1;
    peak = std::max(peak, alive);
  }
  return peak;
}

}  // namespace megatron::parallel
