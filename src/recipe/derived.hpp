// Values the recipe implies but does not state (FFN size, padded vocab, head dim, training
// lengths, ...), each with a sentence saying how it was derived. What the world decides (data
// parallelism, micro-batches, stages) is the planner's: plan/placement.hpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "recipe/recipe.hpp"

namespace megatron::recipe {

struct Derivation {
  std::string name;   // e.g. "data-parallel size"
  std::string value;  // e.g. "8"
  std::string how;    // e.g. "world 1024 / (tensor 8 x pipeline 16 x context 1)"
};

struct Derived {
  int64_t ffn_hidden_size = 0;
  int64_t head_dim = 0;           // kv_channels
  int64_t num_query_groups = 0;
  bool add_qkv_bias = false;
  int64_t padded_vocab_size = 0;
  // Classification fine-tuning's classes (finetune.labels, or the GLUE format's); 0 without.
  int64_t classes = 0;
  int64_t max_position_embeddings = 0;
  int64_t decoder_num_layers = 0;  // T5 only, else 0
  int64_t decoder_seq_length = 0;  // T5 only, else 0
  int64_t vocab_extra_ids = 0;     // data.vocab_extra_ids; T5's default 100
  int64_t train_iters = 0;           // 0 when the recipe gives no training length
  int64_t lr_warmup_iters = 0;
  int64_t lr_decay_iters = 0;
  int64_t lr_wsd_decay_iters = 0;    // WSD's final decay phase; 0 for other decay styles
  std::vector<Derivation> log;       // in the order they were derived
};

}  // namespace megatron::recipe
