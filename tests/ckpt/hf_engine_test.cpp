// Does the engine compute the Hugging Face model's function? A Hugging Face directory is
// imported into a checkpoint and run through model::LanguageModel; its logits are compared with a
// float64 forward written here from transformers' GPT2LMHeadModel / LlamaForCausalLM code
// (Conv1D x W + b, c_attn's [q | k | v] thirds, gelu_new; rotate_half rotary, repeat_kv for
// grouped-query attention, silu(gate) * up), reading the Hugging Face tensors by their names.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "ckpt/checkpoint_reader.hpp"
#include "model/relative_position.hpp"
#include "ckpt/hugging_face.hpp"
#include "ckpt/rewrite.hpp"
#include "hf_fixtures.hpp"
#include "support/temp_dir.hpp"
#include "tensor/host_io.hpp"

namespace megatron::ckpt {
namespace {

namespace fs = std::filesystem;
using Matrix = std::vector<double>;  // row-major

class HfWeights {
 public:
  explicit HfWeights(const fs::path& file) : f_(file) {}
  // The tensor as stored; `rows` x `cols` checked.
  Matrix get(const std::string& name, int64_t rows, int64_t cols = 1) const {
    const SafetensorsEntry* e = f_.find(name);
    if (!e) throw std::runtime_error("no " + name);
    EXPECT_EQ(e->numel(), rows * cols) << name;
    std::vector<float> v(size_t(e->numel()));
    f_.read(*e, 0, std::as_writable_bytes(std::span(v)));
    return {v.begin(), v.end()};
  }
  bool has(const std::string& name) const { return f_.find(name) != nullptr; }

