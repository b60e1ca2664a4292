#include "ckpt/rewrite.hpp"

#include <fmt/format.h>

#include <charconv>
#include <map>

#include "ckpt/checkpoint_writer.hpp"
#include "ckpt/directory.hpp"
#include "ckpt/model_fields.hpp"
#include "ckpt/model_limits.hpp"
#include "ckpt/raw_elements.hpp"
#include "core/error.hpp"
#include "core/printable.hpp"
#include "model/parameter_names.hpp"

namespace megatron::ckpt {
namespace fs = std::filesystem;
namespace {

// The global layer of a transformer block's tensor, or -1 (embeddings and heads), as the model
// names its parameters.
int64_t layer_of(const std::string& name, int64_t encoder_layers) {
  const model::ParameterPlace place = model::place_of(name, kMaxLayers, encoder_layers);
  return place.part == model::ParameterPlace::Part::Block ? place.layer : -1;
}

// What to write: (kind, source tensor to read, output dtype).
struct Job {
  std::string kind;
  const TensorInfo* from;
  tensor::DType dtype;
};

// Every rank file of the target layout, then the index, into `staging`.
void write_staged(const TensorSource& source, const CheckpointMeta& meta, const RewriteTarget& target,
                  const std::vector<Job>& jobs, const std::vector<int64_t>& layer_stage,
                  int64_t encoder_layers,
                  const fs::path& staging, const RewriteProgress& progress) {
  const int64_t total = int64_t(jobs.size()) * target.tensor;  // one shard per job and tp rank
  int64_t done = 0;
  for (int64_t pp = 0; pp < target.pipeline; ++pp) {
    for (int64_t tp = 0; tp < target.tensor; ++tp) {
      // Megatron's rank order (tensor fastest; data parallel 1).
      const int rank = int(tp + target.tensor * pp);
      RankFileWriter writer(staging, rank);
      for (const Job& job : jobs) {
        const TensorInfo& t = *job.from;
        if (stage_of(t.name, layer_stage, target.pipeline, encoder_layers) != pp) continue;
        if (t.split == Split::None && tp != 0) continue;
        const ShardLayout layout{.global_shape = t.shape, .split = t.split, .parts = t.parts,
                                 .tp_rank = tp, .tp_size = target.tensor};
        if (t.split != Split::None) {
          const int64_t dim = t.split == Split::Rows ? t.shape[0] / t.parts : t.shape.at(1);
          if (dim % target.tensor != 0) {
            throw UserError(fmt::format("{}/{} ({} {}) does not divide across {} tensor-parallel "
                                        "ranks; choose a --tp that divides it",
                                        t.kind, printable(t.name), dim,
                                        t.split == Split::Rows ? "rows" : "columns", target.tensor));
          }
        }
        const std::vector<Box> boxes = shard_boxes(layout);
        std::vector<std::byte> raw(size_t(total_numel(boxes)) * tensor::size_of(t.dtype));
        source.read_raw(t, boxes, raw, t.kind != kModel && t.kind != kMaster);
        Piece piece{.kind = job.kind, .name = t.name, .layout = layout, .dtype = job.dtype};
        piece.bytes = job.dtype == t.dtype ? std::move(raw) : convert_elements(raw, t.dtype, job.dtype);
        writer.add(piece);
        if (progress) progress(++done, total);
      }
      writer.finish();
    }
  }
  write_index(staging, meta);
}


}  // namespace

int64_t stage_of(const std::string& name, const std::vector<int64_t>& layer_stage, int64_t stages,
                 int64_t encoder_layers) {
  const model::ParameterPlace place = model::place_of(name, kMaxLayers, encoder_layers);
  if (place.part == model::ParameterPlace::Part::Embedding) return 0;
  if (place.part == model::ParameterPlace::Part::Head) return stages - 1;
  const int64_t layer = place.layer;
  if (size_t(layer) >= layer_stage.size()) {
    throw UserError(fmt::format("tensor {} belongs to layer {}, but the model has {} layers",
                                printable(name), layer, layer_stage.size()));
  }
  return layer_stage[size_t(layer)];
}

fs::path rewrite_checkpoint(const TensorSource& source, CheckpointMeta meta,
                            const RewriteTarget& target, const fs::path& save,
                            const RewriteProgress& progress) {
  // Which tensors there are, by (kind, name); masters are derived for 16-bit targets.
  std::map<std::pair<std::string, std::string>, const TensorInfo*> by_key;
  int64_t layers = 0;
  // T5 numbers its decoder's layers after the encoder's (model::place_of).
  int64_t encoder_layers = 0;
  if (model_field(meta, "model.arch") == "t5") {
    const std::string n = model_field(meta, "model.num_layers").value_or("");
    if (std::from_chars(n.data(), n.data() + n.size(), encoder_layers).ec != std::errc() ||
        encoder_layers < 1 || encoder_layers >= kMaxLayers) {
      throw UserError(fmt::format("the checkpoint's model.num_layers is '{}', not a layer count "
                                  "(damaged checkpoint?)",
                                  printable(n)));
    }
  }
  for (const TensorInfo& t : source.tensors()) {
    by_key[{t.kind, t.name}] = &t;
    const int64_t layer = layer_of(t.name, encoder_layers);
    if (layer >= kMaxLayers) {
      throw UserError(fmt::format("tensor {} names layer {} or more, past the {} layers a model may "
                                  "have (damaged checkpoint?)",
                                  printable(t.name), kMaxLayers, kMaxLayers));
    }
    layers = std::max(layers, layer + 1);
  }
  std::vector<int64_t> layer_stage = target.layer_stage;
  if (layer_stage.empty()) {
    if (layers % target.pipeline != 0) {
      throw UserError(fmt::format("the model's {} layers do not divide into {} pipeline stages",
                                  layers, target.pipeline));
    }
    for (int64_t l = 0; l < layers; ++l) layer_stage.push_back(l / (layers / target.pipeline));
  }
  const tensor::DType source_dtype = [&] {
    for (const TensorInfo& t : source.tensors())
      if (t.kind == kModel) return t.dtype;
    throw UserError("the checkpoint holds no model tensors");
  }();
  const tensor::DType dtype = target.dtype.value_or(source_dtype);

  std::vector<Job> jobs;
  for (const TensorInfo& t : source.tensors()) {
    if (t.kind == kMaster) continue;  // below, with the weights
    if (t.kind != kModel) {
      jobs.push_back({t.kind, &t, t.dtype});
      continue;
    }
    const auto master = by_key.find({kMaster, t.name});
    const TensorInfo* exact = master != by_key.end() ? master->second : &t;  // best f32 values
    if (dtype == tensor::DType::F32) {
      jobs.push_back({kModel, exact, tensor::DType::F32});  // the weights are the masters
    } else {
      jobs.push_back({kModel, dtype == t.dtype ? &t : exact, dtype});
      jobs.push_back({kMaster, exact, tensor::DType::F32});
    }
  }

  meta.layout = {.world = target.tensor * target.pipeline, .tensor = target.tensor,
                 .pipeline = target.pipeline, .data = 1, .virtual_pipeline = 1};
  meta.dtype = std::string(tensor::name(dtype));
  const fs::path staging = staging_dir(save, meta.state.iteration);
  std::error_code ec;
  fs::remove_all(staging, ec);
  fs::create_directories(staging, ec);
  if (ec) throw RuntimeFailure("cannot create " + staging.string() + ": " + ec.message());
  try {
    write_staged(source, meta, target, jobs, layer_stage, encoder_layers, staging, progress);
  } catch (...) {
    fs::remove_all(staging, ec);  // a failed rewrite leaves nothing behind
    throw;
  }
  return publish(save, meta.state.iteration);
}

}  // namespace megatron::ckpt
