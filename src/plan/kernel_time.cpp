#include "plan/kernel_time.hpp"

#include <algorithm>
#include <array>

namespace megatron::plan {
namespace {

const KernelRates& rates(const HardwareProfile& hw, bool sixteen_bit) {
  return sixteen_bit ? hw.rates_16bit : hw.rates_32bit;
}

double sustained(const HardwareProfile& hw, bool sixteen_bit) {
  return (sixteen_bit ? hw.peak_flops_16bit : hw.peak_flops_32bit) * hw.achievable_fraction;
}

double seconds(double work, double rate) { return rate > 0 ? work / rate : 0; }

}  // namespace

double gemm_seconds(const HardwareProfile& hw, const GemmWork& g, bool sixteen_bit) {
  if (g.m <= 0 || g.n <= 0 || g.k <= 0) return 0;
  const RateGrid& grid = rates(hw, sixteen_bit).gemm;
  if (!grid.empty()) {
    const std::array<double, 3> point{g.m, g.n, g.k};
    return seconds(g.flops(), grid.rate_at(point));
  }
  // The roofline: a GEMM moves its three matrices at least once.
  const double bytes = (g.m * g.k + g.k * g.n + g.m * g.n) * (sixteen_bit ? 2 : 4) * g.count;
  return std::max(seconds(g.flops(), sustained(hw, sixteen_bit)),
                  seconds(bytes, hw.memory_bandwidth));
}

double attention_forward_seconds(const HardwareProfile& hw, const AttentionWork& a,
                                 bool sixteen_bit) {
  const RateGrid& grid = rates(hw, sixteen_bit).attention_forward;
  const std::array<double, 2> point{a.keys, a.head_dim};
  const double rate = grid.empty() ? sustained(hw, sixteen_bit) : grid.rate_at(point);
  return a.forwards * seconds(a.executed_flops(), rate);
}

double attention_backward_seconds(const HardwareProfile& hw, const AttentionWork& a,
                                  bool sixteen_bit) {
  // Backward recomputes the scores and forms four products: 2.5 times the forward's FLOPs.
  const RateGrid& grid = rates(hw, sixteen_bit).attention_backward;
  const std::array<double, 2> point{a.keys, a.head_dim};
  const double rate = grid.empty() ? sustained(hw, sixteen_bit) : grid.rate_at(point);
  return a.backwards * seconds(2.5 * a.executed_flops(), rate);
}

StageTime stage_time(const HardwareProfile& hw, const StageWork& work, bool sixteen_bit) {
  StageTime out;
  for (const GemmWork& g : work.gemms) out.gemm += gemm_seconds(hw, g, sixteen_bit);
  for (const AttentionWork& a : work.attention)
    out.attention += attention_forward_seconds(hw, a, sixteen_bit) +
                     attention_backward_seconds(hw, a, sixteen_bit);
  out.memory = seconds(work.memory_bytes, hw.memory_bandwidth);
  out.overhead = work.kernels * hw.kernel_overhead_s;
  out.optimizer = seconds(work.optimizer_bytes, hw.memory_bandwidth) +
                  work.optimizer_kernels * hw.kernel_overhead_s;
  return out;
}

}  // namespace megatron::plan