 private:
  SafetensorsFile f_;
};

// x [n, k] times w: [k, m] (Conv1D) or, `w_is_out_in`, [m, k] (nn.Linear's weight).
Matrix matmul(const Matrix& x, int64_t n, int64_t k, const Matrix& w, int64_t m, bool w_is_out_in) {
  Matrix y(size_t(n * m), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p)
        s += x[size_t(i * k + p)] * (w_is_out_in ? w[size_t(j * k + p)] : w[size_t(p * m + j)]);
      y[size_t(i * m + j)] = s;
    }
  return y;
}

void add_bias(Matrix& y, const Matrix& b) {
  for (size_t i = 0; i < y.size(); ++i) y[i] += b[i % b.size()];
}

Matrix layer_norm(const Matrix& x, int64_t n, int64_t h, const Matrix& w, const Matrix* b,
                  double eps) {
  Matrix y(x.size());
  for (int64_t i = 0; i < n; ++i) {
    const double* r = &x[size_t(i * h)];
    double mean = 0, var = 0;
    if (b) {
      for (int64_t j = 0; j < h; ++j) mean += r[j] / double(h);
      for (int64_t j = 0; j < h; ++j) var += (r[j] - mean) * (r[j] - mean) / double(h);
    } else {
      for (int64_t j = 0; j < h; ++j) var += r[j] * r[j] / double(h);  // RMSNorm: no centring
    }
    for (int64_t j = 0; j < h; ++j) {
      y[size_t(i * h + j)] =
          (r[j] - mean) / std::sqrt(var + eps) * w[size_t(j)] + (b ? (*b)[size_t(j)] : 0.0);
    }
  }
  return y;
}

// Causal attention of q [T, NH*D] with k, v [T, G*D]; query head h reads key/value head
// h / (NH / G) (transformers' repeat_kv).
Matrix attention(const Matrix& q, const Matrix& k, const Matrix& v, int64_t t, int64_t nh,
                 int64_t g, int64_t d) {
  Matrix o(size_t(t * nh * d), 0.0);
  for (int64_t h = 0; h < nh; ++h) {
    const int64_t kh = h / (nh / g);
    for (int64_t i = 0; i < t; ++i) {
      std::vector<double> s(size_t(i + 1));
      double max = -1e300, sum = 0;
      for (int64_t j = 0; j <= i; ++j) {
        double dot = 0;
        for (int64_t c = 0; c < d; ++c)
          dot += q[size_t(i * nh * d + h * d + c)] * k[size_t(j * g * d + kh * d + c)];
        s[size_t(j)] = dot / std::sqrt(double(d));
        max = std::max(max, s[size_t(j)]);
      }
      for (double& x : s) sum += (x = std::exp(x - max));
      for (int64_t j = 0; j <= i; ++j)
        for (int64_t c = 0; c < d; ++c)
          o[size_t(i * nh * d + h * d + c)] +=
              s[size_t(j)] / sum * v[size_t(j * g * d + kh * d + c)];
    }
  }
  return o;
}

// transformers' apply_rotary_pos_emb: x * cos + rotate_half(x) * sin, rotate_half(x) =
// [-x2, x1] over each head's halves, inv_freq = theta^(-2i / D).
// transformers' inverse frequencies (modeling_rope_utils): default, linear, and
// _compute_llama3_parameters' torch.where form, written out here in float64.
std::vector<double> inverse_frequencies(const model::ModelConfig& c, int64_t d) {
  std::vector<double> inv(size_t(d / 2));
  for (int64_t i = 0; i < d / 2; ++i) inv[size_t(i)] = 1.0 / std::pow(c.rotary_base, double(2 * i) / double(d));
  if (c.rope_scaling == recipe::RopeScaling::Linear) {
    for (double& f : inv) f /= c.rope_scaling_factor;
  } else if (c.rope_scaling == recipe::RopeScaling::Llama3) {
    const double old = double(c.rope_original_max_positions);
    const double low_wavelen = old / c.rope_low_freq_factor, high_wavelen = old / c.rope_high_freq_factor;
    for (double& f : inv) {
      const double wavelen = 2 * M_PI / f;
      const double llama = wavelen > low_wavelen ? f / c.rope_scaling_factor : f;
      const double smooth = (old / wavelen - c.rope_low_freq_factor) / (c.rope_high_freq_factor - c.rope_low_freq_factor);
      const double smoothed = (1 - smooth) * llama / c.rope_scaling_factor + smooth * llama;
      const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
      f = medium ? smoothed : llama;
    }
  } else if (c.rope_scaling == recipe::RopeScaling::Yarn) {
    // transformers' _compute_yarn_parameters: find_correction_range, then linear_ramp_factor.
    const auto correction = [&](double rotations) {
      return double(d) * std::log(double(c.rope_original_max_positions) / (rotations * 2 * M_PI)) /
             (2 * std::log(c.rotary_base));
    };
    double low = correction(c.rope_beta_fast), high = correction(c.rope_beta_slow);
    if (c.rope_truncate) low = std::floor(low), high = std::ceil(high);
    low = std::max(low, 0.0), high = std::min(high, double(d - 1));
    if (low == high) high += 0.001;
    for (int64_t i = 0; i < d / 2; ++i) {
      const double extrapolation = 1 - std::clamp((double(i) - low) / (high - low), 0.0, 1.0);
      double& f = inv[size_t(i)];
      f = f / c.rope_scaling_factor * (1 - extrapolation) + f * extrapolation;
    }
  }
  return inv;
}

// YaRN scales the cosines and sines by its attention factor.
void rotate(Matrix& x, int64_t t, int64_t heads, int64_t d, const std::vector<double>& inv,
            double attention_factor = 1.0) {
  for (int64_t p = 0; p < t; ++p)
    for (int64_t h = 0; h < heads; ++h) {
      double* r = &x[size_t(p * heads * d + h * d)];
      std::vector<double> out(static_cast<size_t>(d));
      for (int64_t c = 0; c < d; ++c) {
        const double angle = double(p) * inv[size_t(c % (d / 2))];
        const double rotated = c < d / 2 ? -r[c + d / 2] : r[c - d / 2];
        out[size_t(c)] = attention_factor * (r[c] * std::cos(angle) + rotated * std::sin(angle));
      }
      std::copy(out.begin(), out.end(), r);
    }
}

// GPT2LMHeadModel's logits [T, vocab] for `tokens`.
Matrix gpt2_logits(const HfWeights& w, const model::ModelConfig& c,
                   const std::vector<int32_t>& tokens) {
  const int64_t t = int64_t(tokens.size()), h = c.hidden, f = c.ffn;
  const Matrix wte = w.get("transformer.wte.weight", c.vocab, h);
  const Matrix wpe = w.get("transformer.wpe.weight", c.max_positions, h);
  Matrix x(size_t(t * h));
  for (int64_t i = 0; i < t; ++i)
    for (int64_t j = 0; j < h; ++j)
      x[size_t(i * h + j)] = wte[size_t(tokens[size_t(i)] * h + j)] + wpe[size_t(i * h + j)];
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "transformer.h." + std::to_string(l) + ".";
    const Matrix ln1b = w.get(p + "ln_1.bias", h);
    Matrix a = layer_norm(x, t, h, w.get(p + "ln_1.weight", h), &ln1b, c.norm_eps);
    Matrix qkv = matmul(a, t, h, w.get(p + "attn.c_attn.weight", h, 3 * h), 3 * h, false);
    add_bias(qkv, w.get(p + "attn.c_attn.bias", 3 * h));
    Matrix q(size_t(t * h)), k(q.size()), v(q.size());  // split(n_embd, dim=2)
    for (int64_t i = 0; i < t; ++i)
      for (int64_t j = 0; j < h; ++j) {
        q[size_t(i * h + j)] = qkv[size_t(i * 3 * h + j)];
        k[size_t(i * h + j)] = qkv[size_t(i * 3 * h + h + j)];
        v[size_t(i * h + j)] = qkv[size_t(i * 3 * h + 2 * h + j)];
      }
    Matrix o = matmul(attention(q, k, v, t, c.heads, c.heads, c.head_dim), t, h,
                      w.get(p + "attn.c_proj.weight", h, h), h, false);
    add_bias(o, w.get(p + "attn.c_proj.bias", h));
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    const Matrix ln2b = w.get(p + "ln_2.bias", h);
    Matrix m = matmul(layer_norm(x, t, h, w.get(p + "ln_2.weight", h), &ln2b, c.norm_eps), t, h,
                      w.get(p + "mlp.c_fc.weight", h, f), f, false);
    add_bias(m, w.get(p + "mlp.c_fc.bias", f));
    for (double& z : m) {
      z = c.activation == recipe::Activation::GeluTanh
              ? 0.5 * z * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (z + 0.044715 * z * z * z)))
              : 0.5 * z * (1.0 + std::erf(z / std::sqrt(2.0)));
    }
    Matrix down = matmul(m, t, f, w.get(p + "mlp.c_proj.weight", f, h), h, false);
    add_bias(down, w.get(p + "mlp.c_proj.bias", h));
    for (size_t i = 0; i < x.size(); ++i) x[i] += down[i];
  }
  const Matrix lnfb = w.get("transformer.ln_f.bias", h);
  const Matrix out = layer_norm(x, t, h, w.get("transformer.ln_f.weight", h), &lnfb, c.norm_eps);
  const Matrix head = w.has("lm_head.weight") ? w.get("lm_head.weight", c.vocab, h) : wte;
  return matmul(out, t, h, head, c.vocab, true);
}

