#include "ckpt/model_fields.hpp"

#include <fmt/format.h>

#include "recipe/enum_names.hpp"

namespace megatron::ckpt {

std::vector<std::pair<std::string, std::string>> model_fields(const model::ModelConfig& c) {
  using recipe::name_of;
  auto b = [](bool v) { return std::string(v ? "true" : "false"); };
  std::vector<std::pair<std::string, std::string>> f{
      {"model.arch", std::string(name_of(c.arch))},
      {"model.num_layers", std::to_string(c.num_layers)},
      {"model.hidden_size", std::to_string(c.hidden)},
      {"model.num_attention_heads", std::to_string(c.heads)},
      {"model.num_query_groups", std::to_string(c.groups)},
      {"model.kv_channels", std::to_string(c.head_dim)},
      {"model.ffn_hidden_size", std::to_string(c.ffn)},
      {"model.vocab_size", std::to_string(c.vocab)},
      {"model.position_embedding", std::string(name_of(c.position))}};
  if (c.encoder_decoder) f.emplace_back("model.decoder_num_layers", std::to_string(c.decoder_layers));
  if (c.position == recipe::PositionEmbedding::Learned) {
    f.emplace_back("model.max_position_embeddings", std::to_string(c.max_positions));
  } else if (c.position == recipe::PositionEmbedding::Relative) {
    f.emplace_back("model.relative_attention_num_buckets", std::to_string(c.relative_buckets));
    f.emplace_back("model.relative_attention_max_distance", std::to_string(c.relative_max_distance));
  } else {
    f.emplace_back("model.rotary_percent", fmt::format("{}", c.rotary_percent));
    f.emplace_back("model.rotary_base", fmt::format("{}", c.rotary_base));
  }
  f.emplace_back("model.normalization", std::string(name_of(c.norm)));
  f.emplace_back("model.activation", std::string(name_of(c.activation)));
  f.emplace_back("model.tie_embeddings", b(c.tie_embeddings));
  f.emplace_back("model.add_bias_linear", b(c.linear_bias));
  f.emplace_back("model.add_qkv_bias", b(c.qkv_bias));
  if (c.qk_norm) f.emplace_back("model.qk_layernorm", b(c.qk_norm));
  if (c.arch == recipe::Arch::Bert) f.emplace_back("model.bert_binary_head", b(c.binary_head));
  return f;
}

Split split_of(model::TpSplit s) {
  switch (s) {
    case model::TpSplit::None: return Split::None;
    case model::TpSplit::Rows: return Split::Rows;
    case model::TpSplit::Columns: return Split::Columns;
  }
  return Split::None;
}

}  // namespace megatron::ckpt
