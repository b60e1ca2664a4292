#include "train/pipeline_step.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <utility>
#include <vector>

namespace megatron::train {
namespace {

using plan::Phase;
using plan::PipelineOp;
using tensor::Tensor;

// Where chunk c of stage s sits in the model, and its neighbours: the model is chunk 0 of
// stages 0..p-1, then chunk 1 of stages 0..p-1, ...
struct Neighbour {
  int stage;
  int chunk;
};

Neighbour previous(int stage, int chunk, int stages) {
  return stage > 0 ? Neighbour{stage - 1, chunk} : Neighbour{stages - 1, chunk - 1};
}
Neighbour next(int stage, int chunk, int stages) {
  return stage < stages - 1 ? Neighbour{stage + 1, chunk} : Neighbour{0, chunk + 1};
}

// A message is named by the stream it belongs to: (phase, receiver's chunk). Each stream has one
// sender, which sends its micro-batches in increasing order, and the receiver takes them in
// that order too (the schedules keep micro-batches in order within a chunk and phase), so MPI's
// in-order delivery per (sender, tag) pairs them; tags stay small whatever the micro-batch count.
int tag(Phase phase, int receiver_chunk) {
  return 2 * receiver_chunk + (phase == Phase::Backward ? 1 : 0);
}

class Executor {
 public:
  Executor(tensor::Backend& backend, const model::LanguageModel& model,
           const parallel::ProcessGroups& groups, const BatchSource& batches)
      : backend_(backend), model_(model), groups_(groups), batches_(batches) {}

  ~Executor() {
    try {
      drain();
    } catch (...) {
      // Already failing: the exception in flight says why.
    }
  }

  // Completes every send (their tensors are then freed).
  void drain() {
    for (auto& [tensor, request] : sends_) request->wait();
    sends_.clear();
  }
  // Frees the tensors of sends that have completed, so that no more than the schedule's
  // micro-batches in flight stay alive.
  void release_sent() {
    std::erase_if(sends_, [](auto& send) { return send.second->test(); });
  }

  const model::Batch& batch(int64_t j) {
    auto it = cache_.find(j);
    if (it == cache_.end()) it = cache_.emplace(j, batches_(j)).first;
    return it->second;
  }
  void forget(int64_t j) { cache_.erase(j); }

  Tensor receive(Phase phase, int chunk, int64_t j) {
    const int stages = groups_.pp_size, stage = groups_.coord.pp;
    const Neighbour from = phase == Phase::Forward ? previous(stage, chunk, stages)
                                                   : next(stage, chunk, stages);
    const model::Batch& b = batch(j);
    Tensor x = backend_.empty({model_.hidden_rows(b), model_.config().hidden},
                              model_.config().dtype);
    groups_.pp->recv(x, from.stage, tag(phase, chunk));
    return x;
  }

  void send(Phase phase, int chunk, Tensor x) {
    const int stages = groups_.pp_size, stage = groups_.coord.pp;
    const Neighbour to = phase == Phase::Forward ? next(stage, chunk, stages)
                                                 : previous(stage, chunk, stages);
    auto request = groups_.pp->send_async(x, to.stage, tag(phase, to.chunk));
    sends_.emplace_back(std::move(x), std::move(request));
  }

