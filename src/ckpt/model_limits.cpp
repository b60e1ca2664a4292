#include "ckpt/model_limits.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/checked.hpp"
#include "core/error.hpp"

namespace megatron::ckpt {

int64_t check_size(int64_t value, int64_t max, std::string_view where, std::string_view key) {
  if (value < 1 || value > max) {
    throw UserError(fmt::format("{}: {} = {} is out of range: expected 1 to {}; correct {} (a "
                                "damaged or hand-edited file?)",
                                where, key, value, max, key));
  }
  return value;
}

int64_t checked_parameter_count(const model::ModelConfig& c, std::string_view where) {
  const std::string what = fmt::format("{}: the model's parameter count", where);
  const auto mul = [&](int64_t a, int64_t b) { return checked_mul(a, b, what); };
  const auto add = [&](int64_t a, int64_t b) { return checked_add(a, b, what); };
  const int64_t q = mul(c.heads, c.head_dim), kv = mul(c.groups, c.head_dim);
  const int64_t qkv = add(q, mul(2, kv));
  const int64_t fc1 = c.activation == recipe::Activation::Swiglu || c.activation == recipe::Activation::Geglu
                          ? mul(2, c.ffn)
                          : c.ffn;
  int64_t layer = add(add(mul(qkv, c.hidden), mul(c.hidden, q)), add(mul(fc1, c.hidden), mul(c.hidden, c.ffn)));
  layer = add(layer, mul(4, c.hidden));  // norms (an upper bound: with their biases)
  if (c.qk_norm) layer = add(layer, mul(2, c.head_dim));
  if (c.linear_bias || c.qkv_bias) layer = add(layer, add(add(qkv, fc1), mul(2, c.hidden)));
  // A T5 decoder layer (self- and cross-attention and the MLP) is under two encoder layers.
  int64_t total = mul(layer, add(c.num_layers, mul(2, c.decoder_layers)));
  if (c.position == recipe::PositionEmbedding::Relative) {
    total = add(total, mul(2, mul(c.relative_buckets, c.heads)));
  }
  const int64_t vocab = std::max(c.vocab, c.padded_vocab);
  total = add(total, mul(mul(vocab, c.hidden), c.tie_embeddings ? 1 : 2));
  if (c.position == recipe::PositionEmbedding::Learned) total = add(total, mul(c.max_positions, c.hidden));
  total = add(total, mul(2, c.hidden));  // the final norm
  if (total > kMaxParameters) {
    throw UserError(fmt::format("{}: these sizes make a model of {} parameters, more than the {} "
                                "this tool converts (a damaged or hand-edited file?)",
                                where, total, kMaxParameters));
  }
  return total;
}

}  // namespace megatron::ckpt
