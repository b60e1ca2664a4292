#include "train/model_context.hpp"

#include <algorithm>

#include "dist/launcher.hpp"
#include "dist/watchdog.hpp"
#include "plan/engine_support.hpp"
#include "tensor/make_backend.hpp"
#include "train/device_setup.hpp"
#include "train/trainer.hpp"

namespace megatron::train {
namespace {

// The rank's GPU is made current before MPI starts, since a CUDA-aware MPI opens its context
// there; SIGTERM, SIGUSR1 and SIGINT (Slurm's time limit, preemption, Ctrl-C) then stop the
// run at an iteration boundary.
std::unique_ptr<dist::MpiRuntime> start_job(const recipe::CompiledRecipe& c,
                                            const plan::Plan& plan) {
  const auto& r = c.recipe;
  dist::Watchdog::set_timeout(
      std::chrono::milliseconds(int64_t(r.parallel.timeout_minutes * 60000.0)));
  if (plan::run_device(r) == tensor::Device::Cuda)
    tensor::select_cuda_device(run_cuda_device(r, dist::launch_info().local_rank));
  std::unique_ptr<dist::MpiRuntime> mpi;
  if (plan.layout.world > 1) mpi = std::make_unique<dist::MpiRuntime>();
  dist::enable_graceful_stop();
  return mpi;
}

// The Plan's rank grid over the job's world, refusing a job of another size.
parallel::ProcessGroups make_groups(const recipe::CompiledRecipe& c, const plan::Plan& plan,
                                    dist::MpiRuntime* mpi, tensor::Backend& backend) {
  std::unique_ptr<dist::Communicator> world = make_world(mpi, backend);
  if (world->size() != plan.layout.world) throw wrong_rank_count(c, world->size());
  return parallel::make_process_groups(std::move(world), plan.layout);
}

std::unique_ptr<model::LanguageModel> make_model(const ModelContext& run) {
  const parallel::ProcessGroups& g = run.groups;
  model::ModelPlacement placement{
      .tp = {.group = g.tp.get(), .rank = g.coord.tp, .size = g.tp_size,
             .sequence_parallel = run.plan.sequence_parallel},
      .chunks = run.plan.stages[size_t(g.coord.pp)].chunks,
      .first_stage = g.first_stage(),
      .last_stage = g.last_stage()};
  return std::make_unique<model::LanguageModel>(*run.backend, run.config, std::move(placement));
}

// Wrapped in a ProfilingBackend when this rank profiles: ops forward through it at the cost of a
// virtual call, and are timed only inside the profiled iterations.
std::unique_ptr<tensor::Backend> make_backend_for_rank(const recipe::Recipe& r, int threads) {
  const dist::LaunchInfo& launch = dist::launch_info();
  std::unique_ptr<tensor::Backend> backend = make_run_backend(r, threads, launch.local_rank);
  const auto& ranks = r.logging.profile_ranks;
  if (r.logging.profile && std::find(ranks.begin(), ranks.end(), int64_t(launch.rank)) != ranks.end())
    return std::make_unique<tensor::ProfilingBackend>(std::move(backend));
  return backend;
}

}  // namespace

ModelContext::ModelContext(const recipe::CompiledRecipe& c, int threads)
    : compiled(c),
      hardware(plan::find_hardware(c.recipe.cluster.hardware)),
      plan(plan::make_plan(c, hardware)),
      mpi(start_job(c, plan)),
      backend(make_backend_for_rank(c.recipe, threads)),
      profiler(dynamic_cast<tensor::ProfilingBackend*>(backend.get())),
      groups(make_groups(c, plan, mpi.get(), *backend)),
      config(plan.model),
      model(make_model(*this)) {}

}  // namespace megatron::train