// LlamaForCausalLM's logits [T, vocab] for `tokens`.
Matrix llama_logits(const HfWeights& w, const model::ModelConfig& c,
                    const std::vector<int32_t>& tokens) {
  const int64_t t = int64_t(tokens.size()), h = c.hidden, f = c.ffn, d = c.head_dim;
  const int64_t nh = c.heads, g = c.groups;
  const Matrix embed = w.get("model.embed_tokens.weight", c.vocab, h);
  Matrix x(size_t(t * h));
  for (int64_t i = 0; i < t; ++i)
    for (int64_t j = 0; j < h; ++j) x[size_t(i * h + j)] = embed[size_t(tokens[size_t(i)] * h + j)];
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const Matrix a =
        layer_norm(x, t, h, w.get(p + "input_layernorm.weight", h), nullptr, c.norm_eps);
    Matrix q = matmul(a, t, h, w.get(p + "self_attn.q_proj.weight", nh * d, h), nh * d, true);
    Matrix k = matmul(a, t, h, w.get(p + "self_attn.k_proj.weight", g * d, h), g * d, true);
    Matrix v = matmul(a, t, h, w.get(p + "self_attn.v_proj.weight", g * d, h), g * d, true);
    // Qwen2ForCausalLM: the same model with biases on q, k and v (before the rotation).
    if (w.has(p + "self_attn.q_proj.bias")) {
      add_bias(q, w.get(p + "self_attn.q_proj.bias", nh * d));
      add_bias(k, w.get(p + "self_attn.k_proj.bias", g * d));
      add_bias(v, w.get(p + "self_attn.v_proj.bias", g * d));
    }
    // Qwen3ForCausalLM: RMS norms over each head of q and k (before the rotation).
    if (w.has(p + "self_attn.q_norm.weight")) {
      q = layer_norm(q, t * nh, d, w.get(p + "self_attn.q_norm.weight", d), nullptr, c.norm_eps);
      k = layer_norm(k, t * g, d, w.get(p + "self_attn.k_norm.weight", d), nullptr, c.norm_eps);
    }
    const std::vector<double> inv = inverse_frequencies(c, d);
    const double scale = c.rope_scaling == recipe::RopeScaling::Yarn ? c.rope_attention_factor : 1.0;
    rotate(q, t, nh, d, inv, scale);
    rotate(k, t, g, d, inv, scale);
    const Matrix o = matmul(attention(q, k, v, t, nh, g, d), t, nh * d,
                            w.get(p + "self_attn.o_proj.weight", h, nh * d), h, true);
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    const Matrix b =
        layer_norm(x, t, h, w.get(p + "post_attention_layernorm.weight", h), nullptr, c.norm_eps);
    Matrix gate = matmul(b, t, h, w.get(p + "mlp.gate_proj.weight", f, h), f, true);
    const Matrix up = matmul(b, t, h, w.get(p + "mlp.up_proj.weight", f, h), f, true);
    for (size_t i = 0; i < gate.size(); ++i) gate[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
    const Matrix down = matmul(gate, t, f, w.get(p + "mlp.down_proj.weight", h, f), h, true);
    for (size_t i = 0; i < x.size(); ++i) x[i] += down[i];
  }
  const Matrix out = layer_norm(x, t, h, w.get("model.norm.weight", h), nullptr, c.norm_eps);
  const Matrix head = w.has("lm_head.weight") ? w.get("lm_head.weight", c.vocab, h) : embed;
  return matmul(out, t, h, head, c.vocab, true);
}

