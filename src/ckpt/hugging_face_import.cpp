// HuggingFaceSource (hugging_face.hpp): a Hugging Face directory read as megatron tensors.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <set>

#include "ckpt/hf_json.hpp"
#include "ckpt/hf_recipe.hpp"
#include "ckpt/hugging_face.hpp"
#include "ckpt/model_fields.hpp"
#include "ckpt/raw_elements.hpp"
#include "core/build_info.hpp"
#include "core/error.hpp"
#include "core/printable.hpp"

namespace megatron::ckpt {
namespace fs = std::filesystem;

namespace {

// Tensors a file may hold that are not weights: GPT-2's causal-mask buffers and older Llama
// saves' rotary frequencies (both recomputed from the config).
bool is_buffer(HfArch arch, const std::string& name) {
  auto ends_with = [&](std::string_view tail) {
    return name.size() >= tail.size() &&
           name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
  };
  if (arch == HfArch::Gpt2) return ends_with(".attn.bias") || ends_with(".attn.masked_bias");
  if (arch == HfArch::MegatronBert) return name == "bert.embeddings.position_ids";
  // T5's encoder and decoder embed_tokens are `shared`, tied (saved or not).
  if (arch == HfArch::T5) return name == "encoder.embed_tokens.weight" || name == "decoder.embed_tokens.weight";
  return ends_with(".rotary_emb.inv_freq");
}

}  // namespace

HuggingFaceSource::HuggingFaceSource(const fs::path& dir, int64_t tensor_parallel) : dir_(dir) {
  const fs::path config_path = dir_ / "config.json";
  const HfModel model = hf_model_from_config(read_hf_json(config_path), config_path.string());
  config_ = model.config;
  const int64_t multiple = 128 * std::max<int64_t>(tensor_parallel, 1);
  config_.padded_vocab = (config_.vocab + multiple - 1) / multiple * multiple;
  layout_ = hf_layout(model.arch, config_, model.head_from_embedding);
  head_from_embedding_ = model.head_from_embedding;
  open_files(dir_);
  locate_tensors();

  // One dtype for the whole model (a checkpoint has one); a mixed file is presented in f32.
  std::set<tensor::DType> dtypes;
  for (const Located& l : located_) dtypes.insert(*l.entry->dtype);
  dtype_ = dtypes.size() == 1 ? *dtypes.begin() : tensor::DType::F32;
  config_.dtype = dtype_;
  for (size_t i = 0; i < layout_.megatron.size(); ++i) {
    const MegatronTensor& m = layout_.megatron[i];
    tensors_.push_back({.kind = kModel,
                        .name = m.name,
                        .shape = m.shape,
                        .dtype = dtype_,
                        .split = m.split,
                        .parts = m.parts});
    index_of_[m.name] = i;
  }
  recipe_ = hf_recipe_yaml(model, dtype_, dir_.string());
}

HuggingFaceSource::~HuggingFaceSource() = default;

void HuggingFaceSource::open_files(const fs::path& dir) {
  const fs::path index = dir / "model.safetensors.index.json";
  std::vector<std::string> names;
  if (fs::exists(index)) {
    const nlohmann::json j = read_hf_json(index);
    if (!j.contains("weight_map") || !j["weight_map"].is_object()) {
      throw UserError(index.string() + ": no weight_map");
    }
    std::set<std::string> unique;
    for (const auto& [tensor, file] : j["weight_map"].items()) {
      if (!file.is_string()) {
        throw UserError(fmt::format("{}: weight_map[\"{}\"] = {}: expected a file name", index.string(),
                                    printable(tensor), printable(file.dump())));
      }
      unique.insert(file.get<std::string>());
    }
    names.assign(unique.begin(), unique.end());
  } else if (fs::exists(dir / "model.safetensors")) {
    names.push_back("model.safetensors");
  } else {
    throw UserError(fmt::format(
        "{}: no model.safetensors or model.safetensors.index.json (a PyTorch .bin checkpoint "
        "must be re-saved with save_pretrained(..., safe_serialization=True))",
        dir.string()));
  }
  for (const std::string& name : names) {
    // A file of this directory, never a path out of it.
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
        name.find('\0') != std::string::npos) {
      throw UserError(fmt::format("{}: weight_map names the file \"{}\"; expected a file name in "
                                  "{} (no directories)",
                                  index.string(), printable(name), dir.string()));
    }
    files_.push_back(std::make_unique<SafetensorsFile>(dir / name));
  }
}

void HuggingFaceSource::locate_tensors() {
  std::unordered_map<std::string, Located> all;
  for (const auto& f : files_) {
    for (const SafetensorsEntry& e : f->entries()) all[e.name] = {f.get(), &e};
  }
  std::set<std::string> used;
  for (const HfTensor& t : layout_.hf) {
    std::string name = t.name;
    // GPT2Model saves (the original "gpt2" files) have no "transformer." prefix.
    if (!all.count(name) && name.starts_with("transformer.")) name = name.substr(12);
    const auto it = all.find(name);
    if (it == all.end()) {
      throw UserError(fmt::format("{}: no tensor {}, which a {} with this config.json has",
                                  dir_.string(), t.name, architecture_name(layout_.arch)));
    }
    const SafetensorsEntry& e = *it->second.entry;
    if (e.shape != t.shape) {
      throw UserError(fmt::format("{}: {} has shape [{}], config.json makes it [{}]; the "
                                  "config.json does not describe these weights",
                                  it->second.file->path().string(), printable(e.name),
                                  fmt::join(e.shape, ", "), fmt::join(t.shape, ", ")));
    }
    if (!e.dtype) {
      throw UserError(fmt::format("{}: {} is {}; weights must be F32, BF16 or F16",
                                  it->second.file->path().string(), printable(e.name),
                                  printable(e.dtype_name)));
    }
    located_.push_back(it->second);
    used.insert(name);
  }
  for (const auto& [name, where] : all) {
    if (used.count(name) || is_buffer(layout_.arch, name)) continue;
    // A tied model saved without de-duplication carries the output layer, equal to wte.
    if ((config_.tie_embeddings || head_from_embedding_) && name == "lm_head.weight") continue;
    // BERT's decoder is the word embedding and cls.predictions.bias, tied.
    if (layout_.arch == HfArch::MegatronBert &&
        (name == "cls.predictions.decoder.weight" || name == "cls.predictions.decoder.bias")) {
      continue;
    }
    throw UserError(fmt::format(
        "{}: tensor {} has no place in a {} with this config.json (a feature the engine lacks?)",
        where.file->path().string(), printable(name), architecture_name(layout_.arch)));
  }
}

