// One rank's training run, opened once: the Plan it executes, then MPI, the backend, the process
// groups, its stage's model chunks, optimizer, loss scaler, checkpointer and data, each built from the last.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include "dist/mpi_communicator.hpp"
#include "model/language_model.hpp"
#include "optim/loss_scaler.hpp"
#include "optim/lr_schedule.hpp"
#include "parallel/process_groups.hpp"
#include "plan/hardware.hpp"
#include "plan/plan.hpp"
#include "plan/program.hpp"
#include "plan/stage_programs.hpp"
#include "recipe/compile.hpp"
#include "tensor/backend.hpp"
#include "train/batch_prefetch.hpp"
#include "train/batch_size.hpp"
#include "train/checkpointer.hpp"
#include "train/model_context.hpp"
#include "train/parallel_optimizer.hpp"
#include "train/pipeline_step.hpp"
#include "train/train_data.hpp"
#include "train/trainer.hpp"

namespace megatron::train {

// What turns tokens per second into model FLOP/s and MFU: the plan's model FLOPs (Megatron's
// convention, without recompute) per token, and the peak of cluster.hardware per rank.
struct ModelSpeed {
  double flops_per_token = 0.0;
  double peak = 1.0;
};

// The model's context (ModelContext: the Plan, MPI, backend, groups, this stage's model), then
// what training adds. Members are built in declaration order, each from those before it (the
// optimizer from the model), and torn down in reverse (MPI last). Neither copied nor moved: the
// optimizer refers to the backend and the groups.
struct RunContext : ModelContext {
  RunContext(const recipe::CompiledRecipe& compiled, const TrainOptions& options);
  // The loss of a micro-batch is summed on last stages only: the sum over every rank of
  // `value` held there, known to every rank.
  StepLosses sum_of_losses(const StepLosses& value) const;

  std::filesystem::path run_dir;  // rank 0's; empty on the other ranks
  std::unique_ptr<Checkpointer> checkpointer;
  std::unique_ptr<ParallelOptimizer> optimizer;
  optim::LossScalerConfig scaling;
  optim::LossScaler scaler;
  std::optional<ckpt::CheckpointMeta> resumed;  // what the run continues from
  optim::LrSchedule lr;
  BatchSchedule batches;
  plan::StagePrograms programs;  // this stage's, from the Plan's schedule
  ModelSpeed speed;
  TrainData data;
  BatchSpec batch_spec;  // how samples become micro-batches
  // Training micro-batches assembled ahead on data.num_workers threads; null with 0 workers
  // (assembled when needed, on the training thread). Declared after `data`, which it reads.
  std::unique_ptr<BatchPrefetcher> train_batches;

 private:
  // The checkpoint, optimizer and data, after the run directory is made (and before its recipe
  // files are written).
  void set_up(const recipe::CompiledRecipe& compiled, const TrainOptions& options);
  // finetune.pretrained: the model's weights from that checkpoint (any layout), but for what
  // fine-tuning adds (the classifier), which keeps its drawn values.
  void load_pretrained(const std::string& path);
};

}  // namespace megatron::train
