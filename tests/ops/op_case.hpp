// One case of the op harness (docs/op-harness.md): a backend op or a model layer, built from a
// seed on any Backend, with its forward, its backward and the tolerances it is checked with.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/backend.hpp"

namespace megatron::ops_test {

// A tensor of a case with the name failures print ("x", "table", "layers.0.mlp.linear_fc1.weight").
struct Named {
  std::string name;
  tensor::Tensor tensor;
};

// A case's tensors on one backend, and what it computes on them. The loss every mode uses is
// L = sum_k sum_i w_k[i] * outputs()[k][i] for fixed output weights w (one f32 tensor of each
// output's shape), so backward(w) is the gradient of one scalar: w plays dL/d(output).
struct OpRun {
  // Every differentiable input and parameter, f32. The finite differences perturb them in place,
  // so forward and backward must read these very tensors (not copies made at build time).
  std::vector<Named> inputs;
  // The outputs, as new tensors or views the next call may overwrite: read them before calling
  // again. Must depend on `inputs` only (dropout, if any, with a fixed key).
  std::function<std::vector<tensor::Tensor>()> forward;
  // Runs the forward pass (keeping what the op keeps) and the backward pass with dL/d(output k)
  // = weights[k]; returns dL/d(inputs[i]) for every i, in that order. Parameter gradients that
  // the op accumulates are zeroed first, so the result is this one call's.
  std::function<std::vector<tensor::Tensor>(std::span<const tensor::Tensor> weights)> backward;
};

// How closely each mode must agree, and why; every number is stated with its reason in the case.
struct Tolerance {
  // Finite differences: |analytic - numeric| <= fd_atol + fd_rtol * max|gradient of the tensor|.
  double fd_rtol = 2e-3;
  double fd_atol = 1e-4;
  float fd_step = 1e-2f;  // central-difference step on every input element
  // CUDA against the CPU in f32 (TF32 off): |cuda - cpu| <= gpu_rtol * max(1, max|cpu|).
  double gpu_rtol = 1e-5;
  std::string_view why;
};

struct OpCase {
  std::string name;  // a GoogleTest and ctest name: letters, digits and underscores
  std::string what;  // one line: the op and its shapes
  Tolerance tolerance;
  // The case's inputs drawn from `seed` on `backend` (the same values on every backend). `scale`
  // multiplies the leading dimension (rows, sequences): 1 for the checks, more for timing.
  std::function<OpRun(tensor::Backend& backend, uint32_t seed, int64_t scale)> make;
};

// The micro-batch of the timing cases' realistic shapes: 8 sequences of 2048 tokens; and GPT-2's
// vocabulary of 50257 padded to a multiple of 128. megatron-gpu-bench's GEMMs use them too.
inline constexpr int64_t kTimingTokens = 8 * 2048;
inline constexpr int64_t kTimingVocab = 50304;

// A case of the timing mode alone: one call of a Backend op on the realistic bf16 shapes of a
// training step (the ones megatron-gpu-bench has always timed), with the bytes the call reads and
// writes, so that a time becomes GB/s. Far too large for finite differences, and of another type
// than OpCase, so the checks never see them.
struct TimingCase {
  std::string name;   // letters, digits and underscores: what --only and --list name
  std::string label;  // megatron-gpu-bench's row name ("layer_norm fwd"): earlier figures match
  std::string shape;  // "[16384,2048] bf16"
  std::string bytes_formula;  // what `bytes` counts ("x + y + gamma + beta + mean,rstd f32")
  double bytes = 0.0;         // read and written by one call
  // Allocates the op's tensors on `backend`, random normal from `seed` (the same values on every
  // backend), and returns one call of the op, which holds them. A backward row's call is the
  // backward alone: its forward runs once here, for what the backward reads.
  std::function<std::function<void()>(tensor::Backend& backend, uint32_t seed)> make;
};

// For an op whose backward needs nothing its forward keeps (a GEMM, an activation given its
// input): `run` with a backward that runs the forward first, as OpRun::backward must, so that
// the bench's forward-and-backward figure means the same for every case.
OpRun forward_first(OpRun run);

// GoogleTest names a failing case by this instead of dumping its bytes.
void PrintTo(const OpCase& c, std::ostream* os);

// Every case: the Backend's ops, then the model's layers.
std::vector<OpCase> all_op_cases();
std::vector<OpCase> backend_op_cases();  // tests/ops/backend_op_cases.cpp
std::vector<OpCase> layer_op_cases();    // tests/ops/layer_op_cases.cpp
// The timing-only cases, in megatron-gpu-bench's order: tests/ops/timing_op_cases.cpp.
std::vector<TimingCase> timing_op_cases();

// f32 values from N(0, scale^2) drawn from `seed` on the host, so every backend gets the same.
std::vector<float> normal_values(size_t n, uint32_t seed, float scale = 1.0f);
tensor::Tensor random_tensor(tensor::Backend& backend, const tensor::Shape& shape, uint32_t seed,
                             float scale = 1.0f);
// The output weights of a run: one random tensor per output, of its shape, from `seed`.
std::vector<tensor::Tensor> output_weights(tensor::Backend& backend,
                                           std::span<const tensor::Tensor> outputs, uint32_t seed);

}  // namespace megatron::ops_test
