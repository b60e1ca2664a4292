// The one weight loader: a rank's shard of every model parameter read from a checkpoint written
// under any layout, for resuming, fine-tuning, evaluation and generation alike.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ckpt/checkpoint_reader.hpp"
#include "ckpt/shard_geometry.hpp"
#include "model/language_model.hpp"
#include "model/parameter.hpp"

namespace megatron::ckpt {

// Where tensor-parallel rank `tp_rank` of `tp_size`'s shard of `p` lies in the whole tensor: from
// p's split and its parts (a fused SwiGLU weight is split part by part).
ShardLayout shard_layout(const model::Parameter& p, int64_t tp_rank, int64_t tp_size);

// The checkpoint's model tensor for `p`, or nullptr when it holds none. A UserError names both
// shapes when they differ; only a padded vocabulary (p.padded_vocab) may differ in rows, since
// another tensor-parallel size pads it to another length, and only in its padding: it must hold
// a row for every token of the model's `vocab` (ModelConfig::vocab).
const TensorInfo* matching_model_tensor(const CheckpointReader& checkpoint,
                                        const model::Parameter& p, int64_t vocab);

// Every parameter of a model described before it is built (model::LanguageModel::describe)
// against the checkpoint's shapes: the UserError load_model_weights would throw for the first
// the checkpoint lacks or holds in another shape, thrown before anything of that size is
// allocated (an override of model.hidden_size=1000000 must be refused, not run out of memory).
void check_model_shapes(const CheckpointReader& checkpoint,
                        const std::vector<model::Parameter>& params, int64_t vocab);

// Reads checkpoint tensors into a rank's tensors, with one conversion buffer for all of them (fresh
// large allocations would each cost page faults).
class ShardReader {
 public:
  // `vocab`: the model's vocabulary without padding (ModelConfig::vocab).
  ShardReader(const CheckpointReader& checkpoint, tensor::Backend& backend, int64_t vocab)
      : checkpoint_(checkpoint), backend_(backend), vocab_(vocab) {}

  // matching_model_tensor for the model's vocabulary.
  const TensorInfo* model_tensor(const model::Parameter& p) const {
    return matching_model_tensor(checkpoint_, p, vocab_);
  }

  // `boxes` of `t` into `into`: straight when `into` is in host memory in t's dtype, else through
  // f32. Rows past t's end repeat its last row, as Megatron's checkpoint tools pad a vocabulary
  // further; `zero_past_end` makes them zeros instead (optimizer moments).
  void read(const TensorInfo& t, const std::vector<Box>& boxes, tensor::Tensor& into,
            bool zero_past_end = false);

 private:
  const CheckpointReader& checkpoint_;
  tensor::Backend& backend_;
  int64_t vocab_;
  std::vector<float> buffer_;
};

// Fills every parameter of `model` with this rank's shard of the checkpoint's weights. Throws a
// UserError naming the checkpoint and the parameter it lacks or whose shape differs. `may_lack`:
// parameters the checkpoint need not hold (they keep their values); returns the names of those it
// did not hold.
std::vector<std::string> load_model_weights(const CheckpointReader& checkpoint,
                                            model::LanguageModel& model, tensor::Backend& backend,
                                            const std::function<bool(const std::string&)>& may_lack = {});

}  // namespace megatron::ckpt
