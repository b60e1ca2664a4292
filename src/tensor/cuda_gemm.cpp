#include "tensor/cuda_gemm.hpp"

#include <memory>
#include <stdexcept>
#include <string>

namespace megatron::tensor {
namespace {

void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(std::string("cuda backend: gemm: ") + what + ": " +
                             cublasLtGetStatusString(status));
  }
}

cudaDataType_t cuda_type(DType dtype) {
  switch (dtype) {
    case DType::F32: return CUDA_R_32F;
    case DType::Bf16: return CUDA_R_16BF;
    case DType::F16: return CUDA_R_16F;
    default: break;
  }
  throw std::logic_error("cuda backend: gemm: expected a float dtype, got " +
                         std::string(name(dtype)));
}

template <typename T>
void set(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute, const T& value) {
  check(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof value), "set attribute");
}

}  // namespace

// The descriptors and the chosen algorithm of one GemmKey, made once and reused.
struct CudaGemm::Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, out = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (out) cublasLtMatrixLayoutDestroy(out);
    if (second) cublasLtMatrixLayoutDestroy(second);
    if (first) cublasLtMatrixLayoutDestroy(first);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

CudaGemm::CudaGemm(void* workspace, size_t workspace_bytes)
    : workspace_(workspace), workspace_bytes_(workspace_bytes) {
  check(cublasLtCreate(&handle_), "cublasLtCreate");
}

CudaGemm::~CudaGemm() {
  for (auto& [key, plan] : plans_) delete plan;
  if (handle_) cublasLtDestroy(handle_);
}

// cuBLASLt is column-major, and a row-major [r, c] matrix is the column-major [c, r] matrix
// of its transpose. So the row-major C = op(A) op(B) is computed as the column-major
// C^T = op(B)^T op(A)^T: cuBLASLt's first operand is B's storage, its second A's, and each
// keeps its own transpose flag.
const CudaGemm::Plan& CudaGemm::plan_for(const GemmKey& key) {
  if (auto it = plans_.find(key); it != plans_.end()) return *it->second;
  auto plan = std::make_unique<Plan>();
  const cublasComputeType_t compute =
      key.ab == DType::F32 && key.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  check(cublasLtMatmulDescCreate(&plan->op, compute, CUDA_R_32F), "descriptor");
  const cublasOperation_t op_first = key.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = key.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  set(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, op_first);
  set(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, op_second);
  if (key.epilogue != GemmEpilogue::None) {
    // As for the bias below: the algorithm is chosen for 16-byte aligned bias and aux pointers
    // (run() requires them) and run() sets the real ones.
    set(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE,
        key.epilogue == GemmEpilogue::GeluAuxBias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                                                  : CUBLASLT_EPILOGUE_DGELU_BGRAD);
    set(plan->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, cuda_type(key.c));
    const void* aligned = reinterpret_cast<const void*>(uintptr_t(16));
    set(plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, aligned);
    set(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aligned);
    // aux is c's column-major twin: key.n rows (the row-major columns), leading dimension n.
    const int64_t aux_ld = key.n;
    set(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, aux_ld);
    set(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, cuda_type(key.c));
  } else if (key.bias) {
    set(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
    set(plan->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, cuda_type(key.c));
    // The heuristic infers the bias's alignment from the bias pointer (a null one reads as
    // perfectly aligned) and never reads through it. So the algorithm is chosen for an address
    // of exactly the key's bias alignment, and every bias of this key, which has that alignment,
    // suits it; run() sets the real pointer.
    const void* aligned_like_bias = reinterpret_cast<const void*>(uintptr_t(key.bias_alignment));
    set(plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, aligned_like_bias);
  }
  const cudaDataType_t ab = cuda_type(key.ab), c = cuda_type(key.c);
  // B's storage: [k, n] row-major = [n, k] column-major (ld n); transposed, [n, k] = [k, n].
  const uint64_t first_rows = uint64_t(key.trans_b ? key.k : key.n);
  const uint64_t first_cols = uint64_t(key.trans_b ? key.n : key.k);
  const uint64_t second_rows = uint64_t(key.trans_a ? key.m : key.k);
  const uint64_t second_cols = uint64_t(key.trans_a ? key.k : key.m);
  check(cublasLtMatrixLayoutCreate(&plan->first, ab, first_rows, first_cols, int64_t(first_rows)),
        "layout");
  check(cublasLtMatrixLayoutCreate(&plan->second, ab, second_rows, second_cols,
                                   int64_t(second_rows)),
        "layout");
  check(cublasLtMatrixLayoutCreate(&plan->out, c, uint64_t(key.n), uint64_t(key.m), key.n),
        "layout");
  if (key.batch > 1) {
    const int32_t count = int32_t(key.batch);
    const int64_t strides[3] = {key.n * key.k, key.k * key.m, key.n * key.m};
    cublasLtMatrixLayout_t layouts[3] = {plan->first, plan->second, plan->out};
    for (int i = 0; i < 3; ++i) {
      check(cublasLtMatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                             &count, sizeof count),
            "batch count");
      check(cublasLtMatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                             &strides[i], sizeof strides[i]),
            "batch stride");
    }
  }

  cublasLtMatmulPreference_t preference = nullptr;
  check(cublasLtMatmulPreferenceCreate(&preference), "preference");
  const uint64_t workspace = workspace_bytes_;
  const uint32_t alignment = uint32_t(key.alignment);
  cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                       &workspace, sizeof workspace);
  for (auto attribute : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                         CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                         CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                         CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
    cublasLtMatmulPreferenceSetAttribute(preference, attribute, &alignment, sizeof alignment);
  }
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(handle_, plan->op, plan->first, plan->second, plan->out,
                                     plan->out, preference, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(preference);
  if (status != CUBLAS_STATUS_SUCCESS || found == 0) {
    throw std::runtime_error("cuda backend: gemm: cuBLASLt has no algorithm for [" +
                             std::to_string(key.m) + " x " + std::to_string(key.k) + "] @ [" +
                             std::to_string(key.k) + " x " + std::to_string(key.n) + "] in " +
                             std::string(name(key.ab)) + " -> " + std::string(name(key.c)));
  }
  plan->algo = result.algo;
  Plan* raw = plan.release();
  plans_.emplace(key, raw);
  return *raw;
}

void CudaGemm::run(cudaStream_t stream, const GemmKey& key, const void* a, const void* b,
                   void* c, const void* bias, float alpha, float beta, const void* aux) {
  const Plan& plan = plan_for(key);
  if (key.epilogue != GemmEpilogue::None) {
    check(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux,
                                         sizeof aux),
          "aux pointer");
  }
  if (key.bias || key.epilogue != GemmEpilogue::None) {
    check(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                         sizeof bias),
          "bias pointer");
  }
  check(cublasLtMatmul(handle_, plan.op, &alpha, b, plan.first, a, plan.second, &beta, c,
                       plan.out, c, plan.out, &plan.algo, workspace_, workspace_bytes_, stream),
        "cublasLtMatmul");
}

}  // namespace megatron::tensor