// transformers' T5ForConditionalGeneration (T5 v1.1): T5LayerNorm (RMS), unscaled scores plus
// the stack's relative_attention_bias of block 0 (bidirectional buckets in the encoder, looking
// back in the decoder), gated-gelu (gelu_new(wi_0 h) * wi_1 h), EncDecAttention over the
// encoder output, an untied lm_head without rescaling. Logits [Td, vocab].
Matrix t5_logits(const HfWeights& w, const model::ModelConfig& c, const std::vector<int32_t>& enc,
                 const std::vector<int32_t>& dec) {
  const int64_t h = c.hidden, nh = c.heads, d = c.head_dim, f = c.ffn, inner = nh * d;
  const Matrix shared = w.get("shared.weight", c.vocab, h);
  const auto embed = [&](const std::vector<int32_t>& ids) {
    Matrix x;
    for (int32_t id : ids) x.insert(x.end(), shared.begin() + id * h, shared.begin() + (id + 1) * h);
    return x;
  };
  const auto rms = [&](const Matrix& x, int64_t t, const std::string& name) {
    return layer_norm(x, t, h, w.get(name, h), nullptr, c.norm_eps);
  };
  // Scores q.k (unscaled) + bias; queries [tq, inner], keys/values [tk, inner].
  const auto attend = [&](const Matrix& q, const Matrix& k, const Matrix& v, int64_t tq, int64_t tk,
                          bool causal, const Matrix* table, bool bidirectional) {
    Matrix o(size_t(tq * inner), 0.0);
    for (int64_t hh = 0; hh < nh; ++hh)
      for (int64_t i = 0; i < tq; ++i) {
        std::vector<double> s(size_t(tk), -1e300);
        double max = -1e300, sum = 0;
        for (int64_t j = 0; j < (causal ? i + 1 : tk); ++j) {
          double dot = 0;
          for (int64_t e = 0; e < d; ++e) dot += q[size_t(i * inner + hh * d + e)] * k[size_t(j * inner + hh * d + e)];
          if (table) {
            const int64_t bucket = model::relative_bucket(j - i, bidirectional, c.relative_buckets,
                                                          c.relative_max_distance);
            dot += (*table)[size_t(bucket * nh + hh)];
          }
          s[size_t(j)] = dot;
          max = std::max(max, dot);
        }
        for (int64_t j = 0; j < (causal ? i + 1 : tk); ++j) sum += (s[size_t(j)] = std::exp(s[size_t(j)] - max));
        for (int64_t j = 0; j < (causal ? i + 1 : tk); ++j)
          for (int64_t e = 0; e < d; ++e)
            o[size_t(i * inner + hh * d + e)] += s[size_t(j)] / sum * v[size_t(j * inner + hh * d + e)];
      }
    return o;
  };
  const auto project = [&](const Matrix& x, int64_t t, const std::string& name, int64_t out, int64_t in) {
    return matmul(x, t, in, w.get(name, out, in), out, true);
  };
  const auto feed_forward = [&](Matrix& x, int64_t t, const std::string& p) {
    const Matrix n = rms(x, t, p + "layer_norm.weight");
    Matrix gate = project(n, t, p + "DenseReluDense.wi_0.weight", f, h);
    const Matrix up = project(n, t, p + "DenseReluDense.wi_1.weight", f, h);
    for (size_t i = 0; i < gate.size(); ++i) {
      const double g = gate[i];
      gate[i] = 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g))) * up[i];
    }
    const Matrix out = project(gate, t, p + "DenseReluDense.wo.weight", h, f);
    for (size_t i = 0; i < x.size(); ++i) x[i] += out[i];
  };
  const auto self_attention = [&](Matrix& x, int64_t t, const std::string& p, const Matrix& table,
                                  bool decoder) {
    const Matrix n = rms(x, t, p + "layer_norm.weight");
    const std::string a = p + "SelfAttention.";
    const Matrix o = attend(project(n, t, a + "q.weight", inner, h), project(n, t, a + "k.weight", inner, h),
                            project(n, t, a + "v.weight", inner, h), t, t, decoder, &table, !decoder);
    const Matrix out = project(o, t, a + "o.weight", h, inner);
    for (size_t i = 0; i < x.size(); ++i) x[i] += out[i];
  };
  const int64_t te = int64_t(enc.size()), td = int64_t(dec.size());
  Matrix x = embed(enc);
  const Matrix enc_table = w.get("encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
                                 c.relative_buckets, nh);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "encoder.block." + std::to_string(l) + ".layer.";
    self_attention(x, te, p + "0.", enc_table, false);
    feed_forward(x, te, p + "1.");
  }
  const Matrix memory = rms(x, te, "encoder.final_layer_norm.weight");
  Matrix y = embed(dec);
  const Matrix dec_table = w.get("decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
                                 c.relative_buckets, nh);
  for (int64_t l = 0; l < c.decoder_layers; ++l) {
    const std::string p = "decoder.block." + std::to_string(l) + ".layer.";
    self_attention(y, td, p + "0.", dec_table, true);
    const Matrix n = rms(y, td, p + "1.layer_norm.weight");
    const std::string a = p + "1.EncDecAttention.";
    const Matrix o = attend(project(n, td, a + "q.weight", inner, h), project(memory, te, a + "k.weight", inner, h),
                            project(memory, te, a + "v.weight", inner, h), td, te, false, nullptr, false);
    const Matrix out = project(o, td, a + "o.weight", h, inner);
    for (size_t i = 0; i < y.size(); ++i) y[i] += out[i];
    feed_forward(y, td, p + "2.");
  }
  const Matrix final = rms(y, td, "decoder.final_layer_norm.weight");
  return matmul(final, td, h, w.get("lm_head.weight", c.vocab, h), c.vocab, true);
}

