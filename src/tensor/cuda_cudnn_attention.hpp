// cuDNN's fused attention (cudnn-frontend's sdpa and sdpa_backward graphs) for bf16 and f16 on
// the CUDA backend; graphs are built once per shape and options, then kept.
#pragma once

#include <memory>
#include <string>

#include "tensor/backend.hpp"

namespace megatron::tensor {

// Whether this build has cuDNN attention (the CUDA toolkit's cuDNN and cudnn-frontend's headers,
// which scripts/install-deps.sh fetches).
bool cudnn_attention_built();

// Whether cuDNN attention computes exactly what the flash kernels would for these arguments: a
// 16-bit dtype, head dim a multiple of 8 up to 128, causal and padding masks, dropout and
// grouped queries; no documents packed into a sequence (first_keys) and no score bias, which
// stay with the flash kernels.
bool cudnn_attention_supports(const AttentionShape& shape, const AttentionOptions& options,
                              DType dtype);

// Builds the forward (or backward) graph for a GPU of compute capability `sm_version` (90 for
// Hopper) without one and validates it: what CI checks for every shape the shipped recipes
// need. Returns "" when valid, else cuDNN's reason.
std::string validate_cudnn_attention(const AttentionShape& shape, const AttentionOptions& options,
                                     DType dtype, bool backward, int sm_version);

// The same for the cross-attention op (Backend::cross_attention_*): q and kv apart or fused, a
// score bias (T5's relative positions, with its gradient), key padding.
bool cudnn_cross_attention_supports(const CrossAttentionShape& shape,
                                    const AttentionOptions& options, DType dtype);
std::string validate_cudnn_cross_attention(const CrossAttentionShape& shape,
                                           const AttentionOptions& options, DType dtype,
                                           bool backward, int sm_version);

// The runtime: one cuDNN handle on the backend's stream and the built graphs. `backend` supplies
// device memory for workspaces and copies.
class CudnnAttention {
 public:
  CudnnAttention(Backend& backend, void* stream);
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  // The loaded cuDNN's version, "9.19.0".
  std::string version() const;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  // Whether cuDNN runs these arguments on this GPU: builds (once per shape and options) the
  // forward graph and the backward graph, so the two always run on the same side. A graph cuDNN
  // refuses to build leaves them to the flash kernels, with one warning on stderr.
  bool ready(const AttentionShape& shape, const AttentionOptions& options, DType dtype);

  bool ready(const CrossAttentionShape& shape, const AttentionOptions& options, DType dtype);
  // As Backend::cross_attention_forward / cross_attention_backward (dbias accumulates).
  void cross_forward(const Tensor& q, const Tensor& kv, const CrossAttentionShape& shape,
                     const AttentionOptions& options, Tensor& out, Tensor& lse);
  void cross_backward(const Tensor& q, const Tensor& kv, const Tensor& out, const Tensor& dout,
                      const Tensor& lse, const CrossAttentionShape& shape,
                      const AttentionOptions& options, Tensor& dq, Tensor& dkv, Tensor* dbias);

  // As Backend::attention_forward / attention_backward; lse is cuDNN's softmax statistics (the
  // natural-log log-sum-exp of each scaled score row), so a backward pairs with a cuDNN forward.
  void forward(const Tensor& qkv, const AttentionShape& shape, const AttentionOptions& options,
               Tensor& out, Tensor& lse);
  void backward(const Tensor& qkv, const Tensor& out, const Tensor& dout, const Tensor& lse,
                const AttentionShape& shape, const AttentionOptions& options, Tensor& dqkv);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace megatron::tensor
