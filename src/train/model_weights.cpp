#include "train/model_weights.hpp"

#include <fmt/format.h>

#include <cstring>

#include "ckpt/model_fields.hpp"
#include "ckpt/raw_elements.hpp"
#include "ckpt/shard_geometry.hpp"
#include "core/error.hpp"
#include "core/printable.hpp"
#include "tensor/host_io.hpp"

namespace megatron::train {
std::vector<std::string> load_model_weights(const ckpt::CheckpointReader& checkpoint,
                                            model::LanguageModel& model, tensor::Backend& backend,
                                            const std::function<bool(const std::string&)>& may_lack) {
  const parallel::TensorParallel& tp = model.parameters().tp();
  std::vector<std::string> lacking;
  for (const auto& p : model.parameters().all()) {
    const ckpt::TensorInfo* t = checkpoint.find(ckpt::kModel, p->name);
    if (!t && may_lack && may_lack(p->name)) {
      lacking.push_back(p->name);
      continue;
    }
    if (!t) {
      throw UserError(fmt::format("{}: the checkpoint has no weight {}: it holds another model "
                                  "(megatron ckpt inspect {} shows which)",
                                  checkpoint.dir().string(), printable(p->name),
                                  checkpoint.dir().string()));
    }
    // Only a vocabulary may differ in rows (padded for another tensor-parallel size).
    const bool rows_may_differ = p->split == model::TpSplit::Rows && p->parts == 1;
    std::vector<int64_t> global(p->global_shape.begin(), p->global_shape.end());
    if (t->shape.size() != global.size() ||
        !std::equal(t->shape.begin() + 1, t->shape.end(), global.begin() + 1) ||
        (!rows_may_differ && t->shape[0] != global[0])) {
      throw UserError(fmt::format("{}: weight {} is [{}] in the checkpoint but [{}] in the model",
                                  checkpoint.dir().string(), printable(p->name),
                                  fmt::join(t->shape, ", "), fmt::join(global, ", ")));
    }
    const ckpt::ShardLayout layout{.global_shape = global,
                                   .split = ckpt::split_of(p->split),
                                   .parts = p->parts,
                                   .tp_rank = tp.rank,
                                   .tp_size = tp.size};
    const std::vector<ckpt::Box> boxes = ckpt::shard_boxes(layout);
    std::vector<std::byte> raw(size_t(ckpt::total_numel(boxes)) * tensor::size_of(t->dtype));
    // Rows past the checkpoint's padded vocabulary are zeros: they are padding here too.
    checkpoint.read_raw(*t, boxes, raw, true);
    const std::vector<std::byte> f32 = ckpt::convert_elements(raw, t->dtype, tensor::DType::F32);
    std::vector<float> values(f32.size() / sizeof(float));
    std::memcpy(values.data(), f32.data(), f32.size());
    tensor::write_floats(backend, p->value, values);
  }
  return lacking;
}

}  // namespace megatron::train