// The engine's decoder logits [batch * Td, padded vocab] for encoder tokens `enc` (batch-major
// rows of te, sequence b's first key_lengths[b] real) and decoder tokens `dec` (rows of td), from
// the checkpoint imported from hf_dir.
std::vector<float> engine_t5_logits(const fs::path& hf_dir, const fs::path& save,
                                    const std::vector<int32_t>& enc, int64_t te,
                                    const std::vector<int64_t>& key_lengths,
                                    const std::vector<int32_t>& dec, int64_t td) {
  const HuggingFaceSource hf(hf_dir);
  const CheckpointReader ckpt(rewrite_checkpoint(hf, hf.meta(), {}, save));
  model::ModelConfig c = hf.config();
  tensor::CpuBackend b(1);
  model::LanguageModel m(b, c);
  for (const auto& p : m.parameters().all()) {
    const TensorInfo* t = ckpt.find(kModel, p->name);
    if (!t) throw std::runtime_error("checkpoint lacks " + p->name);
    std::vector<float> values(size_t(tensor::numel(p->global_shape)));
    ckpt.read_f32(*t, {{.row0 = 0, .rows = t->shape[0], .col0 = 0, .cols = t->shape.size() > 1 ? t->shape[1] : 1}},
                  values);
    tensor::write_floats(b, p->value, values);
  }
  const int64_t n = int64_t(key_lengths.size()), ne = n * te, nd = n * td;
  std::vector<int32_t> enc_positions(static_cast<size_t>(ne)), dec_positions(static_cast<size_t>(nd));
  for (int64_t i = 0; i < ne; ++i) enc_positions[size_t(i)] = int32_t(i % te);
  for (int64_t i = 0; i < nd; ++i) dec_positions[size_t(i)] = int32_t(i % td);
  const std::vector<float> mask(static_cast<size_t>(nd), 1.0f);
  const model::Batch batch{.batch = n,
                           .seq = te,
                           .tokens = tensor::from_ints(b, enc, {ne}),
                           .labels = tensor::from_ints(b, dec, {nd}),
                           .loss_mask = tensor::from_floats(b, mask, {nd}),
                           .positions = tensor::from_ints(b, enc_positions, {ne}),
                           .key_lengths = key_lengths,
                           .decoder_seq = td,
                           .decoder_tokens = tensor::from_ints(b, dec, {nd}),
                           .decoder_positions = tensor::from_ints(b, dec_positions, {nd})};
  model::HeadOutputs out{.want_logits = true};
  m.forward(model::Pass{.backend = b, .training = false}, batch, nullptr, &out);
  return tensor::to_floats(b, out.logits);
}

