// What the Hugging Face tests share: tiny GPT-2- and Llama-shaped configs (vocabulary padded
// to 128 as an import pads it), random weights held in memory as a TensorSource, and the
// checkpoint metadata that describes them.
#pragma once

#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "ckpt/hf_layout.hpp"
#include "ckpt/model_fields.hpp"
#include "ckpt/tensor_source.hpp"
#include "model/language_model.hpp"
#include "recipe/recipe.hpp"
#include "tensor/cpu_backend.hpp"
#include "tensor/half.hpp"

namespace megatron::test_support {

inline model::ModelConfig hf_tiny_gpt2() {
  model::ModelConfig c;
  c.num_layers = 2;
  c.hidden = 16;
  c.heads = 4;
  c.groups = 4;
  c.head_dim = 4;
  c.ffn = 24;
  c.vocab = 50;
  c.padded_vocab = 128;
  c.seq_length = 7;
  c.max_positions = 9;
  c.norm_eps = 1e-5;
  c.activation = recipe::Activation::GeluTanh;
  c.hidden_dropout = c.attention_dropout = 0.0;
  return c;
}

// Grouped-query attention (6 heads, 2 key/value groups), untied, rotary, no biases.
inline model::ModelConfig hf_tiny_llama() {
  model::ModelConfig c = hf_tiny_gpt2();
  c.hidden = 24;
  c.heads = 6;
  c.groups = 2;
  c.head_dim = 4;
  c.ffn = 20;
  c.max_positions = 32;
  c.position = recipe::PositionEmbedding::Rotary;
  c.rotary_base = 500.0;  // small, so positions 0..6 turn the rotary pairs by visible angles
  c.norm = recipe::Norm::RmsNorm;
  c.norm_eps = 1e-6;
  c.activation = recipe::Activation::Swiglu;
  c.tie_embeddings = false;
  c.linear_bias = c.qkv_bias = false;
  return c;
}

// Qwen2-shaped: the Llama above with biases on the query, key and value projections only.
inline model::ModelConfig hf_tiny_qwen2() {
  model::ModelConfig c = hf_tiny_llama();
  c.qkv_bias = true;
  c.tie_embeddings = true;
  return c;
}

// Qwen3-shaped: the Llama above with RMS norms on each query and key head, and heads of 8
// channels though hidden / heads is 4 (as Qwen3's 128 against 1024 / 16).
inline model::ModelConfig hf_tiny_qwen3() {
  model::ModelConfig c = hf_tiny_llama();
  c.qk_norm = true;
  c.head_dim = 8;
  return c;
}

// T5 v1.1-shaped: 2 + 2 layers, relative positions (8 buckets over distance 12: exact,
// logarithmic and clipped ones within 7 tokens), RMS norms, GeGLU, untied, no biases; head_dim 4,
// so the queries' sqrt(head_dim) is exact.
inline model::ModelConfig hf_tiny_t5() {
  model::ModelConfig c = hf_tiny_gpt2();
  c.arch = recipe::Arch::T5;
  c.causal = false;
  c.encoder_decoder = true;
  c.decoder_layers = 2;
  c.decoder_seq_length = 5;
  c.position = recipe::PositionEmbedding::Relative;
  c.relative_buckets = 8;
  c.relative_max_distance = 12;
  c.norm = recipe::Norm::RmsNorm;
  c.norm_eps = 1e-6;
  c.activation = recipe::Activation::Geglu;
  c.tie_embeddings = false;
  c.linear_bias = c.qkv_bias = false;
  return c;
}

// The recipe text a checkpoint of `c` carries: what model_fields leaves out.
inline std::string hf_recipe_text(const model::ModelConfig& c) {
  return "model:\n  norm_epsilon: " + std::to_string(c.norm_eps) +
         "\n  max_position_embeddings: " + std::to_string(c.max_positions) +
         "\n  hidden_dropout: 0.0\n  attention_dropout: 0.0\n  init_method_std: 0.02\n"
         "data:\n  seq_length: " +
         std::to_string(c.seq_length) + "\n" +
         (c.encoder_decoder ? "  decoder_seq_length: " + std::to_string(c.decoder_seq_length) + "\n"
                            : std::string());
}

inline ckpt::CheckpointMeta hf_meta(const model::ModelConfig& c, tensor::DType dtype) {
  ckpt::CheckpointMeta m;
  m.dtype = std::string(tensor::name(dtype));
  m.optimizer = "none";
  m.model = ckpt::model_fields(c);
  m.recipe = hf_recipe_text(c);
  return m;
}

// Whole tensors held in memory, each random (normal, std 0.5), in one dtype.
class MemorySource : public ckpt::TensorSource {
 public:
  MemorySource(const model::ModelConfig& c, tensor::DType dtype, uint32_t seed = 5) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 0.5f);
    // The parameters as the model itself declares them, not as hf_layout says.
    tensor::CpuBackend backend(1);
    const model::LanguageModel model(backend, c);
    for (const auto& p : model.parameters().all()) {
      const ckpt::Split split = p->split == model::TpSplit::Rows      ? ckpt::Split::Rows
                                : p->split == model::TpSplit::Columns ? ckpt::Split::Columns
                                                                      : ckpt::Split::None;
      const ckpt::TensorInfo& m = infos_.emplace_back(ckpt::TensorInfo{.kind = ckpt::kModel,
                                                                       .name = p->name,
                                                                       .shape = p->global_shape,
                                                                       .dtype = dtype,
                                                                       .split = split,
                                                                       .parts = p->parts});
      int64_t n = 1;
      for (int64_t d : m.shape) n *= d;
      std::vector<float> values(static_cast<size_t>(n));
      for (float& v : values) v = normal(rng);
      std::vector<std::byte>& bytes = data_[m.name];
      bytes.resize(size_t(n) * tensor::size_of(dtype));
      if (dtype == tensor::DType::F32) {
        std::memcpy(bytes.data(), values.data(), bytes.size());
      } else if (dtype == tensor::DType::Bf16) {
        tensor::convert(std::span<const float>(values),
                        std::span(reinterpret_cast<tensor::bf16*>(bytes.data()), values.size()));
      } else {
        tensor::convert(std::span<const float>(values),
                        std::span(reinterpret_cast<tensor::f16*>(bytes.data()), values.size()));
      }
    }
  }
  const std::vector<ckpt::TensorInfo>& tensors() const override { return infos_; }
  void read_raw(const ckpt::TensorInfo& t, const std::vector<ckpt::Box>& boxes,
                std::span<std::byte> out, bool /*zero_past_end*/) const override {
    const std::vector<std::byte>& all = data_.at(t.name);
    const size_t elem = tensor::size_of(t.dtype);
    const int64_t cols = t.shape.size() > 1 ? t.shape[1] : 1;
    std::byte* at = out.data();
    for (const ckpt::Box& b : boxes) {
      for (int64_t r = b.row0; r < b.row0 + b.rows; ++r, at += size_t(b.cols) * elem) {
        std::memcpy(at, &all[size_t(r * cols + b.col0) * elem], size_t(b.cols) * elem);
      }
    }
  }
  const std::vector<std::byte>& bytes(const std::string& name) const { return data_.at(name); }

 private:
  std::vector<ckpt::TensorInfo> infos_;
  std::map<std::string, std::vector<std::byte>> data_;
};

}  // namespace megatron::test_support
