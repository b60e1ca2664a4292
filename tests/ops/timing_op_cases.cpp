// The op harness's timing-only cases: the memory-bound Backend ops on the shapes of a training step
// of gpt-1.3b, llama-7b and gpt-125m (T = 8 x 2048 tokens), bf16 activations, f32 optimizer state.
// The shapes, dtypes and byte formulas are megatron-gpu-bench's kernel rows unchanged, so that GB/s
// figures from before the rows moved here still compare. Bytes: e2 per bf16, e4 per f32 or i32.
#include <memory>
#include <random>
#include <span>
#include <unordered_set>
#include <vector>

#include "ops/op_case.hpp"
#include "tensor/host_io.hpp"

namespace megatron::ops_test {
namespace {

using tensor::Backend;
using tensor::DType;
using tensor::Shape;
using tensor::Tensor;
using Call = std::function<void()>;

constexpr int64_t T = kTimingTokens;
constexpr int64_t kVocab = kTimingVocab;
constexpr int64_t kGpt125mParams = 125262336;
constexpr double e2 = 2.0, e4 = 4.0;  // bytes of bf16, of f32 and i32

// The inputs of one case: every tensor its own Philox stream of `seed`, drawn on the backend (the
// same values on the CPU and the GPU, and fast for a gigabyte of logits).
class Inputs {
 public:
  Inputs(Backend& be, uint32_t seed) : be_(be), seed_(seed) {}
  Tensor random(const Shape& shape, DType dtype, float std = 1.0f) {
    Tensor x = be_.empty(shape, dtype);
    be_.normal(x, 0.0f, std, {.seed = seed_, .stream = ++stream_});
    return x;
  }
  Tensor zeros(const Shape& shape, DType dtype) { return be_.zeros(shape, dtype); }
  Tensor empty(const Shape& shape, DType dtype) { return be_.empty(shape, dtype); }
  Tensor ids(int64_t n, int64_t range) { return tensor::from_ints(be_, host_ids(n, range), {n}); }

  // n i32 ids uniform in [0, range), the same ones every time for the same n and range: the
  // embedding backward's byte count depends on how many distinct rows they touch.
  static std::vector<int32_t> host_ids(int64_t n, int64_t range) {
    std::mt19937 rng(uint32_t(n + range));
    std::uniform_int_distribution<int32_t> pick(0, int32_t(range - 1));
    std::vector<int32_t> host(size_t(n), 0);
    for (int32_t& v : host) v = pick(rng);
    return host;
  }