// The engine's logits [T, padded vocab] for `tokens`, from the checkpoint imported from hf_dir.
std::vector<float> engine_logits(const fs::path& hf_dir, const fs::path& save,
                                 const std::vector<int32_t>& tokens) {
  const HuggingFaceSource hf(hf_dir);
  const CheckpointReader ckpt(rewrite_checkpoint(hf, hf.meta(), {}, save));
  model::ModelConfig c = hf.config();
  c.seq_length = int64_t(tokens.size());
  tensor::CpuBackend b(1);
  model::LanguageModel m(b, c);
  for (const auto& p : m.parameters().all()) {
    const TensorInfo* t = ckpt.find(kModel, p->name);
    if (!t) throw std::runtime_error("checkpoint lacks " + p->name);
    std::vector<float> values(size_t(tensor::numel(p->global_shape)));
    ckpt.read_f32(*t,
                  {{.row0 = 0,
                    .rows = t->shape[0],
                    .col0 = 0,
                    .cols = t->shape.size() > 1 ? t->shape[1] : 1}},
                  values);
    tensor::write_floats(b, p->value, values);
  }
  const int64_t n = int64_t(tokens.size());
  std::vector<int32_t> positions(tokens.size());
  for (int64_t i = 0; i < n; ++i) positions[size_t(i)] = int32_t(i);
  std::vector<float> mask(tokens.size(), 1.0f);
  const model::Batch batch{.batch = 1,
                           .seq = n,
                           .tokens = tensor::from_ints(b, tokens, {n}),
                           .labels = tensor::from_ints(b, tokens, {n}),
                           .loss_mask = tensor::from_floats(b, mask, {n}),
                           .positions = tensor::from_ints(b, positions, {n})};
  model::HeadOutputs out{.want_logits = true};
  m.forward(model::Pass{.backend = b, .training = false}, batch, nullptr, &out);
  return tensor::to_floats(b, out.logits);
}

// f32 engine against an f64 reference over two layers: rounding moves logits by ~1e-6 of their
// scale; a wrong head order, rotary pairing, gate/up swap or transpose moves them by O(1).
void expect_same_function(const model::ModelConfig& c) {
  test_support::TempDir dir;
  const test_support::MemorySource src(c, tensor::DType::F32, 17);
  const fs::path ckpt = rewrite_checkpoint(src, test_support::hf_meta(c, tensor::DType::F32), {},
                                           dir.path() / "original");
  export_hugging_face(CheckpointReader(ckpt), c, dir.path() / "hf", std::nullopt);
  const std::vector<int32_t> tokens{3, 41, 7, 7, 0, 49, 12};
  const HfWeights w(dir.path() / "hf" / "model.safetensors");
  const Matrix want = c.position == recipe::PositionEmbedding::Learned ? gpt2_logits(w, c, tokens)
                                                                       : llama_logits(w, c, tokens);
  const std::vector<float> got = engine_logits(dir.path() / "hf", dir.path() / "imported", tokens);
  ASSERT_EQ(got.size(), tokens.size() * size_t(c.padded_vocab));
  double scale = 0;
  for (double v : want) scale = std::max(scale, std::abs(v));
  ASSERT_GT(scale, 1.0);
  for (size_t i = 0; i < tokens.size(); ++i) {
    for (int64_t j = 0; j < c.padded_vocab; ++j) {
      const double g = got[i * size_t(c.padded_vocab) + size_t(j)];
      // The padding columns come from zero rows: logit 0 exactly.
      const double expected = j < c.vocab ? want[i * size_t(c.vocab) + size_t(j)] : 0.0;
      ASSERT_NEAR(g, expected, 1e-5 * scale) << "token " << i << ", vocab " << j;
    }
  }
}

