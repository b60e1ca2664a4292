#include "train/iteration.hpp"

#include <cmath>

#include <fmt/format.h>

#include "core/error.hpp"
#include "train/host_batch.hpp"

namespace megatron::train {

IterationOutcome train_iteration(RunContext& run, int64_t iteration, int64_t consumed) {
  const auto& r = run.compiled.recipe;
  const parallel::ProcessGroups& groups = run.groups;
  tensor::Backend& backend = *run.backend;
  const int64_t mbs = r.training.micro_batch_size;
  const int64_t micro = run.batches.microbatches_at(consumed);  // per data-parallel rank
  IterationOutcome out{.global_batch = run.batches.global_batch_at(consumed),
                       .lr = optim::learning_rate(run.lr, iteration),
                       .loss_scale = run.scaler.scale()};
  run.optimizer->begin_iteration();
  const StepShape shape{.program = run.programs.at(micro),
                        .microbatches = micro,
                        .global_microbatches = micro * groups.dp_size,
                        .loss_scale = out.loss_scale,
                        .seed = uint64_t(r.training.seed),
                        .iteration = iteration};
  const StepLosses local_loss = forward_backward(
      backend, *run.model, groups, shape,
      [&](int64_t j) {
        const int64_t m = j * groups.dp_size + groups.coord.dp;  // in the global batch
        const int64_t first = consumed + m * mbs;
        if (run.train_batches) return upload_batch(backend, run.train_batches->take(first), run.batch_spec);
        return make_batch(backend, *run.data.train, first, mbs, run.batch_spec);
      },
      [&](size_t first) { run.optimizer->grads_ready(first); });
  run.optimizer->finish_gradients();
  out.terms = run.sum_of_losses(local_loss);
  out.loss = out.terms.lm + out.terms.sop;
  out.grad_norm = run.optimizer->grad_norm(1.0 / out.loss_scale);
  const bool overflow = !std::isfinite(out.grad_norm) || !std::isfinite(out.loss);
  if (overflow && run.scaling.dynamic) {
    out.skipped = true;
    run.scaler.update(true);
    return out;
  }
  if (overflow) {
    throw RuntimeFailure(fmt::format(
        "iteration {}: the {} is {} (lr {:.3e}); lower training.lr or training.clip_grad, or "
        "check the data",
        iteration, std::isfinite(out.loss) ? "gradient norm" : "loss",
        std::isfinite(out.loss) ? out.grad_norm : out.loss, out.lr));
  }
  double grad_scale = 1.0 / out.loss_scale;
  if (r.training.clip_grad > 0.0) {
    const double clip = r.training.clip_grad / (out.grad_norm + 1e-6);
    if (clip < 1.0) grad_scale *= clip;
  }
  run.optimizer->step(out.lr, grad_scale);
  run.scaler.update(false);
  return out;
}

StepLosses evaluate(RunContext& run) {
  // Micro-batch m of the validation set runs on data-parallel rank m % dp.
  const auto& r = run.compiled.recipe;
  const parallel::ProcessGroups& groups = run.groups;
  const int64_t mbs = r.training.micro_batch_size;
  const int64_t total = r.eval.iters * r.training.global_batch_size / mbs;
  const int64_t mine = (total - groups.coord.dp + groups.dp_size - 1) / groups.dp_size;
  const StepLosses sum =
      forward_only(*run.backend, *run.model, groups, mine, uint64_t(r.training.seed),
                   [&](int64_t j) {
                     const int64_t m = j * groups.dp_size + groups.coord.dp;
                     return make_batch(*run.backend, *run.data.valid, m * mbs, mbs,
                                       run.batch_spec);
                   });
  const StepLosses all = run.sum_of_losses(sum);
  const double count = double(std::max<int64_t>(total, 1));
  return {.lm = all.lm / count, .sop = all.sop / count, .accuracy = all.accuracy / count};
}

}  // namespace megatron::train
