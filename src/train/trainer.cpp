#include "train/trainer.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <limits>

#include <fmt/format.h>

#include "core/error.hpp"
#include "dist/broadcast_text.hpp"
#include "dist/fault_injection.hpp"
#include "dist/launcher.hpp"
#include "dist/watchdog.hpp"
#include "parallel/scalar_reduce.hpp"
#include "plan/engine_support.hpp"
#include "plan/placement.hpp"
#include "recipe/enum_names.hpp"
#include "recipe/render.hpp"
#include "tensor/host_io.hpp"
#include "train/device_setup.hpp"
#include "train/iteration.hpp"
#include "train/log_interval.hpp"
#include "train/metrics_log.hpp"
#include "train/op_profile.hpp"
#include "train/run_context.hpp"

namespace megatron::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Parameters of the whole model: this rank's, summed over the tensor and pipeline ranks of its
// data-parallel replica, each counted once.
int64_t whole_model_parameters(const RunContext& run) {
  int64_t mine = 0;
  for (const auto& p : run.model->parameters().all()) {
    if (model::counts_once(*p, run.groups.coord.tp)) mine += p->value.numel();
  }
  return int64_t(parallel::sum_across(*run.backend, *run.groups.model_parallel, double(mine)));
}

void log_start(const RunContext& run) {
  const auto& c = run.compiled;
  const auto& r = c.recipe;
  const auto& g = run.groups;
  const model::ModelConfig& config = run.config;
  spdlog::info("megatron run {}: {}, {} layers, hidden {}, {} heads, seq {}, {:.2f}M parameters ({})",
               c.file, recipe::name_of(r.model.arch),
               config.encoder_decoder
                   ? fmt::format("{} encoder + {} decoder", config.num_layers, config.decoder_layers)
                   : std::to_string(config.num_layers),
               config.hidden, config.heads,
               config.encoder_decoder
                   ? fmt::format("{} + {}", config.seq_length, config.decoder_seq_length)
                   : std::to_string(config.seq_length),
               double(whole_model_parameters(run)) / 1e6, tensor::name(config.dtype));
  spdlog::info("{} rank{} on {}: layout tensor {} x pipeline {}{} x data {}{}{}; global batch {} = "
               "{} micro-batches x {}; {} iterations",
               run.plan.layout.world, run.plan.layout.world > 1 ? "s" : "",
               run.backend->description(), g.tp_size, g.pp_size,
               r.parallel.virtual_pipeline > 1
                   ? fmt::format(" (x{} virtual)", r.parallel.virtual_pipeline) : "",
               g.dp_size, run.plan.sequence_parallel ? ", sequence parallel" : "",
               r.parallel.distributed_optimizer && g.dp_size > 1 ? ", distributed optimizer" : "",
               r.training.global_batch_size, run.batches.microbatches_at(0),
               r.training.micro_batch_size, c.derived.train_iters);
  if (dist::launch_info().launcher == "srun") {
    // Which allocation and attempt these lines belong to: a requeued job keeps its id.
    const auto env = [](const char* name) {
      const char* value = std::getenv(name);
      return std::string(value && *value ? value : "?");
    };
    spdlog::info("slurm: job {} (restart {}), step {}, {} node(s): {}", env("SLURM_JOB_ID"),
                 std::getenv("SLURM_RESTART_COUNT") ? env("SLURM_RESTART_COUNT") : "0",
                 env("SLURM_STEP_ID"), env("SLURM_STEP_NUM_NODES"), env("SLURM_STEP_NODELIST"));
  }
  if (g.dp_size > 1) {
    const ParallelOptimizer& o = *run.optimizer;
    spdlog::info("data parallel: gradients in {} bucket{}, each {} while backward runs{}",
                 o.buckets(), o.buckets() == 1 ? "" : "s",
                 r.parallel.distributed_optimizer ? "reduce-scattered" : "all-reduced",
                 r.parallel.distributed_optimizer
                     ? fmt::format("; optimizer state {:.1f} MiB per rank (1/{})",
                                   double(o.state_bytes()) / 1048576.0, g.dp_size)
                     : "");
  }
  spdlog::info("data: {}; run directory {}", run.data.description, run.run_dir.string());
}