CheckpointMeta HuggingFaceSource::meta() const {
  CheckpointMeta m;
  m.dtype = std::string(tensor::name(dtype_));
  m.optimizer = "none";
  m.seed = 1234;  // the recipe's training.seed
  m.model = model_fields(config_);
  m.recipe = recipe_;
  m.recipe_original = recipe_;
  m.version = std::string(build_info::version());
  return m;
}

std::vector<std::byte> HuggingFaceSource::hf_rows_major(size_t index) const {
  const HfTensor& t = layout_.hf[index];
  const Located& l = located_[index];
  std::vector<std::byte> raw(size_t(l.entry->end - l.entry->begin));
  l.file->read(*l.entry, 0, raw);
  // A weight that is NaN or infinite is damage: every output it touches would be NaN.
  if (const int64_t bad = first_non_finite(raw, *l.entry->dtype); bad >= 0) {
    throw UserError(fmt::format("{}: tensor {} holds a non-finite value (NaN or infinity) at "
                                "element {}: the model is damaged; import an intact copy",
                                l.file->path().string(), printable(l.entry->name), bad));
  }
  std::vector<std::byte> bytes = convert_elements(raw, *l.entry->dtype, dtype_);
  // Stored [cols, rows] (Conv1D): transpose to megatron's [rows, cols].
  if (t.transposed) return transpose_elements(bytes, t.cols(), t.rows(), tensor::size_of(dtype_));
  return bytes;
}

const std::vector<std::byte>& HuggingFaceSource::whole(size_t index) const {
  if (cached_ == index) return cache_;
  const MegatronTensor& m = layout_.megatron[index];
  const size_t elem = tensor::size_of(dtype_);
  const int64_t cols = m.shape.size() > 1 ? m.shape[1] : 1;
  int64_t numel = 1;
  for (int64_t d : m.shape) numel *= d;
  cached_.reset();
  cache_.assign(size_t(numel) * elem, std::byte{0});  // padding rows stay zero
  std::optional<size_t> loaded;
  std::vector<std::byte> hf;
  int64_t row = 0;
  for (const HfRows& b : m.blocks) {
    if (loaded != b.hf) {  // GPT-2's qkv takes 3 x heads blocks from one c_attn
      hf = hf_rows_major(b.hf);
      loaded = b.hf;
    }
    std::memcpy(&cache_[size_t(row * cols) * elem], &hf[size_t(b.row0 * cols) * elem],
                size_t(b.rows * cols) * elem);
    scale_elements(std::span(&cache_[size_t(row * cols) * elem], size_t(b.rows * cols) * elem),
                   dtype_, b.scale);
    row += b.rows;
  }
  cached_ = index;
  return cache_;
}

void HuggingFaceSource::read_raw(const TensorInfo& t, const std::vector<Box>& boxes,
                                 std::span<std::byte> out, bool zero_past_end) const {
  const auto it = index_of_.find(t.name);
  if (t.kind != kModel || it == index_of_.end()) {
    throw RuntimeFailure("Hugging Face import has no tensor " + t.path());
  }
  const size_t elem = tensor::size_of(dtype_);
  if (out.size() != size_t(total_numel(boxes)) * elem) {
    throw RuntimeFailure("Hugging Face read of " + t.path() + ": buffer size does not match");
  }
  const std::lock_guard lock(cache_mutex_);
  const std::vector<std::byte>& w = whole(it->second);
  const MegatronTensor& m = layout_.megatron[it->second];
  const int64_t rows = m.shape[0], cols = m.shape.size() > 1 ? m.shape[1] : 1;
  std::byte* at = out.data();
  for (const Box& b : boxes) {
    if (b.col0 < 0 || b.col0 + b.cols > cols || b.row0 < 0) {
      throw RuntimeFailure(
          fmt::format("Hugging Face read of {}: box outside [{}, {}]", t.path(), rows, cols));
    }
    for (int64_t r = b.row0; r < b.row0 + b.rows; ++r, at += size_t(b.cols) * elem) {
      // Past the last row (a vocabulary padded further for more tensor-parallel ranks): the
      // last row again, or zeros, as TensorSource says.
      if (r >= rows && zero_past_end) {
        std::memset(at, 0, size_t(b.cols) * elem);
        continue;
      }
      const int64_t src = std::min(r, rows - 1);
      std::memcpy(at, &w[size_t(src * cols + b.col0) * elem], size_t(b.cols) * elem);
    }
  }
}

}  // namespace megatron::ckpt
