// Hugging Face config.json <-> model::ModelConfig: which architecture can hold a model (GPT-2 for
// learned positions, Llama for rotary), the config.json export writes, and the one import reads.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "ckpt/hf_layout.hpp"
#include "model/model_config.hpp"
#include "tensor/dtype.hpp"

namespace megatron::ckpt {

// The architecture that computes the same function as `c`; UserError naming the first model
// field (a recipe key) that no Hugging Face architecture matches.
HfArch hf_architecture(const model::ModelConfig& c);

// config.json for `c` (c.vocab is the tokenizer's vocabulary: the padding rows are dropped).
nlohmann::json hf_config_json(HfArch arch, const model::ModelConfig& c, tensor::DType dtype);

// The model a config.json describes, with padded_vocab rounded up to a multiple of 128 (the
// recipe default) and seq_length min(positions, 2048). UserError, naming `where` and the key,
// for a model_type other than gpt2/llama or a setting the engine does not compute.
struct HfModel {
  HfArch arch = HfArch::Gpt2;
  model::ModelConfig config;
  // T5 saved by transformers 5, which always ties lm_head to `shared` (without the original
  // T5's rescaling): the engine's untied output layer starts as a copy of the embedding.
  bool head_from_embedding = false;
};
HfModel hf_model_from_config(const nlohmann::json& config, const std::string& where);

}  // namespace megatron::ckpt
