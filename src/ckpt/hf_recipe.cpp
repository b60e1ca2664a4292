#include "ckpt/hf_recipe.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <optional>

#include "ckpt/hf_generation_config.hpp"
#include "ckpt/hf_tokenizer.hpp"
#include "recipe/enum_names.hpp"

namespace megatron::ckpt {

using recipe::name_of;

std::string hf_recipe_yaml(const HfModel& m, tensor::DType dtype, const std::string& source) {
  const model::ModelConfig& c = m.config;
  const bool rotary = c.position == recipe::PositionEmbedding::Rotary;
  const bool bert = c.arch == recipe::Arch::Bert;
  const bool t5 = c.arch == recipe::Arch::T5;
  auto b = [](bool v) { return v ? "true" : "false"; };
  std::string y = fmt::format(
      "# Imported from Hugging Face {} ({}). Every model key is explicit; {}\n"
      "# and the schedule a short fine-tuning run: set data.prefixes and training.* to train.\n",
      source, architecture_name(m.arch),
      bert ? "BERT trains on sentence-split data\n# (docs/bert.md): set data.vocab_file too,"
           : "the data is mock");
  y += fmt::format("model:\n  arch: {}\n", name_of(c.arch));
  if (bert) y += fmt::format("  bert_binary_head: {}\n", b(c.binary_head));
  y += fmt::format("  num_layers: {}\n  hidden_size: {}\n  num_attention_heads: {}\n", c.num_layers,
                   c.hidden, c.heads);
  if (t5) y += fmt::format("  decoder_num_layers: {}\n", c.decoder_layers);
  y += fmt::format("  num_query_groups: {}\n  kv_channels: {}\n  ffn_hidden_size: {}\n", c.groups,
                   c.head_dim, c.ffn);
  y += fmt::format("  vocab_size: {}\n  make_vocab_size_divisible_by: 128\n", c.vocab);
  if (t5) {
    y += fmt::format("  position_embedding: relative\n  relative_attention_num_buckets: {}\n"
                     "  relative_attention_max_distance: {}\n",
                     c.relative_buckets, c.relative_max_distance);
  } else {
    y += fmt::format("  max_position_embeddings: {}\n  position_embedding: {}\n", c.max_positions,
                     name_of(c.position));
  }
  if (rotary) {
    y += fmt::format("  rotary_base: {}\n  rotary_percent: {}\n", c.rotary_base, c.rotary_percent);
    if (c.sliding_window > 0) y += fmt::format("  sliding_window: {}\n", c.sliding_window);
    if (c.rope_scaling != model::RopeScaling::None) {
      y += fmt::format("  rope_scaling: {}\n  rope_scaling_factor: {}\n", name_of(c.rope_scaling), c.rope_scaling_factor);
    }
    if (c.rope_scaling == model::RopeScaling::Yarn) {
      y += fmt::format("  rope_original_max_position_embeddings: {}\n  rope_beta_fast: {}\n"
                       "  rope_beta_slow: {}\n  rope_truncate: {}\n  rope_attention_factor: {}\n",
                       c.rope_original_max_positions, c.rope_beta_fast, c.rope_beta_slow,
                       b(c.rope_truncate), c.rope_attention_factor);
    }
    if (c.rope_scaling == model::RopeScaling::Llama3) {
      y += fmt::format("  rope_original_max_position_embeddings: {}\n  rope_low_freq_factor: {}\n"
                       "  rope_high_freq_factor: {}\n",
                       c.rope_original_max_positions, c.rope_low_freq_factor, c.rope_high_freq_factor);
    }
  }
  y += fmt::format("  normalization: {}\n  norm_epsilon: {}\n  activation: {}\n", name_of(c.norm),
                   c.norm_eps, name_of(c.activation));
  y += fmt::format("  tie_embeddings: {}\n  add_bias_linear: {}\n  add_qkv_bias: {}\n",
                   b(c.tie_embeddings), b(c.linear_bias), b(c.qkv_bias));
  if (c.qk_norm) y += "  qk_layernorm: true\n";
  y += fmt::format("  hidden_dropout: {}\n  attention_dropout: {}\n  init_method_std: {}\n",
                   c.hidden_dropout, c.attention_dropout, c.init_std);
  // The directory's own tokenizer files when it has them (as `convert --to hf` writes them), so
  // that eval and generate need no tokenizer flags.
  const std::optional<HfTokenizerFiles> tok = find_hf_tokenizer(source, c.arch);
  const std::string kind = tok ? std::string(name_of(tok->kind))
                           : bert ? "bert-wordpiece-lowercase"
                           : rotary || t5 ? "sentencepiece" : "gpt2-bpe";
  y += fmt::format("data:\n  seq_length: {}\n  tokenizer: {}\n", c.seq_length, kind);
  if (t5) y += fmt::format("  decoder_seq_length: {}\n", c.decoder_seq_length);
  if (tok && !tok->vocab_file.empty()) y += fmt::format("  vocab_file: {}\n", nlohmann::json(tok->vocab_file).dump());
  if (tok && !tok->merge_file.empty()) y += fmt::format("  merge_file: {}\n", nlohmann::json(tok->merge_file).dump());
  if (tok && !tok->tokenizer_model.empty()) {
    y += fmt::format("  tokenizer_model: {}\n", nlohmann::json(tok->tokenizer_model).dump());
  }
  if (!bert) y += "  mock: true\n";
  y += fmt::format("precision:\n  dtype: {}\n", tensor::name(dtype));
  y += "training:\n"
       "  micro_batch_size: 1\n"
       "  global_batch_size: 8\n"
       "  train_iters: 100\n"
       "  optimizer: adamw\n"
       "  lr: 1.0e-5\n"
       "  min_lr: 1.0e-6\n"
       "  lr_decay_style: cosine\n"
       "  lr_warmup_iters: 10\n"
       "  weight_decay: 0.1\n"
       "  clip_grad: 1.0\n"
       "  seed: 1234\n"
       "cluster:\n"
       "  nodes: 1\n"
       "  gpus_per_node: 1\n"
       "  hardware: cpu\n";
  if (const auto g = read_hf_generation_config(source, c.vocab)) y += generation_yaml(*g);
  return y;
}

}  // namespace megatron::ckpt
