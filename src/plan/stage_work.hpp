// The kernels one rank of a stage runs: GEMMs by shape, attention calls and elementwise memory
// traffic per micro-batch (forward, backward, recompute), and the optimizer's per iteration.
#pragma once

#include <vector>

#include "plan/plan.hpp"
#include "plan/shape.hpp"

namespace megatron::plan {

// c[m, n] = a[m, k] b[k, n], `count` times.
struct GemmWork {
  double m = 0, n = 0, k = 0;
  double count = 1;
  double flops() const { return 2 * m * n * k * count; }
};

// Flash attention over `batch_heads` (sequence, head) pairs of `queries` x `keys`.
struct AttentionWork {
  double batch_heads = 0, queries = 0, keys = 0, head_dim = 0;
  bool causal = false;
  double forwards = 1;   // recompute adds forwards
  double backwards = 1;
  // What the kernel executes: QK^T and PV, 2 multiply-adds per score; causal kernels skip the
  // blocks above the diagonal, about half the scores.
  double executed_flops() const {
    const double scores = causal ? queries * (queries + 1) / 2 + (keys - queries) * queries
                                 : queries * keys;
    return 4 * batch_heads * scores * head_dim;
  }
};

struct StageWork {
  std::vector<GemmWork> gemms;           // per micro-batch
  std::vector<AttentionWork> attention;  // per micro-batch
  double memory_bytes = 0;               // elementwise traffic per micro-batch
  double kernels = 0;                    // operations per micro-batch
  double optimizer_bytes = 0;            // per iteration: gradient zeroing, norm, update
  double optimizer_kernels = 0;
};

StageWork stage_work(const ModelShape& x, const Stage& stage);

}  // namespace megatron::plan
