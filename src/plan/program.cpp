#include "plan/program.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace megatron::plan {
namespace {

struct Sizes {
  int64_t p, stage, v, m;
};

void require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument(message);
}

// Sizes whose products int64_t holds, and (below) a program that fits in memory.
void validate_limits(int64_t stages, int64_t chunks, int64_t microbatches) {
  constexpr int64_t kMaxSize = int64_t{1} << 30;
  for (const int64_t size : {stages, chunks, microbatches})
    require(size <= kMaxSize, "pipeline schedule: " + std::to_string(size) +
                                  " is more than a pipeline schedule can order (at most 2^30)");
}

void validate_program_length(int64_t chunks, int64_t microbatches) {
  constexpr int64_t kMaxChunkPasses = int64_t{1} << 26;
  require(chunks < 1 || microbatches < 1 || chunks * microbatches <= kMaxChunkPasses,
          "pipeline schedule: " + std::to_string(chunks) + " chunks x " +
              std::to_string(microbatches) + " micro-batches is more passes than one iteration "
              "can run (at most 2^26)");
}

void validate(recipe::Schedule kind, const Sizes& n) {
  require(n.p >= 1,
          "pipeline schedule: the pipeline size must be at least 1, got " + std::to_string(n.p));
  require(n.stage >= 0 && n.stage < n.p, "pipeline schedule: stage " + std::to_string(n.stage) +
                                             " is outside the pipeline's " + std::to_string(n.p) +
                                             " stages (0.." + std::to_string(n.p - 1) + ")");
  require(n.v >= 1, "pipeline schedule: each stage must hold at least 1 model chunk, got " +
                        std::to_string(n.v));
  require(n.m >= 1, "pipeline schedule: an iteration needs at least 1 micro-batch, got " +
                        std::to_string(n.m));
  if (kind == recipe::Schedule::OneFOneB)
    require(n.v == 1, "1F1B pipeline schedule: stages hold " + std::to_string(n.v) +
                          " model chunks; use the interleaved schedule for more than 1");
  if (kind == recipe::Schedule::Interleaved) {
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

int64_t one_f_one_b_warmup(const Sizes& n) { return std::min(n.p - n.stage - 1, n.m); }

// Warm-up fills the pipeline below this stage: stage s must run p - s - 1 forwards before the
// first gradient can come back from the last stage. Then each forward pairs with the oldest
// backward, which caps the activations alive at p - s.
std::vector<PipelineOp> one_f_one_b(const Sizes& n) {
  const int warmup = one_f_one_b_warmup(n);
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
int64_t interleaved_warmup(const Sizes& n) {
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

std::vector<PipelineOp> stage_program(recipe::Schedule kind, int64_t stages, int64_t stage,
                                      int64_t chunks, int64_t microbatches) {
  validate_limits(stages, chunks, microbatches);
  validate_program_length(chunks, microbatches);
  const Sizes n{stages, stage, chunks, microbatches};
  validate(kind, n);
  switch (kind) {
    case recipe::Schedule::AllForwardAllBackward:
      return all_forward_all_backward(n);
    case recipe::Schedule::OneFOneB:
      return one_f_one_b(n);
    case recipe::Schedule::Interleaved:
      return interleaved(n);
  }
  throw std::invalid_argument("pipeline schedule: unknown schedule kind");
}

int64_t warmup_forwards(recipe::Schedule kind, int64_t stages, int64_t stage, int64_t chunks,
                        int64_t microbatches) {
  validate_limits(stages, chunks, microbatches);
  const Sizes n{stages, stage, chunks, microbatches};
  validate(kind, n);
  switch (kind) {
    case recipe::Schedule::AllForwardAllBackward:
      return n.v * n.m;
    case recipe::Schedule::OneFOneB:
      return one_f_one_b_warmup(n);
    case recipe::Schedule::Interleaved:
      return interleaved_warmup(n);
  }
  throw std::invalid_argument("pipeline schedule: unknown schedule kind");
}

int64_t peak_chunks_in_flight(recipe::Schedule kind, int64_t stages, int64_t stage,
                              int64_t chunks, int64_t microbatches) {
  // After the warm-up, the first steady forward runs before the first backward frees anything.
  return std::min(warmup_forwards(kind, stages, stage, chunks, microbatches) + 1,
                  chunks * microbatches);
}

int64_t peak_in_flight(const std::vector<PipelineOp>& ops) {
  int64_t alive = 0, peak = 0;
  for (const PipelineOp& op : ops) {
    alive += op.phase == Phase::Forward ? 1 : -1;
    peak = std::max(peak, alive);
  }
  return peak;
}

namespace {

// Finish times of every (phase, stage, chunk, micro-batch); negative until the op has run.
class FinishTimes {
 public:
  FinishTimes(int64_t stages, int64_t chunks, int64_t microbatches)
      : p_(stages), v_(chunks), m_(microbatches), at_(size_t(2 * p_ * v_ * m_), -1.0) {}
  double& at(Phase phase, int64_t stage, const PipelineOp& op) {
    const int64_t ph = phase == Phase::Forward ? 0 : 1;
    return at_[size_t(((ph * p_ + stage) * v_ + op.chunk) * m_ + op.microbatch)];
  }

 private:
  int64_t p_, v_, m_;
  std::vector<double> at_;
};

}  // namespace

ProgramTiming time_programs(const std::vector<std::vector<PipelineOp>>& programs, int64_t chunks,
                            int64_t microbatches) {
  const int64_t p = int64_t(programs.size());
  if (p < 1 || chunks < 1 || microbatches < 1 || 2 * p * chunks * microbatches > kMaxSimulatedOps)
    throw std::invalid_argument("pipeline timing: " + std::to_string(p) + " stages x " +
                                std::to_string(chunks) + " chunks x " +
                                std::to_string(microbatches) +
                                " micro-batches is outside what the simulation runs");
  const double forward_cost = 1.0 / double(chunks), backward_cost = 2.0 / double(chunks);
  FinishTimes finished(p, chunks, microbatches);
  std::vector<size_t> next(size_t(p), 0);
  std::vector<double> clock(size_t(p), 0.0);
  // The time the op's input is ready on `stage`, or a negative number while it is not.
  const auto input_ready = [&](int64_t stage, const PipelineOp& op) -> double {
    if (op.phase == Phase::Forward) {
      if (stage > 0) return finished.at(Phase::Forward, stage - 1, op);
      if (op.chunk == 0) return 0.0;
      return finished.at(Phase::Forward, p - 1, {Phase::Forward, op.chunk - 1, op.microbatch});
    }
    const double own = finished.at(Phase::Forward, stage, {Phase::Forward, op.chunk, op.microbatch});
    if (own < 0) return own;
    double grad = own;
    if (stage < p - 1)
      grad = finished.at(Phase::Backward, stage + 1, op);
    else if (op.chunk < chunks - 1)
      grad = finished.at(Phase::Backward, 0, {Phase::Backward, op.chunk + 1, op.microbatch});
    return grad < 0 ? grad : std::max(own, grad);
  };
  // Each round runs every stage as far as its inputs allow; a round with no progress is a
  // deadlock. Ops resolved in a later round never start earlier than those of their stage
  // before them, so the times are those of the programs running concurrently.
  for (bool progressed = true; progressed;) {
    progressed = false;
    for (int64_t s = 0; s < p; ++s) {
      const auto& ops = programs[size_t(s)];
      while (next[size_t(s)] < ops.size()) {
        const PipelineOp& op = ops[next[size_t(s)]];
        if (op.chunk < 0 || op.chunk >= chunks || op.microbatch < 0 || op.microbatch >= microbatches)
          throw std::invalid_argument("pipeline timing: stage " + std::to_string(s) + " runs " +
                                      to_string(op) + ", outside its " + std::to_string(chunks) +
                                      " chunks and " + std::to_string(microbatches) +
                                      " micro-batches");
        const double ready = input_ready(s, op);
        if (ready < 0) break;
        const double start = std::max(clock[size_t(s)], ready);
        clock[size_t(s)] = start + (op.phase == Phase::Forward ? forward_cost : backward_cost);
        finished.at(op.phase, s, op) = clock[size_t(s)];
        ++next[size_t(s)];
        progressed = true;
      }
    }
  }
  std::string waiting;
  for (int64_t s = 0; s < p; ++s)
    if (next[size_t(s)] < programs[size_t(s)].size())
      waiting += " stage " + std::to_string(s) + " waits at " +
                 to_string(programs[size_t(s)][next[size_t(s)]]);
  if (!waiting.empty()) throw std::logic_error("pipeline programs deadlock:" + waiting);
  return {.makespan = *std::max_element(clock.begin(), clock.end()),
          .busy = 3.0 * double(microbatches)};
}

}  // namespace megatron::plan
