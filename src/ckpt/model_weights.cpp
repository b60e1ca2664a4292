#include "ckpt/model_weights.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "ckpt/model_fields.hpp"
#include "core/error.hpp"
#include "core/printable.hpp"
#include "tensor/host_io.hpp"

namespace megatron::ckpt {

ShardLayout shard_layout(const model::Parameter& p, int64_t tp_rank, int64_t tp_size) {
  return {.global_shape = p.global_shape, .split = split_of(p.split), .parts = p.parts,
          .tp_rank = tp_rank, .tp_size = tp_size};
}

namespace {

UserError lacks_weight(const CheckpointReader& checkpoint, const std::string& name) {
  return UserError(fmt::format("{}: the checkpoint has no weight {}: it holds another model "
                               "(megatron ckpt inspect {} shows which)",
                               checkpoint.dir().string(), printable(name),
                               checkpoint.dir().string()));
}

}  // namespace

const TensorInfo* matching_model_tensor(const CheckpointReader& checkpoint,
                                        const model::Parameter& p, int64_t vocab) {
  const TensorInfo* t = checkpoint.find(kModel, p.name);
  if (!t) return nullptr;
  const std::vector<int64_t> global(p.global_shape.begin(), p.global_shape.end());
  const bool same = t->shape.size() == global.size() &&
                    std::equal(t->shape.begin() + 1, t->shape.end(), global.begin() + 1) &&
                    (p.padded_vocab || t->shape[0] == global[0]);
  if (!same) {
    throw UserError(fmt::format("{}: weight {} is [{}] in the checkpoint but [{}] in the model",
                                checkpoint.dir().string(), printable(p.name),
                                fmt::join(t->shape, ", "), fmt::join(global, ", ")));
  }
  if (p.padded_vocab && t->shape[0] < vocab) {
    throw UserError(fmt::format("{}: weight {} holds {} vocabulary rows in the checkpoint but the "
                                "model's vocabulary has {} tokens: it was trained with another "
                                "tokenizer; use its vocabulary (model.vocab_size)",
                                checkpoint.dir().string(), printable(p.name), t->shape[0], vocab));
  }
  return t;
}

void check_model_shapes(const CheckpointReader& checkpoint,
                        const std::vector<model::Parameter>& params, int64_t vocab) {
  for (const model::Parameter& p : params) {
    if (!matching_model_tensor(checkpoint, p, vocab)) throw lacks_weight(checkpoint, p.name);
  }
}

void ShardReader::read(const TensorInfo& t, const std::vector<Box>& boxes, tensor::Tensor& into,
                       bool zero_past_end) {
  if (t.dtype == into.dtype() && into.device() == tensor::Device::Cpu) {
    checkpoint_.read_raw(t, boxes, std::span(static_cast<std::byte*>(into.raw()), into.bytes()),
                         zero_past_end);
    return;
  }
  if (buffer_.size() < size_t(into.numel())) buffer_.resize(size_t(into.numel()));
  const std::span<float> values(buffer_.data(), size_t(into.numel()));
  checkpoint_.read_f32(t, boxes, values, zero_past_end);
  tensor::write_floats(backend_, into, values);
}

std::vector<std::string> load_model_weights(const CheckpointReader& checkpoint,
                                            model::LanguageModel& model, tensor::Backend& backend,
                                            const std::function<bool(const std::string&)>& may_lack) {
  const parallel::TensorParallel& tp = model.parameters().tp();
  ShardReader reader(checkpoint, backend, model.config().vocab);
  std::vector<std::string> lacking;
  for (const auto& p : model.parameters().all()) {
    const TensorInfo* t = reader.model_tensor(*p);
    if (!t && may_lack && may_lack(p->name)) {
      lacking.push_back(p->name);
      continue;
    }
    if (!t) throw lacks_weight(checkpoint, p->name);
    reader.read(*t, shard_boxes(shard_layout(*p, tp.rank, tp.size)), p->value);
  }
  return lacking;
}

}  // namespace megatron::ckpt