 private:
  tensor::Backend& backend_;
  const model::LanguageModel& model_;
  const parallel::ProcessGroups& groups_;
  const BatchSource& batches_;
  std::map<int64_t, model::Batch> cache_;
  // Sends in flight, with the tensors they read (alive until the send completes).
  std::vector<std::pair<Tensor, std::unique_ptr<dist::Request>>> sends_;
};

model::Pass pass_for(tensor::Backend& backend, bool training, uint64_t seed, int64_t iteration,
                     const parallel::ProcessGroups& groups, int64_t j) {
  // Dropout is keyed by the micro-batch's place in the global batch, so that it draws what one
  // process draws for the same samples.
  return {.backend = backend, .training = training, .seed = seed, .iteration = iteration,
          .microbatch = j * groups.dp_size + groups.coord.dp};
}

// A micro-batch's mean losses, each over its own count (at least 1).
StepLosses means(const model::Losses& sum, double divisor) {
  return {.lm = sum.lm / std::max(sum.tokens, 1.0) / divisor,
          .sop = sum.sop / std::max(sum.sentences, 1.0) / divisor,
          .accuracy = sum.correct / std::max(sum.sentences, 1.0) / divisor};
}

}  // namespace

StepLosses forward_backward(tensor::Backend& backend, const model::LanguageModel& model,
                            const parallel::ProcessGroups& groups, const StepShape& shape,
                            const BatchSource& batches,
                            const std::function<void(size_t first_param)>& grads_ready) {
  const std::span<const PipelineOp> ops = shape.program;
  std::vector<size_t> last_backward(size_t(model.chunks()), 0);  // op index, per chunk
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].phase == Phase::Backward) last_backward[size_t(ops[i].chunk)] = i;
  }
  Executor io(backend, model, groups, batches);
  std::map<std::pair<int, int>, model::Activations> saved;
  std::map<int64_t, model::LossGrads> loss_grads;
  StepLosses loss;
  // Each micro-batch's share of the loss, scaled: over its tokens, each token's loss gradient.
  const double per_microbatch = shape.loss_scale / double(shape.global_microbatches);
  for (size_t i = 0; i < ops.size(); ++i) {
    const PipelineOp& op = ops[i];
    const int64_t j = op.microbatch;
    const model::Batch& batch = io.batch(j);
    model::Pass pass = pass_for(backend, true, shape.seed, shape.iteration, groups, j);
    if (i == last_backward[size_t(op.chunk)]) pass.on_grads_ready = &grads_ready;
    model::Activations& acts = saved[{op.chunk, op.microbatch}];
    if (op.phase == Phase::Forward) {
      Tensor x = model.starts_model(op.chunk) ? Tensor{} : io.receive(Phase::Forward, op.chunk, j);
      model::Losses sum;
      // The head may compute its gradients in the forward (a fused classifier): from the same
      // numerator, it divides by the same token count as loss_grads below.
      if (model.ends_model(op.chunk)) pass.loss_grad_numerator = per_microbatch;
      Tensor y = model.forward_chunk(pass, op.chunk, batch, std::move(x), &acts, &sum);
      if (model.ends_model(op.chunk)) {
        loss += means(sum, double(shape.global_microbatches));
        loss_grads[j] = {.token = float(per_microbatch / std::max(sum.tokens, 1.0)),
                         .sentence = float(per_microbatch / std::max(sum.sentences, 1.0))};
      } else {
        io.send(Phase::Forward, op.chunk, std::move(y));
      }
    } else {
      Tensor dy = model.ends_model(op.chunk) ? Tensor{} : io.receive(Phase::Backward, op.chunk, j);
      Tensor dx = model.backward_chunk(pass, op.chunk, batch, std::move(dy), acts,
                                       model.ends_model(op.chunk) ? loss_grads[j]
                                                                  : model::LossGrads{});
      saved.erase({op.chunk, op.microbatch});
      if (!model.starts_model(op.chunk)) io.send(Phase::Backward, op.chunk, std::move(dx));
      if (op.chunk == 0) io.forget(j);  // chunk 0's backward is this micro-batch's last use
    }
    io.release_sent();
  }
  io.drain();
  return loss;
}

StepLosses forward_only(tensor::Backend& backend, const model::LanguageModel& model,
                        const parallel::ProcessGroups& groups, int64_t microbatches, uint64_t seed,
                        const BatchSource& batches, const OutputsFor& outputs) {
  Executor io(backend, model, groups, batches);
  StepLosses loss;
  for (int64_t j = 0; j < microbatches; ++j) {
    const model::Batch& batch = io.batch(j);
    const model::Pass pass = pass_for(backend, false, seed, 0, groups, j);
    for (int chunk = 0; chunk < int(model.chunks()); ++chunk) {
      Tensor x = model.starts_model(chunk) ? Tensor{} : io.receive(Phase::Forward, chunk, j);
      model::Losses sum;
      model::HeadOutputs* wanted = model.ends_model(chunk) && outputs ? outputs(j) : nullptr;
      Tensor y = model.forward_chunk(pass, chunk, batch, std::move(x), nullptr, &sum, wanted);
      if (model.ends_model(chunk)) {
        loss += means(sum, 1.0);
      } else {
        io.send(Phase::Forward, chunk, std::move(y));
      }
    }
    io.forget(j);
    io.release_sent();
  }
  io.drain();
  return loss;
}

}  // namespace megatron::train
