#include "train/trainer.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <csignal>
#include <cmath>
#include <ctime>
#include <fstream>
#include <limits>
#include <map>

#include <fmt/format.h>

#include "core/error.hpp"
#include "dist/fault_injection.hpp"
#include "dist/mpi_communicator.hpp"
#include "dist/launcher.hpp"
#include "dist/watchdog.hpp"
#include "model/gpt_model.hpp"
#include "optim/loss_scaler.hpp"
#include "optim/lr_schedule.hpp"
#include "optim/optimizer.hpp"
#include "parallel/scalar_reduce.hpp"
#include "plan/build.hpp"
#include "plan/hardware.hpp"
#include "plan/program.hpp"
#include "recipe/render.hpp"
#include "tensor/host_io.hpp"
#include "tensor/make_backend.hpp"
#include "train/batch_size.hpp"
#include "train/checkpointer.hpp"
#include "train/device_setup.hpp"
#include "train/metrics_log.hpp"
#include "train/parallel_optimizer.hpp"
#include "train/pipeline_step.hpp"
#include "train/train_data.hpp"

namespace megatron::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The sum of one value per rank that only last pipeline stages hold (the loss), summed over
// data-parallel ranks and made known to every rank.
double sum_over_ranks(tensor::Backend& backend, const parallel::ProcessGroups& groups,
                      double value) {
  const bool holder = groups.last_stage() && groups.coord.tp == 0;
  return parallel::sum_across(backend, *groups.world, holder ? value : 0.0);
}

// Parameters of the whole model: this rank's, summed over the tensor and pipeline ranks of its
// data-parallel replica, each counted once.
int64_t whole_model_parameters(tensor::Backend& backend, const parallel::ProcessGroups& groups,
                               const model::GptModel& model) {
  int64_t mine = 0;
  for (const auto& p : model.parameters().all()) {
    if (model::counts_once(*p, groups.coord.tp)) mine += p->value.numel();
  }
  return int64_t(parallel::sum_across(backend, *groups.model_parallel, double(mine)));
}

// Each rank's peak memory (tensors and process) and the share of its training time it spent
// blocked in communication, gathered to rank 0 and logged: what the plan predicts, measured.
void report_ranks(tensor::Backend& backend, const parallel::ProcessGroups& groups,
                  int64_t optimizer_bytes, double train_seconds) {
  constexpr int kFields = 4;
  const int n = groups.world->size();
  const float mine[kFields] = {float(backend.memory().peak_bytes), float(peak_rss_bytes()),
                               float(optimizer_bytes),
                               float(dist::seconds_blocked_in_communication() / train_seconds)};
  tensor::Tensor in = tensor::from_floats(backend, mine, {kFields});
  tensor::Tensor all = backend.empty({kFields * n}, tensor::DType::F32);
  groups.world->all_gather(in, all);
  const std::vector<float> v = tensor::to_floats(backend, all);
  for (int rank = 0; rank < n; ++rank) {
    const parallel::Coord at = groups.coord_of(rank);
    const float* f = v.data() + kFields * rank;
    spdlog::info("rank {} (tp {}, dp {}, pp {}): peak tensors {:.1f} MiB (optimizer state {:.1f} "
                 "MiB), peak RSS {:.1f} MiB{}",
                 rank, at.tp, at.dp, at.pp, f[0] / 1048576.0, f[2] / 1048576.0, f[1] / 1048576.0,
                 n > 1 ? fmt::format(", {:.1f}% of the time blocked in communication", 100.0 * f[3])
                       : "");
  }
}

