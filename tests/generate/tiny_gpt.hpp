// The generation tests' model: a 2-layer GPT over the first 64 ids of the GPT-2 vocabulary
// (single characters, so any id decodes), with rotary positions (so steps use their positions),
// seeded, on one CPU thread, with its generate::Engine.
#pragma once

#include <memory>
#include <string>

#include "data/tokenizer.hpp"
#include "generate/generator.hpp"
#include "model/language_model.hpp"
#include "tensor/cpu_backend.hpp"

namespace megatron::test_support {

struct TinyGpt {
  explicit TinyGpt(int64_t positions = 16)
      : config(make_config(positions)),
        model(backend, config),
        engine{.backend = backend, .model = model, .tokenizer = *tokenizer, .max_positions = positions, .vocab = 64} {
    model.initialise(11);
  }
  static model::ModelConfig make_config(int64_t positions) {
    model::ModelConfig c{.num_layers = 2, .hidden = 32, .heads = 4, .groups = 2, .head_dim = 8,
                         .ffn = 64, .vocab = 64, .padded_vocab = 64, .seq_length = positions,
                         .max_positions = positions, .init_std = 0.5};
    c.position = model::PositionEmbedding::Rotary;
    return c;
  }

  tensor::CpuBackend backend{1};
  model::ModelConfig config;
  model::LanguageModel model;
  std::unique_ptr<data::Tokenizer> tokenizer = data::make_tokenizer(
      data::TokenizerKind::Gpt2Bpe,
      {.vocab_file = std::string(MEGATRON_SOURCE_DIR) + "/data/tokenizers/gpt2/vocab.json",
       .merge_file = std::string(MEGATRON_SOURCE_DIR) + "/data/tokenizers/gpt2/merges.txt"});
  generate::Engine engine;
};

}  // namespace megatron::test_support
