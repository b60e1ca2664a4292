// Which Hugging Face tensors each megatron parameter is made of (GPT2LMHeadModel,
// LlamaForCausalLM, MegatronBertForPreTraining and T5ForConditionalGeneration): pure naming and
// row arithmetic, shared by export and import.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/shard_geometry.hpp"
#include "model/model_config.hpp"

namespace megatron::ckpt {

enum class HfArch { Gpt2, Llama, Qwen2, Qwen3, Mistral, MegatronBert, T5 };
// "GPT2LMHeadModel", "LlamaForCausalLM", "MegatronBertForPreTraining", "T5ForConditionalGeneration"
std::string_view architecture_name(HfArch arch);

// A Hugging Face tensor seen in megatron's orientation: [rows, cols] (1-D as [n, 1]).
// `transposed`: the file stores it [cols, rows] (GPT-2's Conv1D weights are [in, out]).
struct HfTensor {
  std::string name;
  std::vector<int64_t> shape;  // as stored in the file
  bool transposed = false;
  int64_t rows() const { return transposed ? shape.at(1) : shape.at(0); }
  int64_t cols() const { return shape.size() == 1 ? 1 : transposed ? shape.at(0) : shape.at(1); }
};

// Rows [row0, row0 + rows) of Hugging Face tensor `hf` (an index into HfLayout::hf).
struct HfRows {
  size_t hf = 0;
  int64_t row0 = 0;
  int64_t rows = 0;
  // megatron = scale x Hugging Face (T5's queries: Hugging Face's T5 does not divide its scores
  // by sqrt(head_dim), megatron does). Exact for a power-of-two scale.
  double scale = 1.0;
};

// A megatron parameter as a stack of row blocks of Hugging Face tensors; rows past the blocks'
// sum (a vocabulary padded for tensor parallelism) are zeros on import and dropped on export.
struct MegatronTensor {
  std::string name;
  std::vector<int64_t> shape;
  Split split = Split::None;
  int64_t parts = 1;
  std::vector<HfRows> blocks;
};

struct HfLayout {
  HfArch arch = HfArch::Gpt2;
  std::vector<MegatronTensor> megatron;  // in model::LanguageModel's parameter order
  std::vector<HfTensor> hf;              // in the order export writes them
};

// The layout of `c` under `arch` (the caller has checked that `arch` can hold `c`).
// `head_from_embedding` (import only): the output layer reads the embedding's tensor.
HfLayout hf_layout(HfArch arch, const model::ModelConfig& c, bool head_from_embedding = false);

}  // namespace megatron::ckpt
