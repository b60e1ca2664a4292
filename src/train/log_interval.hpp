// The iterations since the last log line, and the metrics line they make: Megatron's line
// averages loss and time over the log interval and reports the rest as of its last iteration.
#pragma once

#include <cstdint>

#include "train/iteration.hpp"
#include "train/metrics_log.hpp"
#include "train/run_context.hpp"

namespace megatron::train {

class LogInterval {
 public:
  void add(const IterationOutcome& outcome, double seconds, int64_t tokens);
  // The line for `iteration` (the interval's last), consumed samples and skipped iterations as
  // of then; starts the next interval.
  IterationMetrics take(const RunContext& run, int64_t iteration, int64_t consumed,
                        int64_t skipped);

 private:
  IterationOutcome last_;
  StepLosses loss_;
  double seconds_ = 0.0;
  int64_t iterations_ = 0, tokens_ = 0;
  int64_t nan_iterations_ = 0;  // whose loss was NaN or infinite (skipped under f16 scaling)
  int64_t left_out_ = 0;        // skipped iterations: not in the mean loss
};

}  // namespace megatron::train
