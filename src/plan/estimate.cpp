#include "plan/estimate.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "plan/communication.hpp"
#include "plan/kernel_time.hpp"
#include "plan/stage_work.hpp"
#include "plan/units.hpp"

namespace megatron::plan {
namespace {

// Ranks fill nodes in order: rank r is on node r / gpus_per_node.
struct Nodes {
  int64_t gpus_per_node;
  int64_t world;
  int64_t of(int64_t rank) const { return rank / gpus_per_node; }
  // Whether every group of `block` consecutive ranks stays inside one node. Where group k
  // starts within its node repeats every gpus_per_node groups, so that many groups decide it
  // (a world of 10^10 ranks takes no longer than one of 8).
  bool blocks_stay_inside(int64_t block) const {
    const int64_t groups = std::min(world / block + (world % block != 0), gpus_per_node);
    for (int64_t k = 0; k < groups; ++k)
      if (of(k * block) != of(k * block + block - 1)) return false;
    return true;
  }
};

double seconds(double bytes, double bandwidth) { return bandwidth > 0 ? bytes / bandwidth : 0; }

}  // namespace

Estimate make_estimate(const ModelShape& x, const Chunks& chunks, const Plan& plan,
                       const HardwareProfile& hw) {
  Estimate out;
  out.hardware = hw.name;
  const Nodes nodes{x.gpus_per_node, x.world};
  const double intra = hw.intra_node_bandwidth, inter = hw.inter_node_bandwidth;
  // Rank groups are blocks of consecutive ranks (Megatron order tp-cp-dp-pp): a TP group is t
  // ranks, the ranks of one stage (its TP x CP x DP grid) are t c D.
  const int64_t stage_ranks = x.t * x.c * x.D;
  const double tp_bandwidth = nodes.blocks_stay_inside(x.t) ? intra : inter;
  const double dp_bandwidth = nodes.blocks_stay_inside(stage_ranks) ? intra : inter;
  // Two stages use the intra-node link only if both stages' ranks (and any between) share a node.
  auto stage_bandwidth = [&](int64_t s1, int64_t s2) {
    const int64_t first = std::min(s1, s2) * stage_ranks;
    const int64_t last = (std::max(s1, s2) + 1) * stage_ranks - 1;
    return nodes.of(first) == nodes.of(last) ? intra : inter;
  };

  const double peak = x.dtype == recipe::DType::F32 ? hw.peak_flops_32bit : hw.peak_flops_16bit;
  const bool sixteen_bit = x.dtype != recipe::DType::F32;
  double critical = 0, critical_compute = 0, critical_communication = 0, optimizer = 0;
  double data_parallel = 0, embedding_sync = 0;
  for (const Stage& stage : plan.stages) {
    // Each rank of a stage runs its share of every kernel (plan/stage_work.hpp) for each of
    // the m micro-batches; the slowest stage sets the pace.
    const StageTime time = stage_time(hw, stage_work(x, stage), sixteen_bit);
    const double compute = static_cast<double>(x.m) * time.per_microbatch();
    optimizer = std::max(optimizer, time.optimizer);
    const PipelineSends sends = pipeline_sends(x, chunks, stage);
    const int64_t next = (stage.index + 1) % x.p, previous = (stage.index + x.p - 1) % x.p;
    const double communication = seconds(tensor_parallel_bytes(x, stage), tp_bandwidth) +
                                 seconds(sends.to_next, stage_bandwidth(stage.index, next)) +
                                 seconds(sends.to_previous, stage_bandwidth(stage.index, previous));
    if (compute + communication > critical) {
      critical = compute + communication;
      critical_compute = compute;
      critical_communication = communication;
      const double m = static_cast<double>(x.m);
      out.gemm_time_s = m * time.gemm;
      out.attention_time_s = m * time.attention;
      out.memory_time_s = m * time.memory;
      out.overhead_time_s = m * time.overhead;
    }
    data_parallel = std::max(data_parallel, seconds(data_parallel_bytes(x, stage), dp_bandwidth));
    embedding_sync = std::max(embedding_sync,
                              seconds(embedding_sync_bytes(x, stage), stage_bandwidth(0, x.p - 1)));
  }
  // Data-parallel reduction overlaps the backward pass in part; the embedding sync and the
  // pipeline bubble do not overlap anything.
  // The optimizer runs once all micro-batches are done, outside the pipeline's bubble.
  const double exposed = data_parallel * (1 - hw.dp_overlap) + embedding_sync;
  out.optimizer_time_s = optimizer;
  out.compute_time_s = critical_compute + optimizer;
  out.communication_time_s = critical_communication + exposed;
  out.step_time_s = critical / (1 - plan.schedule.bubble_fraction) + optimizer + exposed;
  if (out.step_time_s > 0) {
    out.tokens_per_second = static_cast<double>(plan.tokens_per_iteration) / out.step_time_s;
    if (peak > 0)
      out.mfu =
          plan.flops.model_per_iteration / (out.step_time_s * static_cast<double>(x.world) * peak);
  }

  const double needed = plan.peak_rank.total();
  out.fits = needed <= hw.memory_bytes;
  if (!out.fits)
    out.warnings.push_back(fmt::format("stage {} needs {} per rank, the {} has {}", plan.peak_stage,
                                       gib(needed), hw.name, gib(hw.memory_bytes)));
  if (x.t > 1 && tp_bandwidth == inter && inter != intra)
    out.warnings.push_back(fmt::format(
        "parallel.tensor={} does not stay inside a node of {} GPUs: its all-reduces cross the "
        "inter-node network, {:.0f}x slower than inside a node",
        x.t, x.gpus_per_node, intra / inter));
  return out;
}

}  // namespace megatron::plan