TEST(HuggingFaceEngine, Gpt2ImportComputesGpt2LMHeadModelsLogits) {
  expect_same_function(test_support::hf_tiny_gpt2());
}

TEST(HuggingFaceEngine, Gpt2WithExactGeluAndUntiedHeadToo) {
  model::ModelConfig c = test_support::hf_tiny_gpt2();
  c.activation = recipe::Activation::Gelu;
  c.tie_embeddings = false;
  expect_same_function(c);
}

TEST(HuggingFaceEngine, T5ExportAndImportComputeT5ForConditionalGenerationsLogits) {
  const model::ModelConfig c = test_support::hf_tiny_t5();
  test_support::TempDir dir;
  const test_support::MemorySource src(c, tensor::DType::F32, 19);
  const fs::path ckpt = rewrite_checkpoint(src, test_support::hf_meta(c, tensor::DType::F32), {},
                                           dir.path() / "original");
  export_hugging_face(CheckpointReader(ckpt), c, dir.path() / "hf", std::nullopt);
  const std::vector<int32_t> enc{3, 41, 7, 7, 0, 49, 12}, dec{0, 9, 30, 2, 44};
  const Matrix want = t5_logits(HfWeights(dir.path() / "hf" / "model.safetensors"), c, enc, dec);
  const std::vector<float> got = engine_t5_logits(dir.path() / "hf", dir.path() / "imported", enc,
                                                  int64_t(enc.size()), {int64_t(enc.size())}, dec,
                                                  int64_t(dec.size()));
  ASSERT_EQ(got.size(), dec.size() * size_t(c.padded_vocab));
  double scale = 0;
  for (double v : want) scale = std::max(scale, std::abs(v));
  ASSERT_GT(scale, 1.0);
  // As above: f32 rounding against f64 moves logits by ~1e-6 of their scale; a query left
  // unscaled, a key/value swap or a bucket off by one moves them by O(1).
  for (size_t i = 0; i < dec.size(); ++i)
    for (int64_t j = 0; j < c.padded_vocab; ++j) {
      const double expected = j < c.vocab ? want[i * size_t(c.vocab) + size_t(j)] : 0.0;
      ASSERT_NEAR(got[i * size_t(c.padded_vocab) + size_t(j)], expected, 1e-5 * scale)
          << "decoder token " << i << ", vocab " << j;
    }
}

