// The per-op profile of training steps (`megatron run --profile`): the recorded calls summed by
// op and shapes into a table with each row's share of the step and achieved rate against the
// hardware's peak, written as a log table, as JSON and as a Chrome trace (docs/profiling.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/hardware.hpp"
#include "tensor/profiling_backend.hpp"

namespace megatron::train {

// What a row's rate is measured against.
struct DevicePeaks {
  std::string name;         // the hardware profile's name, e.g. "h100-sxm"
  double flops_16bit = 0;   // FLOP/s
  double flops_32bit = 0;
  double bandwidth = 0;     // bytes/s
};
DevicePeaks peaks_of(const plan::HardwareProfile& hardware);

// The calls of one op with one set of shapes.
struct OpRow {
  std::string op, shapes;
  tensor::DType dtype = tensor::DType::F32;
  int64_t calls = 0;
  double ms = 0.0;     // summed over the calls
  double flops = 0.0;  // summed; 0 for memory-bound ops
  double bytes = 0.0;  // summed
  double share = 0.0;  // of the profiled steps' time
  // FLOP/s for ops with FLOPs, else bytes/s, and that as a fraction of the matching peak (0
  // when the hardware profile has no such peak).
  double rate = 0.0;
  double of_peak = 0.0;
  bool counts_flops() const { return flops > 0.0; }
};

struct OpProfile {
  int rank = 0;
  std::string device;
  DevicePeaks peaks;
  std::vector<tensor::ProfiledStep> steps;
  std::vector<OpRow> rows;  // longest total first; ties by op and shapes
  double step_ms = 0.0;     // the profiled steps together
  double ops_ms = 0.0;      // time inside backend ops
  int64_t peak_bytes = 0;
  // Step time outside every backend op: communication, host work, launch gaps.
  double outside_ms() const { return step_ms > ops_ms ? step_ms - ops_ms : 0.0; }
};

OpProfile summarize(const tensor::ProfileRecord& record, const DevicePeaks& peaks, int rank);
// The first `top` rows as aligned text lines, with a heading and the time outside ops.
std::vector<std::string> profile_table(const OpProfile& profile, size_t top);
nlohmann::json profile_json(const OpProfile& profile);
// Chrome's trace-event format (chrome://tracing, Perfetto): each call and step a complete event,
// live tensor memory a counter.
nlohmann::json chrome_trace(const tensor::ProfileRecord& record, int rank);

// Writes DIR/profile/rank-R.json and rank-R.trace.json; returns the JSON file's path.
std::filesystem::path write_profile(const std::filesystem::path& run_dir, const OpProfile& profile,
                                    const tensor::ProfileRecord& record);

}  // namespace megatron::train
