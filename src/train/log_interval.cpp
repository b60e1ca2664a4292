#include "train/log_interval.hpp"

#include <algorithm>
#include <cmath>

namespace megatron::train {

void LogInterval::add(const IterationOutcome& outcome, double seconds, int64_t tokens) {
  last_ = outcome;
  nan_iterations_ += !std::isfinite(outcome.loss);
  // As Megatron, a skipped iteration's loss is left out of the interval's mean.
  if (outcome.skipped || !std::isfinite(outcome.loss)) {
    ++left_out_;
  } else {
    loss_ += outcome.terms;
  }
  seconds_ += seconds;
  tokens_ += tokens;
  ++iterations_;
}

IterationMetrics LogInterval::take(const RunContext& run, int64_t iteration, int64_t consumed,
                                   int64_t skipped) {
  const auto& c = run.compiled;
  const double tokens_per_s = double(tokens_) / seconds_;
  const double flops_per_rank =
      tokens_per_s * run.speed.flops_per_token / double(run.plan.layout.world);
  IterationMetrics m{.iteration = iteration,
                     .train_iters = c.derived.train_iters,
                     .consumed_samples = consumed,
                     .consumed_tokens = consumed * c.recipe.data.seq_length,
                     .global_batch = last_.global_batch,
                     .lm_loss = loss_.lm / double(std::max<int64_t>(iterations_ - left_out_, 1)),
                     .lr = last_.lr,
                     .grad_norm = last_.grad_norm,
                     .loss_scale = last_.loss_scale,
                     .skipped_iterations = skipped,
                     .nan_iterations = nan_iterations_,
                     .ms_per_iteration = 1000.0 * seconds_ / double(iterations_),
                     .tokens_per_s = tokens_per_s,
                     .tflops_per_rank = flops_per_rank / 1e12,
                     .mfu = flops_per_rank / run.speed.peak,
                     .tensor_bytes_peak = run.backend->memory().peak_bytes,
                     .rss_peak_bytes = peak_rss_bytes()};
  m.classifier = run.config.classes > 0;
  if (run.config.binary_head || m.classifier) m.sop_loss = loss_.sop / double(std::max<int64_t>(iterations_ - left_out_, 1));
  *this = LogInterval();
  return m;
}

}  // namespace megatron::train
