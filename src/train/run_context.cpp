#include "train/run_context.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <fstream>

#include "ckpt/model_weights.hpp"
#include "ckpt/checkpoint_reader.hpp"
#include "ckpt/directory.hpp"
#include "core/logging.hpp"
#include "core/output_dir.hpp"
#include "dist/launcher.hpp"
#include "dist/watchdog.hpp"
#include "parallel/scalar_reduce.hpp"
#include "recipe/enum_names.hpp"
#include "recipe/render.hpp"
#include "tensor/make_backend.hpp"
#include "train/device_setup.hpp"

namespace megatron::train {
namespace {

optim::LrSchedule lr_schedule(const recipe::CompiledRecipe& c) {
  const auto& t = c.recipe.training;
  return {.max_lr = t.lr,
          .min_lr = t.min_lr,
          .warmup_iters = c.derived.lr_warmup_iters,
          .decay_iters = c.derived.lr_decay_iters,
          .style = t.lr_decay_style,
          .wsd_decay_iters = c.derived.lr_wsd_decay_iters,
          .wsd_style = t.lr_wsd_decay_style};
}

optim::LossScalerConfig scaler_config(const recipe::PrecisionSection& p) {
  if (p.dtype != recipe::DType::F16) return {.initial_scale = 1.0, .dynamic = false};
  if (p.loss_scale) return {.initial_scale = *p.loss_scale, .dynamic = false};
  return {.initial_scale = p.initial_loss_scale,
          .min_scale = p.min_loss_scale,
          .window = p.loss_scale_window,
          .hysteresis = p.hysteresis,
          .dynamic = true};
}

// The resolved recipe, with the plan's placement among its derived values as `recipe show`
// prints it, and the recipe as the user wrote it.
void write_run_recipe(const std::filesystem::path& dir, const recipe::CompiledRecipe& c,
                      const plan::Plan& plan, const TrainOptions& o) {
  std::ofstream(dir / "recipe.yaml") << recipe::render_yaml(c, plan.derivations);
  if (!o.recipe_text.empty()) std::ofstream(dir / "recipe.original.yaml") << o.recipe_text;
}

ModelSpeed model_speed(const recipe::CompiledRecipe& c, const plan::Plan& p,
                       const plan::HardwareProfile& hardware) {
  const bool wide = c.recipe.precision.dtype == recipe::DType::F32;
  return {.flops_per_token = p.flops.model_per_iteration /
                             double(std::max<int64_t>(p.tokens_per_iteration, 1)),
          .peak = wide ? hardware.peak_flops_32bit : hardware.peak_flops_16bit};
}

}  // namespace

RunContext::RunContext(const recipe::CompiledRecipe& c, const TrainOptions& options)
    : ModelContext(c, options.threads),
      scaling(scaler_config(c.recipe.precision)),
      scaler(scaling),
      lr(lr_schedule(c)),
      batches{.global_batch = c.recipe.training.global_batch_size,
              .micro_batch = c.recipe.training.micro_batch_size,
              .data_parallel = plan.layout.dp,
              .rampup = c.recipe.training.rampup_batch_size},
      programs(plan, groups.coord.pp),
      speed(model_speed(c, plan, hardware)),
      batch_spec(train::batch_spec(config)) {
  const auto& r = c.recipe;
  logging::set_recipe_level(recipe::name_of(r.logging.level));
  // Ranks other than 0 say only what goes wrong.
  if (!rank0() && spdlog::get_level() < spdlog::level::warn) spdlog::set_level(spdlog::level::warn);
  // The run directory is made (and probed) first, so an unwritable one fails before any work;
  // its recipe files are written once the checkpoint and data have loaded, and a run refused
  // before then leaves no directory it made behind.
  std::vector<std::filesystem::path> created;
  if (rank0()) {
    run_dir = run_dir_for(c, options.run_dir);
    created = prepare_output_dir("run directory", run_dir.string());
  }
  try {
    set_up(c, options);
  } catch (...) {
    remove_created(created);
    throw;
  }
  if (rank0()) write_run_recipe(run_dir, c, plan, options);
}

void RunContext::set_up(const recipe::CompiledRecipe& c, const TrainOptions& options) {
  const auto& r = c.recipe;
  checkpointer = std::make_unique<Checkpointer>(c, config, groups, *backend, options.recipe_text,
                                                options.overrides);
  // A run that loads a checkpoint overwrites every weight: drawing them first is wasted time.
  if (!checkpointer->source()) {
    model->initialise(uint64_t(r.training.seed));
    if (r.finetune.pretrained) load_pretrained(*r.finetune.pretrained);
  }
  optimizer = std::make_unique<ParallelOptimizer>(
      *backend, model->parameters(), groups,
      optim::OptimizerConfig{.kind = r.training.optimizer,
                      .beta1 = r.training.adam_beta1,
                      .beta2 = r.training.adam_beta2,
                      .eps = r.training.adam_eps,
                      .weight_decay = r.training.weight_decay,
                      .momentum = r.training.sgd_momentum},
      r.parallel.distributed_optimizer, plan.gradient_bucket_elements, config.tie_embeddings);
  resumed = checkpointer->load(*model, *optimizer);
  if (resumed && scaling.dynamic && resumed->dtype == "f16") {
    scaler.restore(resumed->state.loss_scale, resumed->state.growth_tracker,
                   resumed->state.hysteresis_tracker);
  }
  const int64_t train_samples = batches.samples_after(c.derived.train_iters);
  const bool evaluating = r.eval.interval && *r.eval.interval > 0 && r.eval.iters > 0;
  const int64_t valid_samples = evaluating ? r.eval.iters * r.training.global_batch_size : 0;
  data = load_train_data(c, train_samples, std::max<int64_t>(valid_samples, 1));
  if (r.data.num_workers > 0) {
    // Megatron's loader keeps 2 batches per worker ready (PyTorch's prefetch_factor).
    const int workers = static_cast<int>(r.data.num_workers);
    train_batches = std::make_unique<BatchPrefetcher>(
        *data.train, batch_spec, r.training.micro_batch_size,
        groups.dp_size * r.training.micro_batch_size, workers, 2 * workers);
  }
}

void RunContext::load_pretrained(const std::string& path) {
  const std::optional<std::filesystem::path> dir = ckpt::resolve_checkpoint(path);
  if (!dir) {
    throw UserError("finetune.pretrained " + path +
                    ": no checkpoint there (a save directory with `latest`, or an iter_NNNNNNN "
                    "directory)");
  }
  const ckpt::CheckpointReader reader(*dir);
  // What pre-training has no use for is drawn fresh: the classifier, and BERT's pooler and
  // token types when it trained without its binary head.
  const std::vector<std::string> fresh = ckpt::load_model_weights(reader, *model, *backend, [](const std::string& name) {
    return name.starts_with("classification_head.") || name.starts_with("pooler.") ||
           name.starts_with("embedding.tokentype_embeddings.");
  });
  spdlog::info("fine-tuning from {} (its weights; the optimizer starts afresh){}", dir->string(),
               fresh.empty() ? "" : fmt::format("; drawn fresh: {}", fmt::join(fresh, ", ")));
}

StepLosses RunContext::sum_of_losses(const StepLosses& value) const {
  const bool holder = groups.last_stage() && groups.coord.tp == 0;
  StepLosses out{.lm = parallel::sum_across(*backend, *groups.world, holder ? value.lm : 0.0)};
  if (config.binary_head || config.classes > 0) {
    out.sop = parallel::sum_across(*backend, *groups.world, holder ? value.sop : 0.0);
    out.accuracy = parallel::sum_across(*backend, *groups.world, holder ? value.accuracy : 0.0);
  }
  return out;
}

}  // namespace megatron::train
