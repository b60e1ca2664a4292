// export_hugging_face (hugging_face.hpp): checkpoint -> config.json + model.safetensors.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>
#include <fstream>

#include "ckpt/hugging_face.hpp"
#include "ckpt/raw_elements.hpp"
#include "core/error.hpp"

namespace megatron::ckpt {
namespace fs = std::filesystem;

namespace {

// Where one block of rows of a Hugging Face tensor comes from: rows [m_row0, + block.rows) of
// the checkpoint tensor `info`.
struct Source {
  const TensorInfo* info = nullptr;
  int64_t m_row0 = 0;
  HfRows block;
};

// The checkpoint's tensors for every megatron tensor of `layout`, grouped by the Hugging Face
// tensor each block of rows goes to. UserError when the checkpoint lacks one or its shape
// differs from what its own model fields say.
std::vector<std::vector<Source>> sources_by_hf(const CheckpointReader& ckpt, const HfLayout& layout,
                                               const std::string& kind) {
  std::vector<std::vector<Source>> by_hf(layout.hf.size());
  for (const MegatronTensor& m : layout.megatron) {
    const TensorInfo* info = ckpt.find(kind, m.name);
    if (!info) {
      throw UserError(
          fmt::format("{}: the checkpoint has no {} tensor {}", ckpt.dir().string(), kind, m.name));
    }
    if (info->shape != m.shape) {
      throw UserError(fmt::format("{}: {} has shape [{}], its model fields make it [{}]",
                                  ckpt.dir().string(), m.name, fmt::join(info->shape, ", "),
                                  fmt::join(m.shape, ", ")));
    }
    int64_t row = 0;
    for (const HfRows& b : m.blocks) {
      by_hf[b.hf].push_back({.info = info, .m_row0 = row, .block = b});
      row += b.rows;
    }
  }
  return by_hf;
}

// One Hugging Face tensor in `dtype`, as the file stores it.
std::vector<std::byte> assemble(const CheckpointReader& ckpt, const HfTensor& hf,
                                const std::vector<Source>& sources, tensor::DType dtype) {
  const size_t elem = tensor::size_of(dtype);
  const int64_t rows = hf.rows(), cols = hf.cols();
  std::vector<std::byte> whole(size_t(rows * cols) * elem);
  int64_t covered = 0;
  for (const Source& s : sources) {
    const Box box{.row0 = s.m_row0, .rows = s.block.rows, .col0 = 0, .cols = cols};
    std::vector<std::byte> raw(size_t(box.numel()) * tensor::size_of(s.info->dtype));
    ckpt.read_raw(*s.info, {box}, raw);
    std::vector<std::byte> converted = convert_elements(raw, s.info->dtype, dtype);
    scale_elements(converted, dtype, 1.0 / s.block.scale);
    std::memcpy(&whole[size_t(s.block.row0 * cols) * elem], converted.data(), converted.size());
    covered += s.block.rows;
  }
  // Blocks never overlap (hf_layout makes them so), so their sum tells every row was written.
  if (covered != rows) {
    throw RuntimeFailure(fmt::format("export: {} rows of {} come from the checkpoint, it has {}",
                                     covered, hf.name, rows));
  }
  return hf.transposed ? transpose_elements(whole, rows, cols, elem) : whole;
}

}  // namespace

void export_hugging_face(const CheckpointReader& ckpt, const model::ModelConfig& model,
                         const fs::path& out_dir, std::optional<tensor::DType> dtype) {
  const TensorInfo* embedding = ckpt.find(kModel, "embedding.word_embeddings.weight");
  if (!embedding || embedding->shape.size() != 2) {
    throw UserError(ckpt.dir().string() + ": no word embedding: not a GPT checkpoint");
  }
  model::ModelConfig config = model;
  config.padded_vocab = embedding->shape[0];
  if (config.padded_vocab < config.vocab) {
    throw UserError(fmt::format("{}: the word embedding has {} rows, fewer than the recipe's "
                                "model.vocab_size {} (damaged checkpoint?)",
                                ckpt.dir().string(), config.padded_vocab, config.vocab));
  }
  const HfArch arch = hf_architecture(config);
  const HfLayout layout = hf_layout(arch, config);
  const tensor::DType out_dtype = dtype.value_or(embedding->dtype);
  // A 16-bit model's f32 masters are its exact weights: an f32 export takes them when saved.
  const bool from_masters = out_dtype == tensor::DType::F32 && embedding->dtype != out_dtype &&
                            ckpt.find(kMaster, embedding->name) != nullptr;
  const std::vector<std::vector<Source>> by_hf =
      sources_by_hf(ckpt, layout, from_masters ? kMaster : kModel);

  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) throw RuntimeFailure("cannot create " + out_dir.string() + ": " + ec.message());
  std::vector<SafetensorsTensor> declared;
  for (const HfTensor& t : layout.hf) declared.push_back({t.name, out_dtype, t.shape});
  {
    // transformers refuses a safetensors file whose metadata does not say which framework wrote
    // it. The writer removes its file unless finished.
    SafetensorsWriter writer(out_dir / "model.safetensors", declared, {{"format", "pt"}});
    for (size_t i = 0; i < layout.hf.size(); ++i) {
      writer.append(assemble(ckpt, layout.hf[i], by_hf[i], out_dtype));
    }
    writer.finish();
  }
  // config.json last: a directory with one is a whole model, and a failure leaves neither file.
  std::ofstream config_file(out_dir / "config.json");
  config_file << hf_config_json(arch, config, out_dtype).dump(2) << "\n";
  if (!config_file.flush()) {
    config_file.close();
    fs::remove(out_dir / "config.json", ec);
    fs::remove(out_dir / "model.safetensors", ec);
    throw RuntimeFailure("cannot write " + (out_dir / "config.json").string());
  }
}

}  // namespace megatron::ckpt