// transformers itself, when scripts/bench/t5_hf.sh provides a model it made (with
// scripts/bench/peers/hf_t5.py) in MEGATRON_T5_TRANSFORMERS_DIR: the imported model's decoder
// logits against transformers' float64 ones on a padded batch. Skipped otherwise (transformers is
// not a test dependency).
TEST(HuggingFaceEngine, T5ImportComputesTransformersLogitsWhenGivenItsModel) {
  const char* dir_env = std::getenv("MEGATRON_T5_TRANSFORMERS_DIR");
  if (!dir_env || !*dir_env) GTEST_SKIP() << "set MEGATRON_T5_TRANSFORMERS_DIR (scripts/bench/t5_hf.sh)";
  const fs::path dir(dir_env);
  std::ifstream in(dir / "inputs.json");
  const nlohmann::json inputs = nlohmann::json::parse(in);
  std::vector<int32_t> enc, dec;
  for (const auto& row : inputs["encoder"]) for (int v : row) enc.push_back(v);
  for (const auto& row : inputs["decoder"]) for (int v : row) dec.push_back(v);
  const std::vector<int64_t> lengths = inputs["encoder_lengths"].get<std::vector<int64_t>>();
  const int64_t n = int64_t(lengths.size()), te = int64_t(enc.size()) / n, td = int64_t(dec.size()) / n;
  test_support::TempDir save;
  const HuggingFaceSource hf(dir / "model");
  const int64_t vocab = hf.config().vocab, padded = hf.config().padded_vocab;
  const std::vector<float> got = engine_t5_logits(dir / "model", save.path() / "imported", enc, te, lengths, dec, td);
  std::vector<double> want(size_t(n * td * vocab));
  std::ifstream(dir / "logits.f64", std::ios::binary).read(reinterpret_cast<char*>(want.data()),
                                                            std::streamsize(want.size() * sizeof(double)));
  double scale = 0, worst = 0;
  for (int64_t r = 0; r < n * td; ++r)
    for (int64_t j = 0; j < vocab; ++j) {
      const double w = want[size_t(r * vocab + j)];
      scale = std::max(scale, std::abs(w));
      worst = std::max(worst, std::abs(double(got[size_t(r * padded + j)]) - w));
    }
  std::cout << "T5 logits against transformers: max abs difference " << worst << ", max |logit| "
            << scale << ", relative " << worst / scale << "\n";
  RecordProperty("max_abs_difference", std::to_string(worst));
  // f32 through 2 x layers blocks against float64: ~1e-6 of the logits' scale per layer.
  EXPECT_LE(worst, 1e-4 * scale);
}

TEST(HuggingFaceEngine, LlamaImportWithGqaComputesLlamaForCausalLMsLogits) {
  expect_same_function(test_support::hf_tiny_llama());
}

// Llama 3.1's scaled frequencies, shrunk so that positions 0..6 see all three regimes: with head
// dim 8 and base 500 the wavelengths are 6.3, 30, 140 and 664 positions; an original context of
// 64 keeps the first (under 64 / 4), blends the second, and divides the last two by the factor.
TEST(HuggingFaceEngine, Llama31ScaledRotaryImportComputesLlamaForCausalLMsLogits) {
  model::ModelConfig c = test_support::hf_tiny_llama();
  c.heads = 3;
  c.groups = 1;
  c.head_dim = 8;
  c.rope_scaling = recipe::RopeScaling::Llama3;
  c.rope_scaling_factor = 8.0;
  c.rope_original_max_positions = 64;
  c.rope_low_freq_factor = 1.0;
  c.rope_high_freq_factor = 4.0;
  expect_same_function(c);
}

// YaRN (Qwen2.5's long context) shrunk as the Llama 3.1 case above: head dim 8, base 500, an
// original context of 4 positions, so that the 7 tokens cross the ramp; the cosines and sines
// scaled by 0.1 ln 4 + 1.
TEST(HuggingFaceEngine, YarnScaledRotaryImportComputesQwen2ForCausalLMsLogits) {
  model::ModelConfig c = test_support::hf_tiny_qwen2();
  c.heads = 3;
  c.groups = 1;
  c.head_dim = 8;
  c.rope_scaling = recipe::RopeScaling::Yarn;
  c.rope_scaling_factor = 4.0;
  c.rope_original_max_positions = 4;
  c.rope_beta_fast = 8.0;
  c.rope_attention_factor = model::yarn_attention_factor(4.0);
  expect_same_function(c);
}

// Within its window, Mistral's attention is full attention: the Llama reference holds.
TEST(HuggingFaceEngine, MistralImportWithinItsWindowComputesMistralForCausalLMsLogits) {
  model::ModelConfig c = test_support::hf_tiny_llama();
  c.sliding_window = 16;
  ASSERT_EQ(hf_architecture(c), HfArch::Mistral);
  expect_same_function(c);
}

TEST(HuggingFaceEngine, Qwen3ImportWithQkNormsComputesQwen3ForCausalLMsLogits) {
  const model::ModelConfig c = test_support::hf_tiny_qwen3();
  ASSERT_EQ(hf_architecture(c), HfArch::Qwen3);
  expect_same_function(c);
}

TEST(HuggingFaceEngine, Qwen2ImportWithQkvBiasesComputesQwen2ForCausalLMsLogits) {
  const model::ModelConfig c = test_support::hf_tiny_qwen2();
  ASSERT_EQ(hf_architecture(c), HfArch::Qwen2);
  expect_same_function(c);
}

}  // namespace
}  // namespace megatron::ckpt