optim::LrSchedule lr_schedule(const recipe::CompiledRecipe& c) {
  const auto& t = c.recipe.training;
  const int64_t decay = c.derived.lr_decay_iters;
  return {.max_lr = t.lr,
          .min_lr = t.min_lr,
          .warmup_iters = c.derived.lr_warmup_iters,
          .decay_iters = decay,
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

std::filesystem::path prepare_run_dir(const recipe::CompiledRecipe& c, const TrainOptions& o) {
  const std::filesystem::path dir = run_dir_for(c, o.run_dir);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw UserError("cannot create run directory " + dir.string() + ": " + ec.message());
  std::ofstream(dir / "recipe.yaml") << recipe::render_yaml(c);
  if (!o.recipe_text.empty()) std::ofstream(dir / "recipe.original.yaml") << o.recipe_text;
  return dir;
}

// Mean loss over `iters` global batches of the validation split (the same batches every time,
// so successive evaluations compare like with like). Micro-batch m of the validation set runs
// on data-parallel rank m % dp; every rank returns the mean.
double evaluate(tensor::Backend& backend, const model::GptModel& model,
                const parallel::ProcessGroups& groups, const data::GptSampleSource& valid,
                const recipe::CompiledRecipe& c) {
  const auto& r = c.recipe;
  const int64_t mbs = r.training.micro_batch_size;
  const int64_t total = r.eval.iters * r.training.global_batch_size / mbs;
  const int64_t mine = (total - groups.coord.dp + groups.dp_size - 1) / groups.dp_size;
  const double sum = forward_only(backend, model, groups, mine, uint64_t(r.training.seed),
                                  [&](int64_t j) {
                                    const int64_t m = j * groups.dp_size + groups.coord.dp;
                                    return make_batch(backend, valid, m * mbs, mbs,
                                                      r.model.vocab_size);
                                  });
  return sum_over_ranks(backend, groups, sum) / double(std::max<int64_t>(total, 1));
}

}  // namespace

std::filesystem::path run_dir_for(const recipe::CompiledRecipe& c,
                                  const std::optional<std::filesystem::path>& command_line) {
  if (command_line) return *command_line;
  if (c.recipe.logging.run_dir) return *c.recipe.logging.run_dir;
  const std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
  return std::filesystem::path("runs") / std::filesystem::path(c.file).stem() / stamp;
}

UserError wrong_rank_count(const recipe::CompiledRecipe& wanted, int64_t ranks) {
  const auto& p = wanted.recipe.parallel;
  const int64_t n = wanted.derived.world_size;
  return UserError(fmt::format(
      "{}: this recipe's layout needs {} ranks (tensor {} x pipeline {} x data {}) but {}: run "
      "megatron run --nproc {} {}, or start it with mpirun -np {} / srun -n {}",
      wanted.file, n, p.tensor, p.pipeline, wanted.derived.data_parallel,
      ranks == 1 ? std::string("this is one process") : fmt::format("the job has {}", ranks), n,
      wanted.file, n, n));
}

namespace {

// What turns tokens per second into model FLOP/s and MFU: the plan's model FLOPs (Megatron's
// convention, without recompute) per token, and the peak of cluster.hardware per rank.
struct ModelSpeed {
  double flops_per_token = 0.0;
  double peak = 1.0;
};

ModelSpeed model_speed(const recipe::CompiledRecipe& c, const plan::Plan& p,
                       const plan::HardwareProfile& hardware) {
  const bool wide = c.recipe.precision.dtype == recipe::DType::F32;
  return {.flops_per_token = p.flops.model_per_iteration / double(std::max<int64_t>(p.tokens_per_iteration, 1)),
          .peak = wide ? hardware.peak_flops_32bit : hardware.peak_flops_16bit};
}

// This stage's program for `microbatches` micro-batches (fewer while the batch ramps up), made
// once per size: the Plan's schedule at this iteration's size.
class StagePrograms {
 public:
  StagePrograms(const plan::Plan& plan, int64_t stage) : plan_(plan), stage_(stage) {}
  const std::vector<plan::PipelineOp>& at(int64_t microbatches) {
    auto it = made_.find(microbatches);
    if (it == made_.end()) {
      it = made_.emplace(microbatches,
                         plan::stage_program(plan_.schedule.kind, plan_.layout.pp, stage_,
                                             plan_.schedule.chunks, microbatches))
               .first;
    }
    return it->second;
  }

 private:
  const plan::Plan& plan_;
  int64_t stage_;
  std::map<int64_t, std::vector<plan::PipelineOp>> made_;
};

}  // namespace

TrainResult train(const recipe::CompiledRecipe& c, const TrainOptions& options) {
  const recipe::Recipe& r = c.recipe;
  const recipe::Derived& d = c.derived;
  if (r.model.arch != recipe::Arch::Gpt) {
    throw UserError(c.file + ": model.arch: only gpt trains so far (bert and t5 are planned)");
  }
  if (r.parallel.context != 1) {
    throw UserError(c.file + ": parallel.context: context parallelism does not train yet; set "
                             "parallel.context=1");
  }
  if (d.train_iters <= 0) {
    throw UserError(c.file + ": the recipe sets no training length: set training.train_iters, "
                             "train_samples or train_tokens");
  }
  const auto started = Clock::now();
  TrainResult result;
  // The engine executes the Plan: its rank grid, each stage's chunks and program, its FLOPs.
  const plan::HardwareProfile& hardware = plan::find_hardware(r.cluster.hardware);
  const plan::Plan plan = plan::build_plan(c, hardware);

  // MPI first (it outlives every communicator), then the backend, then the groups.
  dist::Watchdog::set_timeout(std::chrono::milliseconds(int64_t(r.parallel.timeout_minutes * 60000.0)));
  const int local_rank = dist::launch_info().local_rank;
  // The rank's GPU is current before MPI starts: a CUDA-aware MPI opens its context there.
  if (run_device(r) == tensor::Device::Cuda) {
    tensor::select_cuda_device(run_cuda_device(r, local_rank));
  }
  std::unique_ptr<dist::MpiRuntime> mpi;
  if (d.world_size > 1) mpi = std::make_unique<dist::MpiRuntime>();
  // SIGTERM and SIGUSR1 (Slurm's time limit and preemption) stop at an iteration boundary,
  // after saving a checkpoint when checkpoint.save is set.
  dist::enable_graceful_stop();
  const std::unique_ptr<tensor::Backend> backend_owner =
      make_run_backend(r, options.threads, local_rank);
  tensor::Backend& backend = *backend_owner;
  std::unique_ptr<dist::Communicator> world = make_world(mpi.get(), backend);
  if (world->size() != plan.layout.world) throw wrong_rank_count(c, world->size());
  const parallel::ProcessGroups groups = parallel::make_process_groups(std::move(world), plan.layout);
  const bool rank0 = groups.world_rank == 0;
  if (!rank0) spdlog::set_level(spdlog::level::warn);
  if (rank0) result.run_dir = prepare_run_dir(c, options);

  const model::GptConfig config = model::gpt_config(r, d);
  model::ModelPlacement placement{
      .tp = {.group = groups.tp.get(), .rank = groups.coord.tp, .size = groups.tp_size,
             .sequence_parallel = r.parallel.sequence_parallel && groups.tp_size > 1},
      .first_stage = groups.first_stage(),
      .last_stage = groups.last_stage()};
  placement.chunks = plan.stages[size_t(groups.coord.pp)].chunks;
  model::GptModel model(backend, config, placement);
  Checkpointer checkpointer(c, groups, backend, options.recipe_text, options.overrides);
  // A run that loads a checkpoint overwrites every weight: drawing them first is wasted time.
  if (!checkpointer.source()) model.initialise(uint64_t(r.training.seed));

  ParallelOptimizer optimizer(backend, model.parameters(), groups,
                              {.kind = r.training.optimizer,
                               .beta1 = r.training.adam_beta1,
                               .beta2 = r.training.adam_beta2,
                               .eps = r.training.adam_eps,
                               .weight_decay = r.training.weight_decay,
                               .momentum = r.training.sgd_momentum},
                              r.parallel.distributed_optimizer, d.ddp_bucket_size,
                              config.tie_embeddings);
  const optim::LossScalerConfig scaling = scaler_config(r.precision);
  optim::LossScaler scaler(scaling);
  const std::optional<ckpt::CheckpointMeta> resumed = checkpointer.load(model, optimizer);
  if (resumed && scaling.dynamic && resumed->dtype == "f16") {
    scaler.restore(resumed->state.loss_scale, resumed->state.growth_tracker,
                   resumed->state.hysteresis_tracker);
  }
  const optim::LrSchedule schedule = lr_schedule(c);
  const BatchSchedule batches{.global_batch = r.training.global_batch_size,
                              .micro_batch = r.training.micro_batch_size,
                              .data_parallel = d.data_parallel,
                              .rampup = r.training.rampup_batch_size};
  StagePrograms programs(plan, groups.coord.pp);

  const ModelSpeed speed = model_speed(c, plan, hardware);
  const int64_t train_samples = batches.samples_after(d.train_iters);
  const bool evaluating = r.eval.interval && *r.eval.interval > 0 && r.eval.iters > 0;
  const int64_t valid_samples = evaluating ? r.eval.iters * r.training.global_batch_size : 0;
  const TrainData data = load_train_data(c, train_samples, std::max<int64_t>(valid_samples, 1));

  spdlog::info("megatron run {}: gpt, {} layers, hidden {}, {} heads, seq {}, {:.2f}M parameters ({})",
               c.file, config.num_layers, config.hidden, config.heads, config.seq_length,
               double(whole_model_parameters(backend, groups, model)) / 1e6,
               tensor::name(config.dtype));
  spdlog::info("{} rank{} on {}: layout tensor {} x pipeline {}{} x data {}{}{}; global batch {} = "
               "{} micro-batches x {}; {} iterations",
               d.world_size, d.world_size > 1 ? "s" : "", backend.description(), groups.tp_size,
               groups.pp_size,
               r.parallel.virtual_pipeline > 1
                   ? fmt::format(" (x{} virtual)", r.parallel.virtual_pipeline) : "",
               groups.dp_size, placement.tp.sequence_parallel ? ", sequence parallel" : "",
               r.parallel.distributed_optimizer && groups.dp_size > 1 ? ", distributed optimizer" : "",
               r.training.global_batch_size, batches.microbatches_at(0), r.training.micro_batch_size,
               d.train_iters);
  if (groups.dp_size > 1) {
    spdlog::info("data parallel: gradients in {} bucket{}, each {} while backward runs{}",
                 optimizer.buckets(), optimizer.buckets() == 1 ? "" : "s",
                 r.parallel.distributed_optimizer ? "reduce-scattered" : "all-reduced",
                 r.parallel.distributed_optimizer
                     ? fmt::format("; optimizer state {:.1f} MiB per rank (1/{})",
                                   double(optimizer.state_bytes()) / 1048576.0, groups.dp_size)
                     : "");
  }
  spdlog::info("data: {}; run directory {}", data.description, result.run_dir.string());

  std::optional<MetricsLog> log;
  if (rank0) log.emplace(result.run_dir);
  const double time_limit_s = r.training.exit_duration_minutes
                                  ? *r.training.exit_duration_minutes * 60.0
                                  : std::numeric_limits<double>::infinity();
  int64_t consumed = resumed ? resumed->state.consumed_samples : 0;
  int64_t skipped = resumed ? resumed->state.skipped_iterations : 0;
  result.first_iteration = resumed ? resumed->state.iteration + 1 : 1;
  result.iterations = result.first_iteration - 1;
  result.consumed_samples = consumed;
  double interval_loss = 0.0, interval_seconds = 0.0;
  int64_t interval_iters = 0, interval_tokens = 0;
  result.stop_reason = "reached train iterations";

  if (evaluating && data.valid && !resumed) {
    // Where training starts from: an untrained model scores about log(vocabulary).
    const double val = evaluate(backend, model, groups, *data.valid, c);
    if (log) log->validation(0, val);
  }
  const int64_t mbs = r.training.micro_batch_size;
  const std::function<void(size_t)> grads_ready = [&](size_t first) { optimizer.grads_ready(first); };
  if (resumed && result.first_iteration > d.train_iters) {
    result.stop_reason = fmt::format("the checkpoint is at iteration {}, which reaches train "
                                     "iterations ({}) already", resumed->state.iteration, d.train_iters);
  }
  const auto training_state = [&](int64_t iteration) {
    return ckpt::TrainingState{.iteration = iteration,
                               .consumed_samples = consumed,
                               .skipped_iterations = skipped,
                               .optimizer_steps = optimizer.steps(),
                               .loss_scale = scaler.scale(),
                               .growth_tracker = scaler.growth_tracker(),
                               .hysteresis_tracker = scaler.hysteresis_tracker()};
  };
  for (int64_t iteration = result.first_iteration; iteration <= d.train_iters; ++iteration) {
    dist::set_current_iteration(iteration);
    dist::inject_fault(groups.world_rank, iteration);
    const auto step_start = Clock::now();
    const int64_t global_batch = batches.global_batch_at(consumed);
    const int64_t micro = batches.microbatches_at(consumed);  // per data-parallel rank
    const double loss_scale = scaler.scale();
    optimizer.begin_iteration();
    const StepShape shape{.program = programs.at(micro),
                          .microbatches = micro,
                          .global_microbatches = micro * groups.dp_size,
                          .loss_scale = loss_scale,
                          .seed = uint64_t(r.training.seed),
                          .iteration = iteration};
    const double local_loss = forward_backward(backend, model, groups, shape, [&](int64_t j) {
      const int64_t m = j * groups.dp_size + groups.coord.dp;  // in the global batch
      return make_batch(backend, *data.train, consumed + m * mbs, mbs, r.model.vocab_size);
    }, grads_ready);
    optimizer.finish_gradients();
    const double loss = sum_over_ranks(backend, groups, local_loss);
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
    result.grad_norms.push_back(grad_norm);
    backend.synchronize();
    const double step_seconds = seconds_since(step_start);
    interval_loss += loss;
    interval_seconds += step_seconds;
    interval_tokens += global_batch * r.data.seq_length;
    ++interval_iters;

    // Every rank must agree on stopping: rank 0's clock decides the time limit; a stop signal
    // that reached any rank stops them all.
    bool out_of_time = seconds_since(started) >= time_limit_s;
    int signal = dist::stop_signal();
    if (groups.world->size() > 1) {
      tensor::Tensor flags = tensor::from_floats(
          backend, std::vector<float>{rank0 && out_of_time ? 1.0f : 0.0f, float(signal)}, {2});
      groups.world->all_reduce(flags, dist::ReduceOp::Max);
      const std::vector<float> agreed = tensor::to_floats(backend, flags);
      out_of_time = agreed[0] != 0.0f;
      signal = int(agreed[1]);
    }
    const bool last = iteration == d.train_iters || out_of_time || signal != 0;
    std::optional<double> val;
    if (evaluating && data.valid && (iteration % *r.eval.interval == 0 || last)) {
      val = evaluate(backend, model, groups, *data.valid, c);
      if (log) log->validation(iteration, *val);
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
                         .tflops_per_rank = double(interval_tokens) / interval_seconds *
                                            speed.flops_per_token / double(d.world_size) / 1e12,
                         .mfu = double(interval_tokens) / interval_seconds *
                                speed.flops_per_token / double(d.world_size) / speed.peak,
                         .tensor_bytes_peak = backend.memory().peak_bytes,
                         .rss_peak_bytes = peak_rss_bytes()};
      if (val) {
        m.val_loss = *val;
        m.val_ppl = perplexity(*val);
      }
      if (log) log->log(m);
      interval_loss = interval_seconds = 0.0;
      interval_iters = interval_tokens = 0;
    }
    result.iterations = iteration;
    result.consumed_samples = consumed;
    const int64_t interval = r.checkpoint.interval.value_or(0);
    if (checkpointer.saving() && (last || (interval > 0 && iteration % interval == 0))) {
      checkpointer.save(model, optimizer, training_state(iteration));
    } else {
      checkpointer.poll();
    }
    if (signal != 0) {
      result.stop_reason = fmt::format("stopped by {}{}",
                                       signal == SIGUSR1 ? "SIGUSR1" : signal == SIGINT ? "SIGINT" : "SIGTERM",
                                       checkpointer.saving() ? " after saving a checkpoint" : "");
      break;
    }
    if (out_of_time) {
      result.stop_reason = fmt::format("reached the time limit of {} minutes",
                                       *r.training.exit_duration_minutes);
      break;
    }
  }
  checkpointer.finish();

  report_ranks(backend, groups, optimizer.state_bytes(), seconds_since(started));
  spdlog::info("done: {} iterations, {} samples, {} ({:.1f} s); metrics in {}", result.iterations,
               result.consumed_samples, result.stop_reason, seconds_since(started),
               (result.run_dir / "metrics.jsonl").string());
  return result;
}

}  // namespace megatron::train