// Each rank's peak memory (tensors and process) and the share of its training time it spent
// blocked in communication, gathered to rank 0 and logged: what the plan predicts, measured.
void report_ranks(const RunContext& run, double train_seconds) {
  constexpr int kFields = 4;
  tensor::Backend& backend = *run.backend;
  const parallel::ProcessGroups& groups = run.groups;
  const int n = groups.world->size();
  const float mine[kFields] = {float(backend.memory().peak_bytes), float(peak_rss_bytes()),
                               float(run.optimizer->state_bytes()),
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

// Whether to stop after this iteration, agreed by every rank: rank 0's clock decides the time
// limit; a stop signal that reached any rank stops them all.
struct StopVote {
  bool out_of_time = false;
  int signal = 0;
};

StopVote agree_to_stop(const RunContext& run, bool out_of_time) {
  StopVote vote{.out_of_time = run.rank0() && out_of_time, .signal = dist::stop_signal()};
  if (run.groups.world->size() == 1) return vote;
  tensor::Tensor flags = tensor::from_floats(
      *run.backend, std::vector<float>{vote.out_of_time ? 1.0f : 0.0f, float(vote.signal)}, {2});
  run.groups.world->all_reduce(flags, dist::ReduceOp::Max);
  const std::vector<float> agreed = tensor::to_floats(*run.backend, flags);
  return {.out_of_time = agreed[0] != 0.0f, .signal = int(agreed[1])};
}

const char* signal_name(int signal) {
  return signal == SIGUSR1 ? "SIGUSR1" : signal == SIGINT ? "SIGINT" : "SIGTERM";
}

// The sentence-order term for the log, when the model has a binary head.
std::optional<double> sop_of(const RunContext& run, const StepLosses& losses) {
  if (!run.config.binary_head && run.config.classes == 0) return std::nullopt;
  return losses.sop;
}

// A classifier's validation: its loss and accuracy (it has no language-model loss).
std::optional<double> accuracy_of(const RunContext& run, const StepLosses& losses) {
  if (run.config.classes == 0) return std::nullopt;
  return losses.accuracy;
}

// Rank 0's run directory on every rank: profiled ranks other than 0 write there too. Every rank
// calls it (a broadcast).
std::filesystem::path shared_run_dir(const RunContext& run) {
  if (run.groups.world->size() == 1) return run.run_dir;
  return dist::broadcast_text(*run.groups.world, *run.backend, run.run_dir.string(), 0);
}

// The profiled iterations' per-op table on the log, and as JSON and a Chrome trace in the run
// directory's profile/.
void report_profile(const RunContext& run, tensor::ProfilingBackend& profiler,
                    const std::filesystem::path& run_dir) {
  const tensor::ProfileRecord record = profiler.finish();
  const OpProfile profile = summarize(record, peaks_of(run.hardware), run.groups.world_rank);
  for (const std::string& line : profile_table(profile, 15)) spdlog::info("{}", line);
  const std::filesystem::path table = write_profile(run_dir, profile, record);
  spdlog::info("profile: the whole table in {}, the trace (chrome://tracing, Perfetto) in {}",
               table.string(), (table.parent_path() / fmt::format("rank-{}.trace.json", profile.rank)).string());
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
  const int64_t n = wanted.world_size;
  return UserError(fmt::format(
      "{}: this recipe's layout needs {} ranks (tensor {} x pipeline {} x data {}) but {}: run "
      "megatron run --nproc {} {}, or start it with mpirun -np {} / srun -n {}",
      wanted.file, n, p.tensor, p.pipeline, plan::place(wanted).data_parallel,
      ranks == 1 ? std::string("this is one process") : fmt::format("the job has {}", ranks), n,
      wanted.file, n, n));
}

TrainResult train(const recipe::CompiledRecipe& c, const TrainOptions& options) {
  const recipe::Recipe& r = c.recipe;
  const recipe::Derived& d = c.derived;
  plan::check_engine_support(c);
  if (d.train_iters <= 0) {
    throw UserError(c.file + ": the recipe sets no training length: set training.train_iters, "
                             "train_samples or train_tokens");
  }
  const auto started = Clock::now();
  RunContext run(c, options);
  log_start(run);

  TrainResult result;
  result.run_dir = run.run_dir;
  const auto& resumed = run.resumed;
  std::optional<MetricsLog> log;
  if (run.rank0()) {
    log.emplace(run.run_dir, r.logging.tensorboard_dir ? std::optional<std::filesystem::path>(*r.logging.tensorboard_dir)
                                                       : std::nullopt,
                recipe::render_yaml(c, run.plan.derivations));
  }
  const double time_limit_s = r.training.exit_duration_minutes
                                  ? *r.training.exit_duration_minutes * 60.0
                                  : std::numeric_limits<double>::infinity();
  const bool evaluating = r.eval.interval && *r.eval.interval > 0 && r.eval.iters > 0 &&
                          run.data.valid;
  int64_t consumed = resumed ? resumed->state.consumed_samples : 0;
  int64_t skipped = resumed ? resumed->state.skipped_iterations : 0;
  result.first_iteration = resumed ? resumed->state.iteration + 1 : 1;
  result.iterations = result.first_iteration - 1;
  result.consumed_samples = consumed;
  result.stop_reason = "reached train iterations";
  if (resumed && result.first_iteration > d.train_iters) {
    result.stop_reason = fmt::format("the checkpoint is at iteration {}, which reaches train "
                                     "iterations ({}) already", resumed->state.iteration, d.train_iters);
  }
  if (evaluating && !resumed) {
    // Where training starts from: an untrained model scores about log(vocabulary).
    const StepLosses val = evaluate(run);
    if (log) log->validation(0, consumed, val.lm, sop_of(run, val), accuracy_of(run, val));
  }
  const auto training_state = [&](int64_t iteration) {
    return ckpt::TrainingState{.iteration = iteration,
                               .consumed_samples = consumed,
                               .skipped_iterations = skipped,
                               .optimizer_steps = run.optimizer->steps(),
                               .loss_scale = run.scaler.scale(),
                               .growth_tracker = run.scaler.growth_tracker(),
                               .hysteresis_tracker = run.scaler.hysteresis_tracker()};
  };

  const recipe::LoggingSection& lg = r.logging;
  const std::filesystem::path profile_dir = lg.profile ? shared_run_dir(run) : run.run_dir;
  if (lg.profile && run.rank0()) {
    std::string ranks;
    for (int64_t rank : lg.profile_ranks) ranks += (ranks.empty() ? "" : ", ") + std::to_string(rank);
    spdlog::info("profiling iterations {} to {} on rank{} {} into {}", lg.profile_step_start,
                 lg.profile_step_end - 1, lg.profile_ranks.size() == 1 ? "" : "s", ranks,
                 (profile_dir / "profile").string());
  }
  tensor::ProfilingBackend* profiler = run.profiler;
  LogInterval interval;
  for (int64_t iteration = result.first_iteration; iteration <= d.train_iters; ++iteration) {
    dist::set_current_iteration(iteration);
    dist::inject_fault(run.groups.world_rank, iteration);
    const bool profiled = profiler && iteration >= lg.profile_step_start &&
                          iteration < lg.profile_step_end;
    if (profiled) {
      if (!profiler->started()) profiler->start();
      profiler->begin_step(iteration);
    }
    const auto step_start = Clock::now();
    const IterationOutcome outcome = train_iteration(run, iteration, consumed);
    if (profiled) {
      profiler->end_step();
      if (iteration + 1 == lg.profile_step_end) report_profile(run, *profiler, profile_dir);
    }
    if (outcome.skipped) ++skipped;
    consumed += outcome.global_batch;
    result.losses.push_back(outcome.loss);
    result.grad_norms.push_back(outcome.grad_norm);
    run.backend->synchronize();
    interval.add(outcome, seconds_since(step_start), outcome.global_batch * r.data.seq_length);

    const StopVote stop = agree_to_stop(run, seconds_since(started) >= time_limit_s);
    const bool last = iteration == d.train_iters || stop.out_of_time || stop.signal != 0;
    std::optional<StepLosses> val;
    if (evaluating && (iteration % *r.eval.interval == 0 || last)) {
      val = evaluate(run);
      if (log) log->validation(iteration, consumed, val->lm, sop_of(run, *val), accuracy_of(run, *val));
      result.final_val_loss = val->lm + val->sop;
    }
    if (iteration % r.logging.interval == 0 || last || val) {
      IterationMetrics m = interval.take(run, iteration, consumed, skipped);
      if (val) {
        m.val_loss = val->lm;
        m.val_ppl = perplexity(val->lm);
        m.val_sop_loss = sop_of(run, *val);
        m.val_accuracy = accuracy_of(run, *val);
      }
      if (log) log->log(m);
    }
    result.iterations = iteration;
    result.consumed_samples = consumed;
    const int64_t every = r.checkpoint.interval.value_or(0);
    if (run.checkpointer->saving() && (last || (every > 0 && iteration % every == 0))) {
      run.checkpointer->save(*run.model, *run.optimizer, training_state(iteration));
    } else {
      run.checkpointer->poll();
    }
    const bool early = (stop.signal != 0 || stop.out_of_time) && iteration < d.train_iters;
    result.stopped_with_checkpoint = early && run.checkpointer->saving();
    if (stop.signal != 0) {
      result.stop_reason = fmt::format("stopped by {}{}", signal_name(stop.signal),
                                       run.checkpointer->saving() ? " after saving a checkpoint" : "");
      break;
    }
    if (stop.out_of_time) {
      result.stop_reason = fmt::format("reached the time limit of {} minutes",
                                       *r.training.exit_duration_minutes);
      break;
    }
  }
  run.checkpointer->finish();
  // Training stopped inside the profiled iterations: what was recorded still gets reported.
  if (profiler && profiler->started()) report_profile(run, *profiler, profile_dir);

  report_ranks(run, seconds_since(started));
  spdlog::info("done: {} iterations, {} samples, {} ({:.1f} s); metrics in {}", result.iterations,
               result.consumed_samples, result.stop_reason, seconds_since(started),
               (result.run_dir / "metrics.jsonl").string());
  return result;
}

}  // namespace megatron::train
