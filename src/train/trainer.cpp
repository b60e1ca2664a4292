#include "train/trainer.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <limits>

#include <fmt/format.h>

#include "core/error.hpp"
#include "model/gpt_model.hpp"
#include "optim/loss_scaler.hpp"
#include "optim/lr_schedule.hpp"
#include "optim/optimizer.hpp"
#include "recipe/render.hpp"
#include "tensor/cpu_backend.hpp"
#include "train/batch_size.hpp"
#include "train/metrics_log.hpp"
#include "train/train_data.hpp"

namespace megatron::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

optim::LrSchedule lr_schedule(const recipe::CompiledRecipe& c) {
  const auto& t = c.recipe.training;
  const int64_t decay = c.derived.lr_decay_iters;
  return {.max_lr = t.lr,
          .min_lr = t.min_lr,
          .warmup_iters = c.derived.lr_warmup_iters,
          .decay_iters = decay,
          .style = t.lr_decay_style,
          .wsd_decay_iters = t.lr_wsd_decay_iters.value_or(decay / 10),
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

std::filesystem::path prepare_run_dir(const recipe::CompiledRecipe& c, const TrainOptions& o) {
  std::filesystem::path dir = o.run_dir ? *o.run_dir
                              : c.recipe.logging.run_dir ? std::filesystem::path(*c.recipe.logging.run_dir)
                                                         : default_run_dir(c.file);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw UserError("cannot create run directory " + dir.string() + ": " + ec.message());
  std::ofstream(dir / "recipe.yaml") << recipe::render_yaml(c);
  if (!o.recipe_text.empty()) std::ofstream(dir / "recipe.original.yaml") << o.recipe_text;
  return dir;
}

// Mean loss over `iters` global batches of the validation split (the same batches every time,
// so successive evaluations compare like with like).
double evaluate(tensor::Backend& backend, const model::GptModel& model,
                const data::GptSampleSource& valid, const recipe::CompiledRecipe& c) {
  const auto& r = c.recipe;
  double total = 0.0;
  int64_t batches = 0;
  const model::Pass pass{.backend = backend, .training = false, .seed = uint64_t(r.training.seed)};
  const int64_t samples = r.eval.iters * r.training.global_batch_size;
  for (int64_t first = 0; first < samples; first += r.training.micro_batch_size) {
    const model::GptBatch batch =
        make_batch(backend, valid, first, r.training.micro_batch_size, r.model.vocab_size);
    const model::LossSum sum = model.forward(pass, batch, nullptr);
    total += sum.loss / std::max(sum.tokens, 1.0);
    ++batches;
  }
  return total / double(std::max<int64_t>(batches, 1));
}

}  // namespace

std::filesystem::path default_run_dir(const std::string& recipe_file) {
  const std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
  return std::filesystem::path("runs") / std::filesystem::path(recipe_file).stem() / stamp;
}

TrainResult train(const recipe::CompiledRecipe& c, const TrainOptions& options) {
  const recipe::Recipe& r = c.recipe;
  const recipe::Derived& d = c.derived;
  if (r.model.arch != recipe::Arch::Gpt) {
    throw UserError(c.file + ": model.arch: only gpt trains so far (bert and t5 are planned)");
  }
  if (d.world_size != 1) {
    throw UserError(fmt::format(
        "{}: this recipe's layout needs {} ranks (tensor {} x pipeline {} x data {}); this build "
        "trains on one process: set parallel.tensor=1 parallel.pipeline=1 parallel.data=1",
        c.file, d.world_size, r.parallel.tensor, r.parallel.pipeline, d.data_parallel));
  }
  if (d.train_iters <= 0) {
    throw UserError(c.file + ": the recipe sets no training length: set training.train_iters, "
                             "train_samples or train_tokens");
  }
  const auto started = Clock::now();
  TrainResult result;
  result.run_dir = prepare_run_dir(c, options);

  tensor::CpuBackend backend(options.threads);
  const model::GptConfig config = model::gpt_config(r, d);
  model::GptModel model(backend, config);
  model.initialise(uint64_t(r.training.seed));

  std::vector<optim::OptimizedTensor> targets;
  for (const auto& p : model.parameters().all()) {
    targets.push_back({.name = p->name, .value = &p->value, .grad = &p->grad,
                       .weight_decay = p->weight_decay});
  }
  optim::Optimizer optimizer(backend, std::move(targets),
                             {.kind = r.training.optimizer,
                              .beta1 = r.training.adam_beta1,
                              .beta2 = r.training.adam_beta2,
                              .eps = r.training.adam_eps,
                              .weight_decay = r.training.weight_decay,
                              .momentum = r.training.sgd_momentum});
  const optim::LossScalerConfig scaling = scaler_config(r.precision);
  optim::LossScaler scaler(scaling);
  const optim::LrSchedule schedule = lr_schedule(c);
  const BatchSchedule batches{.global_batch = r.training.global_batch_size,
                              .micro_batch = r.training.micro_batch_size,
                              .data_parallel = d.data_parallel,
                              .rampup = r.training.rampup_batch_size};

  int64_t train_samples = 0;
  for (int64_t it = 0; it < d.train_iters; ++it) train_samples += batches.global_batch_at(train_samples);
  const bool evaluating = r.eval.interval && *r.eval.interval > 0 && r.eval.iters > 0;
  const int64_t valid_samples = evaluating ? r.eval.iters * r.training.global_batch_size : 0;
  const TrainData data = load_train_data(c, train_samples, std::max<int64_t>(valid_samples, 1));

  spdlog::info("megatron run {}: gpt, {} layers, hidden {}, {} heads, seq {}, {:.2f}M parameters ({})",
               c.file, config.num_layers, config.hidden, config.heads, config.seq_length,
               double(model.parameters().count()) / 1e6, tensor::name(config.dtype));
  spdlog::info("rank 0 of 1 on {}: layout tensor 1 x pipeline 1 x data 1; global batch {} = {} "
               "micro-batches x {}; {} iterations", backend.description(),
               r.training.global_batch_size, batches.microbatches_at(0), r.training.micro_batch_size,
               d.train_iters);
  spdlog::info("data: {}; run directory {}", data.description, result.run_dir.string());

  MetricsLog log(result.run_dir);
  const double time_limit_s = r.training.exit_duration_minutes
                                  ? *r.training.exit_duration_minutes * 60.0
                                  : std::numeric_limits<double>::infinity();
  int64_t consumed = 0, skipped = 0;
  double interval_loss = 0.0, interval_seconds = 0.0;
  int64_t interval_iters = 0, interval_tokens = 0;
  result.stop_reason = "reached train iterations";

  if (evaluating && data.valid) {
    // Where training starts from: an untrained model scores about log(vocabulary).
    log.validation(0, evaluate(backend, model, *data.valid, c));
  }
  for (int64_t iteration = 1; iteration <= d.train_iters; ++iteration) {
    const auto step_start = Clock::now();
    const int64_t global_batch = batches.global_batch_at(consumed);
    const int64_t micro = batches.microbatches_at(consumed);
    const double loss_scale = scaler.scale();
    model.parameters().zero_grads();
    double loss = 0.0;
    for (int64_t m = 0; m < micro; ++m) {
      const model::Pass pass{.backend = backend, .training = true,
                             .seed = uint64_t(r.training.seed), .iteration = iteration,
                             .microbatch = m};
      const model::GptBatch batch =
          make_batch(backend, *data.train, consumed + m * r.training.micro_batch_size,
                     r.training.micro_batch_size, r.model.vocab_size);
      model::GptActivations saved;
      const model::LossSum sum = model.forward(pass, batch, &saved);
      const double tokens = std::max(sum.tokens, 1.0);
      loss += sum.loss / tokens / double(micro);
      model.backward(pass, batch, saved, float(loss_scale / (tokens * double(micro))));
    }
    const double grad_norm = optimizer.grad_norm(1.0 / loss_scale);
    const bool overflow = !std::isfinite(grad_norm) || !std::isfinite(loss);
    const double lr = optim::learning_rate(schedule, iteration);
    if (overflow && scaling.dynamic) {
      ++skipped;
      scaler.update(true);
    } else if (overflow) {
      throw RuntimeFailure(fmt::format(
          "iteration {}: the {} is {} (lr {:.3e}); lower training.lr or "
          "training.clip_grad, or check the data",
          iteration, std::isfinite(loss) ? "gradient norm" : "loss",
          std::isfinite(loss) ? grad_norm : loss, lr));
    } else {
      double grad_scale = 1.0 / loss_scale;
      if (r.training.clip_grad > 0.0) {
        const double clip = r.training.clip_grad / (grad_norm + 1e-6);
        if (clip < 1.0) grad_scale *= clip;
      }
      optimizer.step(lr, grad_scale);
      scaler.update(false);
    }
    consumed += global_batch;
    result.losses.push_back(loss);
    backend.synchronize();
    const double step_seconds = seconds_since(step_start);
    interval_loss += loss;
    interval_seconds += step_seconds;
    interval_tokens += global_batch * r.data.seq_length;
    ++interval_iters;

    const bool out_of_time = seconds_since(started) >= time_limit_s;
    const bool last = iteration == d.train_iters || out_of_time;
    std::optional<double> val;
    if (evaluating && data.valid && (iteration % *r.eval.interval == 0 || last)) {
      val = evaluate(backend, model, *data.valid, c);
      log.validation(iteration, *val);
      result.final_val_loss = val;
    }
    if (iteration % r.logging.interval == 0 || last || val) {
      IterationMetrics m{.iteration = iteration,
                         .train_iters = d.train_iters,
                         .consumed_samples = consumed,
                         .consumed_tokens = consumed * r.data.seq_length,
                         .global_batch = global_batch,
                         .lm_loss = interval_loss / double(interval_iters),
                         .lr = lr,
                         .grad_norm = grad_norm,
                         .loss_scale = loss_scale,
                         .skipped_iterations = skipped,
                         .ms_per_iteration = 1000.0 * interval_seconds / double(interval_iters),
                         .tokens_per_s = double(interval_tokens) / interval_seconds,
                         .tensor_bytes_peak = backend.memory().peak_bytes,
                         .rss_peak_bytes = peak_rss_bytes()};
      if (val) {
        m.val_loss = *val;
        m.val_ppl = perplexity(*val);
      }
      log.log(m);
      interval_loss = interval_seconds = 0.0;
      interval_iters = interval_tokens = 0;
    }
    result.iterations = iteration;
    result.consumed_samples = consumed;
    if (out_of_time) {
      result.stop_reason = fmt::format("reached the time limit of {} minutes",
                                       *r.training.exit_duration_minutes);
      break;
    }
  }
  spdlog::info("done: {} iterations, {} samples, {} ({:.1f} s); metrics in {}", result.iterations,
               result.consumed_samples, result.stop_reason, seconds_since(started),
               (result.run_dir / "metrics.jsonl").string());
  return result;
}

}  // namespace megatron::train
