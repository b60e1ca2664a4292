// Row-major GEMMs on the GPU through cuBLASLt: the layout mapping onto cuBLASLt's column-major
// matrices, the bias epilogue, and a per-shape cache of the algorithm the heuristic picks.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <tuple>

#include "tensor/tensor.hpp"

namespace megatron::tensor {

// The tanh-GeLU epilogues of an MLP (docs/cuda.md): GeluAuxBias writes gelu_tanh(product + bias)
// to c and the pre-activation to aux; DGeluBGrad writes product * gelu_tanh'(aux) to c and its
// column sums to the bias pointer.
enum class GemmEpilogue : uint8_t { None, GeluAuxBias, DGeluBGrad };

// One GEMM as cuBLASLt sees it, everything that decides the algorithm.
struct GemmKey {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  bool trans_a = false, trans_b = false;
  DType ab = DType::F32, c = DType::F32;
  bool accumulate = false;  // beta != 0
  bool bias = false;
  bool tf32 = false;
  int alignment = 16;       // the smallest alignment (bytes, up to 16) of a, b and c
  int bias_alignment = 16;  // the bias's (when bias): its own, since the heuristic reads it apart
  GemmEpilogue epilogue = GemmEpilogue::None;  // with an aux matrix of c's shape and dtype
  auto tie() const {
    return std::tie(m, n, k, batch, trans_a, trans_b, ab, c, accumulate, bias, tf32, alignment,
                    bias_alignment, epilogue);
  }
  bool operator<(const GemmKey& other) const { return tie() < other.tie(); }
};

class CudaGemm {
 public:
  // workspace: device memory of workspace_bytes for cuBLASLt, owned by the caller.
  CudaGemm(void* workspace, size_t workspace_bytes);
  ~CudaGemm();
  CudaGemm(const CudaGemm&) = delete;
  CudaGemm& operator=(const CudaGemm&) = delete;

  // c [batch, m, n] = alpha * op(a) @ op(b) + beta * c (+ bias[n] when bias is defined).
  // With an epilogue, `aux` is its [m, n] matrix (16-byte aligned, n a multiple of 8) and `bias`
  // the bias (GeluAuxBias) or where the bias gradient goes (DGeluBGrad).
  void run(cudaStream_t stream, const GemmKey& key, const void* a, const void* b, void* c,
           const void* bias, float alpha, float beta, const void* aux = nullptr);
  size_t cached_algorithms() const { return plans_.size(); }

 private:
  struct Plan;
  const Plan& plan_for(const GemmKey& key);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_;
  size_t workspace_bytes_;
  std::map<GemmKey, Plan*> plans_;
};

}  // namespace megatron::tensor
