// One iteration's forward and backward passes on this rank: its micro-batches through its model
// chunks in the pipeline schedule's order, activations and their gradients sent between stages.
#pragma once

#include <functional>
#include <span>

#include "model/language_model.hpp"
#include "parallel/process_groups.hpp"
#include "plan/program.hpp"

namespace megatron::train {

struct StepShape {
  // This stage's pipeline program for the iteration's micro-batches (plan::stage_program with
  // the Plan's schedule): the ops run in this order.
  std::span<const plan::PipelineOp> program;
  int64_t microbatches = 1;         // this data-parallel rank's, per iteration
  int64_t global_microbatches = 1;  // over every data-parallel rank (the loss averages over them)
  double loss_scale = 1.0;
  uint64_t seed = 0;
  int64_t iteration = 0;
};

// Micro-batch j of this data-parallel rank (its global index is j * dp + dp rank).
using BatchSource = std::function<model::Batch(int64_t j)>;

// The objective's terms summed over this rank's micro-batches, each micro-batch's mean divided by
// the global micro-batch count; zero except on last stages. The objective is lm + sop.
struct StepLosses {
  double lm = 0.0;
  double sop = 0.0;       // models with a binary head or a classifier: its cross-entropy
  double accuracy = 0.0;  // that head's share of right answers (reported, not optimised)
  StepLosses& operator+=(const StepLosses& o) {
    lm += o.lm;
    sop += o.sop;
    accuracy += o.accuracy;
    return *this;
  }
};

// Runs forwards and backwards (gradients accumulate into the parameters); the last backward
// through each chunk reports completed gradients to `grads_ready` (model::Pass).
StepLosses forward_backward(tensor::Backend& backend, const model::LanguageModel& model,
                            const parallel::ProcessGroups& groups, const StepShape& shape,
                            const BatchSource& batches,
                            const std::function<void(size_t first_param)>& grads_ready);

// Micro-batch j's asked-for outputs of the model's last chunk (null: none).
using OutputsFor = std::function<model::HeadOutputs*(int64_t j)>;

// Forward only (evaluation): the sums of the micro-batches' mean losses on the last stage, 0
// elsewhere; `outputs` are filled on the last stage.
StepLosses forward_only(tensor::Backend& backend, const model::LanguageModel& model,
                        const parallel::ProcessGroups& groups, int64_t microbatches, uint64_t seed,
                        const BatchSource& batches, const OutputsFor& outputs = {});

}  // namespace megatron::train
