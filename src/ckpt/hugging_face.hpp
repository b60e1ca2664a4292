// Hugging Face interop: a checkpoint's weights as config.json + model.safetensors
// (GPT2LMHeadModel or LlamaForCausalLM), and a Hugging Face directory as a TensorSource.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "ckpt/checkpoint_reader.hpp"
#include "ckpt/hf_config.hpp"
#include "ckpt/hf_layout.hpp"
#include "ckpt/safetensors.hpp"
#include "ckpt/tensor_source.hpp"

namespace megatron::ckpt {

// Writes out_dir/config.json and out_dir/model.safetensors from the model weights of `ckpt`,
// one Hugging Face tensor at a time: fused qkv split (Llama) or re-ordered (GPT-2's c_attn),
// SwiGLU's fc1 split into gate/up, GPT-2's Conv1D weights transposed, the vocabulary's
// padding rows dropped. `dtype` converts the weights (nullopt: the checkpoint's, bitwise).
// UserError for a model no Hugging Face architecture matches (the message names the field).
// `config`: the model the checkpoint's recipe describes (plan::model_config of it, compiled);
// the checkpoint's word embedding gives the padded vocabulary.
void export_hugging_face(const CheckpointReader& ckpt, const model::ModelConfig& config,
                         const std::filesystem::path& out_dir,
                         std::optional<tensor::DType> dtype);

// A Hugging Face directory (config.json and model.safetensors, or shards listed by
// model.safetensors.index.json) presented as megatron model tensors, whole and padded to the
// recipe's vocabulary multiple with zero rows: rewrite_checkpoint(source, source.meta(), ...)
// makes it a checkpoint in any layout. Holds one megatron tensor in memory at a time.
class HuggingFaceSource : public TensorSource {
 public:
  // `tensor_parallel`: the layout the import is for; the vocabulary is padded to 128 x that, as
  // the imported recipe (make_vocab_size_divisible_by 128) pads it under that layout.
  explicit HuggingFaceSource(const std::filesystem::path& dir, int64_t tensor_parallel = 1);
  ~HuggingFaceSource() override;

  HfArch arch() const { return layout_.arch; }
  const model::ModelConfig& config() const { return config_; }
  // Iteration 0, optimizer "none", layout 1x1x1, the safetensors' dtype, the model's fields
  // and a runnable recipe for it (see hf_recipe_yaml).
  CheckpointMeta meta() const;

  const std::vector<TensorInfo>& tensors() const override { return tensors_; }
  void read_raw(const TensorInfo& t, const std::vector<Box>& boxes, std::span<std::byte> out,
                bool zero_past_end = false) const override;

 private:
  struct Located {
    const SafetensorsFile* file = nullptr;
    const SafetensorsEntry* entry = nullptr;
  };
  void open_files(const std::filesystem::path& dir);
  void locate_tensors();
  // Megatron tensor `index` whole, in dtype_ (cached: a tensor-parallel rewrite reads one
  // tensor's shards one after the other).
  const std::vector<std::byte>& whole(size_t index) const;
  // Hugging Face tensor `index` in megatron's orientation, in dtype_.
  std::vector<std::byte> hf_rows_major(size_t index) const;

  std::filesystem::path dir_;
  model::ModelConfig config_;
  HfLayout layout_;
  bool head_from_embedding_ = false;  // T5 from transformers 5: lm_head is `shared`
  std::string recipe_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::vector<Located> located_;  // per layout_.hf
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> index_of_;  // megatron name -> layout_.megatron index
  tensor::DType dtype_ = tensor::DType::F32;
  mutable std::mutex cache_mutex_;
  mutable std::optional<size_t> cached_;
  mutable std::vector<std::byte> cache_;
};

}  // namespace megatron::ckpt
