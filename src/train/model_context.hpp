// One rank's model, opened from a compiled recipe: the Plan, MPI, the backend, the process groups
// and this rank's stage of the model (weights not yet drawn or loaded). What training, evaluation
// and generation all start from.
#pragma once

#include <memory>

#include "dist/mpi_communicator.hpp"
#include "model/language_model.hpp"
#include "parallel/process_groups.hpp"
#include "plan/hardware.hpp"
#include "plan/plan.hpp"
#include "recipe/compile.hpp"
#include "tensor/backend.hpp"
#include "tensor/profiling_backend.hpp"

namespace megatron::train {

// Members are built in declaration order, each from those before it, and torn down in reverse
// (MPI last). Neither copied nor moved: the model refers to the backend and the groups.
struct ModelContext {
  // threads: CPU threads (0: the default). Throws UserError when the job's size is not the
  // layout's (wrong_rank_count).
  ModelContext(const recipe::CompiledRecipe& compiled, int threads);
  ModelContext(const ModelContext&) = delete;
  ModelContext& operator=(const ModelContext&) = delete;

  bool rank0() const { return groups.world_rank == 0; }

  const recipe::CompiledRecipe& compiled;
  const plan::HardwareProfile& hardware;
  const plan::Plan plan;
  std::unique_ptr<dist::MpiRuntime> mpi;  // null for a single process
  std::unique_ptr<tensor::Backend> backend;
  // The backend again when this rank profiles (logging.profile lists it), else null.
  tensor::ProfilingBackend* profiler = nullptr;
  parallel::ProcessGroups groups;
  model::ModelConfig config;
  std::unique_ptr<model::LanguageModel> model;
};

}  // namespace megatron::train
