#include "plan/model_config.hpp"

namespace megatron::plan {

tensor::DType model_dtype(recipe::DType dtype) {
  switch (dtype) {
    case recipe::DType::F32: return tensor::DType::F32;
    case recipe::DType::Bf16: return tensor::DType::Bf16;
    case recipe::DType::F16: return tensor::DType::F16;
  }
  return tensor::DType::F32;
}

model::ModelConfig model_config(const recipe::Recipe& recipe, const recipe::Derived& derived) {
  const recipe::ModelSection& m = recipe.model;
  const bool bert = m.arch == recipe::Arch::Bert;
  const bool t5 = m.arch == recipe::Arch::T5;
  const int64_t classes = derived.classes;
  return {
      .arch = m.arch,
      .num_layers = m.num_layers,
      .decoder_layers = t5 ? derived.decoder_num_layers : 0,
      .decoder_seq_length = t5 ? derived.decoder_seq_length : 0,
      .hidden = m.hidden_size,
      .heads = m.num_attention_heads,
      .groups = derived.num_query_groups,
      .head_dim = derived.head_dim,
      .ffn = derived.ffn_hidden_size,
      .vocab = m.vocab_size,
      .padded_vocab = derived.padded_vocab_size,
      .seq_length = recipe.data.seq_length,
      .max_positions = derived.max_position_embeddings,
      .position = m.position_embedding,
      .rotary_base = m.rotary_base,
      .rotary_percent = m.rotary_percent,
      .rope_scaling = m.rope_scaling,
      .rope_scaling_factor = m.rope_scaling_factor.value_or(m.rope_scaling == recipe::RopeScaling::Llama3 ? 8.0 : 1.0),
      // yarn reads the model's own positions when not told (transformers' setdefault).
      .rope_original_max_positions = m.rope_original_max_position_embeddings.value_or(
          m.rope_scaling == recipe::RopeScaling::Yarn ? derived.max_position_embeddings : 8192),
      .rope_low_freq_factor = m.rope_low_freq_factor.value_or(1.0),
      .rope_high_freq_factor = m.rope_high_freq_factor.value_or(4.0),
      .rope_beta_fast = m.rope_beta_fast.value_or(32.0),
      .rope_beta_slow = m.rope_beta_slow.value_or(1.0),
      .rope_truncate = m.rope_truncate.value_or(true),
      .rope_attention_factor = m.rope_attention_factor.value_or(model::yarn_attention_factor(
          m.rope_scaling_factor.value_or(m.rope_scaling == recipe::RopeScaling::Llama3 ? 8.0 : 1.0))),
      .sliding_window = m.sliding_window.value_or(0),
      .relative_buckets = m.relative_attention_num_buckets.value_or(32),
      .relative_max_distance = m.relative_attention_max_distance.value_or(128),
      .norm = m.normalization,
      .norm_eps = m.norm_epsilon,
      .activation = m.activation,
      .tie_embeddings = m.tie_embeddings,
      .linear_bias = m.add_bias_linear,
      .qkv_bias = derived.add_qkv_bias,
      .qk_norm = m.qk_layernorm,
      .hidden_dropout = m.hidden_dropout,
      .attention_dropout = m.attention_dropout,
      .init_std = m.init_method_std,
      .dtype = model_dtype(recipe.precision.dtype),
      .recompute = recipe.training.recompute,
      .recompute_layers = recipe.training.recompute == recipe::Recompute::Full
                              // Unset: every layer of any stage (the count is per stage).
                              ? recipe.training.recompute_num_layers.value_or(
                                    m.num_layers + derived.decoder_num_layers)
                              : 0,
      .fused_classifier = recipe.training.fused_classifier,
      .causal = !bert && !t5,
      .encoder_decoder = t5,
      // Megatron's BertModel has token types (sentence A/B) only with the binary head.
      .token_types = bert && (m.bert_binary_head || classes > 0) ? 2 : 0,
      .lm_head_transform = bert,
      // Megatron's T5LMHead has a vocab-parallel bias when it shares the embedding.
      .output_bias = bert || (t5 && m.tie_embeddings),
      .binary_head = bert && m.bert_binary_head && classes == 0,
      .classes = classes,
      .pooler = bert,
  };
}

}  // namespace megatron::plan