 private:
  Backend& be_;
  uint64_t seed_;
  uint64_t stream_ = 0;
};

std::string shape_text(const Shape& s, DType dtype) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "] " + std::string(tensor::name(dtype));
}

TimingCase timing(std::string name, std::string label, std::string shape, std::string formula,
                  double bytes, std::function<Call(Backend&, Inputs&)> make) {
  return {.name = std::move(name),
          .label = std::move(label),
          .shape = std::move(shape),
          .bytes_formula = std::move(formula),
          .bytes = bytes,
          .make = [make = std::move(make)](Backend& be, uint32_t seed) {
            Inputs in(be, seed);
            return make(be, in);
          }};
}

tensor::AdamWStep adamw_step() {
  tensor::AdamWStep step;
  step.lr = 1e-4f;
  step.beta1 = 0.9f;
  step.beta2 = 0.95f;
  step.eps = 1e-8f;
  step.weight_decay = 0.1f;
  step.step = 10;
  step.grad_scale = 1.0f;
  return step;
}

// gpt-125m's parameters, one tensor each: word and position embeddings, 12 blocks of LayerNorm,
// QKV, projection, LayerNorm, fc1, fc2 (with biases), the final LayerNorm.
std::vector<Shape> gpt125m_parameter_shapes() {
  const int64_t h = 768, f = 3072;
  std::vector<Shape> shapes = {{kVocab, h}, {2048, h}};
  for (int layer = 0; layer < 12; ++layer) {
    for (const Shape& s : std::vector<Shape>{
             {h}, {h}, {3 * h, h}, {3 * h}, {h, h}, {h}, {h}, {h}, {f, h}, {f}, {h, f}, {h}}) {
      shapes.push_back(s);
    }
  }
  shapes.push_back({h});
  shapes.push_back({h});
  return shapes;
}

// LayerNorm at gpt-1.3b's width; RMSNorm at llama-7b's.
void norm_cases(std::vector<TimingCase>& cases) {
  {
    const int64_t H = 2048;
    const double act = double(T) * H * e2;
    cases.push_back(timing("layer_norm_fwd", "layer_norm fwd", shape_text({T, H}, DType::Bf16),
                           "x + y + gamma + beta + mean,rstd f32",
                           2 * act + 2 * H * e2 + 2 * T * e4, [=](Backend& be, Inputs& in) -> Call {
                             Tensor x = in.random({T, H}, DType::Bf16),
                                    gamma = in.random({H}, DType::Bf16),
                                    beta = in.random({H}, DType::Bf16),
                                    y = in.empty({T, H}, DType::Bf16),
                                    mean = in.empty({T}, DType::F32),
                                    rstd = in.empty({T}, DType::F32);
                             return [&be, x, gamma, beta, y, mean, rstd]() mutable {
                               be.layer_norm_forward(x, gamma, beta, 1e-5f, y, mean, rstd);
                             };
                           }));
    cases.push_back(
        timing("layer_norm_bwd", "layer_norm bwd", shape_text({T, H}, DType::Bf16),
               "dy + x + dx + gamma + mean,rstd + 2x dgamma,dbeta f32",
               3 * act + H * e2 + 2 * T * e4 + 4 * H * e4, [=](Backend& be, Inputs& in) -> Call {
                 Tensor x = in.random({T, H}, DType::Bf16), dy = in.random({T, H}, DType::Bf16),
                        gamma = in.random({H}, DType::Bf16), beta = in.random({H}, DType::Bf16),
                        y = in.empty({T, H}, DType::Bf16), dx = in.empty({T, H}, DType::Bf16),
                        mean = in.empty({T}, DType::F32), rstd = in.empty({T}, DType::F32),
                        dgamma = in.zeros({H}, DType::F32), dbeta = in.zeros({H}, DType::F32);
                 be.layer_norm_forward(x, gamma, beta, 1e-5f, y, mean, rstd);
                 return [&be, dy, x, gamma, mean, rstd, dx, dgamma, dbeta]() mutable {
                   be.layer_norm_backward(dy, x, gamma, mean, rstd, dx, dgamma, dbeta);
                 };
               }));
  }
  {
    const int64_t H = 4096;
    const double act = double(T) * H * e2;
    cases.push_back(timing(
        "rms_norm_fwd", "rms_norm fwd", shape_text({T, H}, DType::Bf16), "x + y + gamma + rstd f32",
        2 * act + H * e2 + T * e4, [=](Backend& be, Inputs& in) -> Call {
          Tensor x = in.random({T, H}, DType::Bf16), gamma = in.random({H}, DType::Bf16),
                 y = in.empty({T, H}, DType::Bf16), rstd = in.empty({T}, DType::F32);
          return
              [&be, x, gamma, y, rstd]() mutable { be.rms_norm_forward(x, gamma, 1e-5f, y, rstd); };
        }));
    cases.push_back(
        timing("rms_norm_bwd", "rms_norm bwd", shape_text({T, H}, DType::Bf16),
               "dy + x + dx + gamma + rstd f32 + 2x dgamma f32",
               3 * act + H * e2 + T * e4 + 2 * H * e4, [=](Backend& be, Inputs& in) -> Call {
                 Tensor x = in.random({T, H}, DType::Bf16), dy = in.random({T, H}, DType::Bf16),
                        gamma = in.random({H}, DType::Bf16), y = in.empty({T, H}, DType::Bf16),
                        dx = in.empty({T, H}, DType::Bf16), rstd = in.empty({T}, DType::F32),
                        dgamma = in.zeros({H}, DType::F32);
                 be.rms_norm_forward(x, gamma, 1e-5f, y, rstd);
                 return [&be, dy, x, gamma, rstd, dx, dgamma]() mutable {
                   be.rms_norm_backward(dy, x, gamma, rstd, dx, dgamma);
                 };
               }));
  }
}

// GeLU on gpt-1.3b's fc1 output; SwiGLU at llama-7b's FFN width; the biases of gpt-1.3b's fc1.
void activation_cases(std::vector<TimingCase>& cases) {
  {
    const int64_t F = 8192;
    const double act = double(T) * F * e2;
    cases.push_back(
        timing("gelu_fwd", "gelu fwd", shape_text({T, F}, DType::Bf16), "x + y", 2 * act,
               [=](Backend& be, Inputs& in) -> Call {
                 Tensor x = in.random({T, F}, DType::Bf16), y = in.empty({T, F}, DType::Bf16);
                 return [&be, x, y]() mutable { be.gelu_forward(x, y, false); };
               }));
    cases.push_back(timing("gelu_bwd", "gelu bwd", shape_text({T, F}, DType::Bf16), "dy + x + dx",
                           3 * act, [=](Backend& be, Inputs& in) -> Call {
                             Tensor x = in.random({T, F}, DType::Bf16),
                                    dy = in.random({T, F}, DType::Bf16),
                                    dx = in.empty({T, F}, DType::Bf16);
                             return
                                 [&be, dy, x, dx]() mutable { be.gelu_backward(dy, x, dx, false); };
                           }));
  }
  {
    const int64_t F = 11008;
    const double half = double(T) * F * e2;
    cases.push_back(
        timing("swiglu_fwd", "swiglu fwd", shape_text({T, 2 * F}, DType::Bf16),
               "x [T,2F] + y [T,F]", 3 * half, [=](Backend& be, Inputs& in) -> Call {
                 Tensor x = in.random({T, 2 * F}, DType::Bf16), y = in.empty({T, F}, DType::Bf16);
                 return [&be, x, y]() mutable { be.swiglu_forward(x, y); };
               }));
    cases.push_back(
        timing("swiglu_bwd", "swiglu bwd", shape_text({T, 2 * F}, DType::Bf16),
               "dy [T,F] + x + dx [T,2F]", 5 * half, [=](Backend& be, Inputs& in) -> Call {
                 Tensor x = in.random({T, 2 * F}, DType::Bf16), dy = in.random({T, F}, DType::Bf16),
                        dx = in.empty({T, 2 * F}, DType::Bf16);
                 return [&be, dy, x, dx]() mutable { be.swiglu_backward(dy, x, dx); };
               }));
  }
  {
    const int64_t F = 8192;
    const double act = double(T) * F * e2;
    cases.push_back(
        timing("bias_add", "bias_add", shape_text({T, F}, DType::Bf16), "x read + x written + bias",
               2 * act + F * e2, [=](Backend& be, Inputs& in) -> Call {
                 Tensor x = in.random({T, F}, DType::Bf16), bias = in.random({F}, DType::Bf16);
                 return [&be, x, bias]() mutable { be.bias_add(x, bias); };
               }));
    cases.push_back(
        timing("bias_grad", "bias_grad", shape_text({T, F}, DType::Bf16), "dy + 2x dbias f32",
               act + 2 * F * e4, [=](Backend& be, Inputs& in) -> Call {
                 Tensor dy = in.random({T, F}, DType::Bf16), dbias = in.zeros({F}, DType::F32);
                 return [&be, dy, dbias]() mutable { be.bias_grad(dy, dbias); };
               }));
  }
}

// gpt-1.3b's residual connection with hidden dropout 0.1; the master weights' bf16 copy.
void elementwise_cases(std::vector<TimingCase>& cases) {
  const int64_t H = 2048;
  const double act = double(T) * H * e2;
  cases.push_back(timing("dropout_add_fwd", "dropout_add p=0.1", shape_text({T, H}, DType::Bf16),
                         "x + residual + out", 3 * act, [=](Backend& be, Inputs& in) -> Call {
                           Tensor x = in.random({T, H}, DType::Bf16),
                                  res = in.random({T, H}, DType::Bf16),
                                  out = in.empty({T, H}, DType::Bf16);
                           return [&be, x, res, out]() mutable {
                             be.dropout_add(x, res, out, 0.1f, {.seed = 7, .stream = 3});
                           };
                         }));
  const int64_t n = kGpt125mParams;
  cases.push_back(timing("copy_f32_bf16", "copy f32->bf16", shape_text({n}, DType::F32),
                         "src f32 + dst bf16", n * (e4 + e2), [=](Backend& be, Inputs& in) -> Call {
                           Tensor src = in.random({n}, DType::F32),
                                  dst = in.empty({n}, DType::Bf16);
                           return [&be, src, dst]() mutable { be.copy(src, dst); };
                         }));
}

// The loss over the padded GPT-2 vocabulary; gpt-1.3b's word embedding; RoPE on llama-7b's q, k.
void model_io_cases(std::vector<TimingCase>& cases) {
  const double logits = double(T) * kVocab * e2;
  cases.push_back(
      timing("cross_entropy_fwd", "cross_entropy fwd", shape_text({T, kVocab}, DType::Bf16),
             "logits + targets i32 + loss,lse f32", logits + 3 * T * e4,
             [=](Backend& be, Inputs& in) -> Call {
               Tensor x = in.random({T, kVocab}, DType::Bf16), targets = in.ids(T, kVocab),
                      loss = in.empty({T}, DType::F32), lse = in.empty({T}, DType::F32);
               return [&be, x, targets, loss, lse]() mutable {
                 be.cross_entropy_forward(x, targets, loss, lse, tensor::VocabShard{});
               };
             }));
  cases.push_back(
      timing("cross_entropy_bwd", "cross_entropy bwd", shape_text({T, kVocab}, DType::Bf16),
             "logits + targets,lse,dloss + dlogits", 2 * logits + 3 * T * e4,
             [=](Backend& be, Inputs& in) -> Call {
               Tensor x = in.random({T, kVocab}, DType::Bf16), targets = in.ids(T, kVocab),
                      loss = in.empty({T}, DType::F32), lse = in.empty({T}, DType::F32),
                      dloss = in.empty({T}, DType::F32), dx = in.empty({T, kVocab}, DType::Bf16);
               be.fill(dloss, 1.0 / double(T));
               be.cross_entropy_forward(x, targets, loss, lse, tensor::VocabShard{});
               return [&be, x, targets, lse, dloss, dx]() mutable {
                 be.cross_entropy_backward(x, targets, lse, dloss, dx, tensor::VocabShard{});
               };
             }));

  const int64_t H = 2048;
  const double act = double(T) * H * e2;
  cases.push_back(timing(
      "embedding_fwd", "embedding fwd", shape_text({kVocab, H}, DType::Bf16),
      "ids + gathered rows + out", T * e4 + 2 * act, [=](Backend& be, Inputs& in) -> Call {
        Tensor ids = in.ids(T, kVocab), table = in.random({kVocab, H}, DType::Bf16),
               out = in.empty({T, H}, DType::Bf16);
        return
            [&be, ids, table, out]() mutable { be.embedding_forward(ids, table, out, 0, false); };
      }));
  const std::vector<int32_t> ids = Inputs::host_ids(T, kVocab);  // the ids of the case below
  const auto distinct = int64_t(std::unordered_set<int32_t>(ids.begin(), ids.end()).size());
  cases.push_back(timing(
      "embedding_bwd", "embedding bwd", shape_text({kVocab, H}, DType::F32),
      "ids + dout + 2x touched dtable rows f32 (" + std::to_string(distinct) + ")",
      T * e4 + act + 2.0 * double(distinct) * H * e4, [=](Backend& be, Inputs& in) -> Call {
        Tensor ids = in.ids(T, kVocab), dout = in.random({T, H}, DType::Bf16),
               dtable = in.zeros({kVocab, H}, DType::F32);
        return [&be, ids, dout, dtable]() mutable { be.embedding_backward(ids, dout, dtable, 0); };
      }));

  tensor::AttentionShape s;
  s.batch = 8;
  s.seq = 2048;
  s.heads = 32;
  s.groups = 32;
  s.head_dim = 128;
  const Shape qkv_shape{s.batch * s.seq, s.qkv_width()};
  cases.push_back(timing("rotary_fwd", "rotary", shape_text(qkv_shape, DType::Bf16),
                         "q,k read + written",
                         2.0 * double(T) * double(s.heads + s.groups) * double(s.head_dim) * e2,
                         [=](Backend& be, Inputs& in) -> Call {
                           Tensor qkv = in.random(qkv_shape, DType::Bf16);
                           tensor::RotaryOptions ro;
                           ro.rotary_dim = s.head_dim;
                           return [&be, qkv, s, ro]() mutable { be.rotary(qkv, s, ro, false); };
                         }));
}

// The optimizer and the gradient norm over gpt-125m's parameters: one flat tensor, and the
// model's 148 tensors in one multi-tensor call.
void optimizer_cases(std::vector<TimingCase>& cases) {
  const int64_t n = kGpt125mParams;
  cases.push_back(timing("adamw_update", "adamw_update", shape_text({n}, DType::F32),
                         "master,grad,m,v read + master,m,v written (f32)", 7.0 * double(n) * e4,
                         [=](Backend& be, Inputs& in) -> Call {
                           Tensor master = in.random({n}, DType::F32, 0.02f),
                                  grad = in.random({n}, DType::F32, 1e-3f),
                                  m = in.zeros({n}, DType::F32), v = in.zeros({n}, DType::F32);
                           return [&be, master, grad, m, v]() mutable {
                             be.adamw_update(master, grad, m, v, adamw_step());
                           };
                         }));
  const std::vector<Shape> shapes = gpt125m_parameter_shapes();
  const std::string many_shape =
      std::to_string(shapes.size()) + " tensors, " + std::to_string(n) + " f32";
  cases.push_back(timing(
      "adamw_update_many", "adamw_update_many", many_shape, "adamw_update's + bf16 value written",
      double(n) * (7 * e4 + e2), [=](Backend& be, Inputs& in) -> Call {
        auto params = std::make_shared<std::vector<tensor::AdamWParam>>();
        for (const Shape& shape : shapes) {
          tensor::AdamWParam p;
          p.master = in.random(shape, DType::F32, 0.02f);
          p.grad = in.random(shape, DType::F32, 1e-3f);
          p.m = in.zeros(shape, DType::F32);
          p.v = in.zeros(shape, DType::F32);
          p.value = in.empty(shape, DType::Bf16);
          p.weight_decay = shape.size() > 1 ? 0.1f : 0.0f;
          params->push_back(p);
        }
        return [&be, params]() {
          be.adamw_update_many(std::span<const tensor::AdamWParam>(*params), adamw_step());
        };
      }));
  // The sums go to a sink the call keeps, so that the result is used.
  cases.push_back(timing("sum_squares", "sum_squares", shape_text({n}, DType::F32),
                         "x f32 (includes the host round trip)", double(n) * e4,
                         [=](Backend& be, Inputs& in) -> Call {
                           Tensor x = in.random({n}, DType::F32, 1e-3f);
                           auto sink = std::make_shared<double>(0.0);
                           return [&be, x, sink]() { *sink += be.sum_squares(x); };
                         }));
  cases.push_back(timing(
      "sum_squares_many", "sum_squares_many", many_shape, "x f32 (includes the host round trip)",
      double(n) * e4, [=](Backend& be, Inputs& in) -> Call {
        auto xs = std::make_shared<std::vector<Tensor>>();
        for (const Shape& shape : shapes) xs->push_back(in.random(shape, DType::F32, 1e-3f));
        auto sink = std::make_shared<double>(0.0);
        return [&be, xs, sink]() { *sink += be.sum_squares_many(std::span<const Tensor>(*xs)); };
      }));
}

}  // namespace

std::vector<TimingCase> timing_op_cases() {
  std::vector<TimingCase> cases;
  norm_cases(cases);
  activation_cases(cases);
  elementwise_cases(cases);
  model_io_cases(cases);
  optimizer_cases(cases);
  return cases;
}

}  // namespace megatron::ops_test
