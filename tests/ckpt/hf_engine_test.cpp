// Does the engine compute the Hugging Face model's function? A Hugging Face directory is
// imported into a checkpoint and run through model::LanguageModel; its logits are compared with a
// float64 forward written here from transformers' GPT2LMHeadModel / LlamaForCausalLM code
// (Conv1D x W + b, c_attn's [q | k | v] thirds, gelu_new; rotate_half rotary, repeat_kv for
// grouped-query attention, silu(gate) * up), reading the Hugging Face tensors by their names.
#include <gtest/gtest.h>

#include <cmath>

#include "ckpt/checkpoint_reader.hpp"
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
void rotate(Matrix& x, int64_t t, int64_t heads, int64_t d, double theta) {
  for (int64_t p = 0; p < t; ++p)
    for (int64_t h = 0; h < heads; ++h) {
      double* r = &x[size_t(p * heads * d + h * d)];
      std::vector<double> out(static_cast<size_t>(d));
      for (int64_t c = 0; c < d; ++c) {
        const double angle = double(p) * std::pow(theta, -2.0 * double(c % (d / 2)) / double(d));
        const double rotated = c < d / 2 ? -r[c + d / 2] : r[c - d / 2];
        out[size_t(c)] = r[c] * std::cos(angle) + rotated * std::sin(angle);
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
    const Matrix v = matmul(a, t, h, w.get(p + "self_attn.v_proj.weight", g * d, h), g * d, true);
    rotate(q, t, nh, d, c.rotary_base);
    rotate(k, t, g, d, c.rotary_base);
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
  export_hugging_face(CheckpointReader(ckpt), dir.path() / "hf", std::nullopt);
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

TEST(HuggingFaceEngine, LlamaImportWithGqaComputesLlamaForCausalLMsLogits) {
  expect_same_function(test_support::hf_tiny_llama());
}

}  // namespace
}  // namespace megatron::ckpt
