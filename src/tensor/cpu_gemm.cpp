// CpuBackend: GEMM through OpenBLAS sgemm; 16-bit operands are widened to f32 panel by panel.
#include <cblas.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tensor/cpu_backend.hpp"
#include "tensor/cpu_dispatch.hpp"
#include "tensor/cpu_f32.hpp"

namespace megatron::tensor {
namespace {

// op(a) is [m, k], op(b) is [k, n], c is [m, n]; a and b are stored row-major as given.
struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
};

GemmShape gemm_shape(const Shape& a, bool trans_a, const Shape& b, bool trans_b, const Shape& c,
                     const char* op) {
  const GemmShape s{trans_a ? a[1] : a[0], trans_b ? b[0] : b[1], trans_a ? a[0] : a[1]};
  const int64_t k_of_b = trans_b ? b[1] : b[0];
  if (k_of_b != s.k || c[0] != s.m || c[1] != s.n) {
    cpu::fail(op, std::string("shapes ") + (trans_a ? "a^T " : "a ") + to_string(a) +
                      (trans_b ? ", b^T " : ", b ") + to_string(b) + ", c " + to_string(c) +
                      " do not chain");
  }
  // sgemm takes int dimensions.
  constexpr int64_t kMaxDim = 0x7FFFFFFF;
  cpu::require(
      s.m <= kMaxDim && s.n <= kMaxDim && s.k <= kMaxDim && a[1] <= kMaxDim && b[1] <= kMaxDim, op,
      "dimensions beyond sgemm's int range");
  return s;
}

void check_dtypes(const Tensor& a, const Tensor& b, const Tensor& c, const char* op) {
  cpu::floats(a, op);
  cpu::floats(b, op);
  cpu::floats(c, op);
  cpu::require(a.dtype() == b.dtype() && (c.dtype() == DType::F32 || c.dtype() == a.dtype()), op,
               "dtypes a " + std::string(name(a.dtype())) + ", b " + std::string(name(b.dtype())) +
                   ", c " + std::string(name(c.dtype())) +
                   ": a and b must match and c be f32 or theirs");
}

CBLAS_TRANSPOSE blas_op(bool trans) { return trans ? CblasTrans : CblasNoTrans; }

// Rows [r0, r0 + rows) and columns [c0, c0 + cols) of a 16-bit row-major matrix with `ld`
// columns, widened into dense f32 [rows, cols].
void widen(cpu::Floats x, int64_t ld, int64_t r0, int64_t rows, int64_t c0, int64_t cols,
           float* out) {
#pragma omp parallel for schedule(static) if (rows * cols >= cpu::kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    float* dst = out + r * cols;
    const float* src = cpu::load_f32(x, (r0 + r) * ld + c0, cols, dst);
    if (src != dst) std::copy(src, src + cols, dst);
  }
}

// Floats of widened operand panels and of an f32 block of c that one call may hold. Panels are
// bounded so that a bf16 GEMM against a large (e.g. vocabulary) matrix does not need an f32
// copy of it; each panel is still far larger than sgemm's own blocking.
constexpr int64_t kPanelFloats = int64_t{8} << 20;
constexpr int64_t kBlockFloats = int64_t{8} << 20;

thread_local std::vector<float> t_panel_a, t_panel_b, t_block_c;

float* scratch(std::vector<float>& buffer, int64_t n) {
  if (buffer.size() < static_cast<size_t>(n)) buffer.resize(static_cast<size_t>(n));
  return buffer.data();
}

// Up to this many rows of a against b^T take gemm_few_rows.
constexpr int64_t kFewRows = 16;

// c = alpha a b^T + beta c for a few rows of a (generation: a batch's decode step, a short
// prefill) against b [n, k] (a linear layer's weight). sgemm would pack all of b first, and a
// 16-bit b would be widened into f32 panels: memory traffic several times the weight's, to use
// each weight a few times. Here each row of b is read (and converted) once, in L1, and dotted
// with every row of a. Each c[i, j] is one thread's dot product in a fixed order:
// the same on any thread count.
void gemm_few_rows(const Tensor& a, const Tensor& b, Tensor& c, float alpha, float beta,
                         const GemmShape& s) {
  const cpu::Floats fa{static_cast<std::byte*>(a.raw()), a.dtype()};
  const cpu::Floats fb{static_cast<std::byte*>(b.raw()), b.dtype()};
  const cpu::Floats fc{static_cast<std::byte*>(c.raw()), c.dtype()};
  const int64_t k = s.k, n = s.n, m = s.m, lda = a.dim(1), ldb = b.dim(1);
  float* x = scratch(t_panel_a, m * k);
  widen(fa, lda, 0, m, 0, k, x);
  float* out = c.dtype() == DType::F32 ? c.data<float>() : scratch(t_block_c, m * n);
  if (beta != 0.0f && c.dtype() != DType::F32) widen(fc, n, 0, m, 0, n, out);
#pragma omp parallel if (n * k >= cpu::kParallelMin)
  {
    std::vector<float> converted(static_cast<size_t>(k));
#pragma omp for schedule(static)
    for (int64_t j = 0; j < n; ++j) {
      const float* row = cpu::load_f32(fb, j * ldb, k, converted.data());
      for (int64_t i = 0; i < m; ++i) {
        const float* xi = x + i * k;
        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
        for (int64_t q = 0; q < k; ++q) dot += xi[q] * row[q];
        float& y = out[i * n + j];
        y = beta == 0.0f ? alpha * dot : alpha * dot + beta * y;
      }
    }
  }
  if (c.dtype() != DType::F32) cpu::store_f32(fc, 0, m * n, out);
}

// c = alpha op(a) op(b) + beta c for 2-D tensors whose shapes have been checked.
void gemm_2d(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c, float alpha,
             float beta, const GemmShape& s) {
  if (s.m == 0 || s.n == 0) return;
  const int64_t lda = a.dim(1), ldb = b.dim(1);
  if (!trans_a && trans_b && s.m <= kFewRows && s.k > 0 && (a.dtype() != DType::F32 || s.m > 1)) {
    gemm_few_rows(a, b, c, alpha, beta, s);
    return;
  }
  if (a.dtype() == DType::F32 && c.dtype() == DType::F32 && s.k > 0 && s.m == 1) {
    // One row (generation's decode step): a matrix-vector product. sgemm would first pack all
    // of b, reading and writing the whole weight once more; sgemv streams it once. Each output
    // is one thread's dot product in a fixed order, whatever the thread count.
    const int64_t incx = trans_a ? lda : 1;
    // OpenBLAS scales y by beta even when beta is 0, so garbage (NaN) in c would survive.
    if (beta == 0.0f) std::fill(c.data<float>(), c.data<float>() + s.n, 0.0f);
    if (trans_b) {  // c[0, j] = sum_k a[k] b[j, k]
      cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<int>(s.n), static_cast<int>(s.k), alpha,
                  b.data<float>(), static_cast<int>(ldb), a.data<float>(), static_cast<int>(incx),
                  beta, c.data<float>(), 1);
    } else {  // c[0, j] = sum_k a[k] b[k, j]
      cblas_sgemv(CblasRowMajor, CblasTrans, static_cast<int>(s.k), static_cast<int>(s.n), alpha,
                  b.data<float>(), static_cast<int>(ldb), a.data<float>(), static_cast<int>(incx),
                  beta, c.data<float>(), 1);
    }
    return;
  }
  if (a.dtype() == DType::F32 && c.dtype() == DType::F32 && s.k > 0) {
    cblas_sgemm(CblasRowMajor, blas_op(trans_a), blas_op(trans_b), static_cast<int>(s.m),
                static_cast<int>(s.n), static_cast<int>(s.k), alpha, a.data<float>(),
                static_cast<int>(lda), b.data<float>(), static_cast<int>(ldb), beta,
                c.data<float>(), static_cast<int>(s.n));
    return;
  }
  const cpu::Floats fa{static_cast<std::byte*>(a.raw()), a.dtype()};
  const cpu::Floats fb{static_cast<std::byte*>(b.raw()), b.dtype()};
  const cpu::Floats fc{static_cast<std::byte*>(c.raw()), c.dtype()};
  // An f32 c is written in place; a 16-bit c goes through f32 blocks of whole rows.
  const bool c_direct = c.dtype() == DType::F32;
  const int64_t block_rows = c_direct ? s.m : std::clamp<int64_t>(kBlockFloats / s.n, 1, s.m);
  // K panels sized so both widened panels fit kPanelFloats, but at least 64 deep for efficiency.
  const int64_t depth = std::min(s.k, std::max<int64_t>(kPanelFloats / (block_rows + s.n), 64));
  for (int64_t m0 = 0; m0 < s.m; m0 += block_rows) {
    const int64_t rows = std::min(block_rows, s.m - m0);
    float* cb = c_direct ? c.data<float>() + m0 * s.n : scratch(t_block_c, rows * s.n);
    if (!c_direct && beta != 0.0f) widen(fc, s.n, m0, rows, 0, s.n, cb);
    if (s.k == 0) {
      // No products: c = beta c (sgemm rejects a zero leading dimension).
      const int64_t count = rows * s.n;
      if (beta == 0.0f) {
        std::fill(cb, cb + count, 0.0f);
      } else {
        for (int64_t i = 0; i < count; ++i) cb[i] *= beta;
      }
    }
    for (int64_t k0 = 0; k0 < s.k; k0 += depth) {
      const int64_t kd = std::min(depth, s.k - k0);
      // Panels of op(a) rows [m0, m0 + rows), op(b) all columns, both over depth [k0, k0 + kd),
      // kept in a's and b's own orientation.
      float* pa = scratch(t_panel_a, rows * kd);
      float* pb = scratch(t_panel_b, kd * s.n);
      if (trans_a) {
        widen(fa, lda, k0, kd, m0, rows, pa);
      } else {
        widen(fa, lda, m0, rows, k0, kd, pa);
      }
      if (trans_b) {
        widen(fb, ldb, 0, s.n, k0, kd, pb);
      } else {
        widen(fb, ldb, k0, kd, 0, s.n, pb);
      }
      cblas_sgemm(CblasRowMajor, blas_op(trans_a), blas_op(trans_b), static_cast<int>(rows),
                  static_cast<int>(s.n), static_cast<int>(kd), alpha, pa,
                  static_cast<int>(trans_a ? rows : kd), pb, static_cast<int>(trans_b ? kd : s.n),
                  k0 == 0 ? beta : 1.0f, cb, static_cast<int>(s.n));
    }
    if (!c_direct) {
      cpu::for_chunks(rows * s.n, [&](int64_t begin, int64_t n) {
        cpu::store_f32(fc, m0 * s.n + begin, n, cb + begin);
      });
    }
  }
}

}  // namespace

void CpuBackend::gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c,
                      float alpha, float beta) {
  const char* op = "gemm";
  cpu::require(a.rank() == 2 && b.rank() == 2 && c.rank() == 2, op,
               "expected 2-D a, b, c, got " + to_string(a.shape()) + ", " + to_string(b.shape()) +
                   ", " + to_string(c.shape()));
  check_dtypes(a, b, c, op);
  const GemmShape s = gemm_shape(a.shape(), trans_a, b.shape(), trans_b, c.shape(), op);
  gemm_2d(a, trans_a, b, trans_b, c, alpha, beta, s);
}

void CpuBackend::gemm_batched(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                              Tensor& c, float alpha, float beta) {
  const char* op = "gemm_batched";
  cpu::require(a.rank() == 3 && b.rank() == 3 && c.rank() == 3, op,
               "expected 3-D a, b, c, got " + to_string(a.shape()) + ", " + to_string(b.shape()) +
                   ", " + to_string(c.shape()));
  cpu::require(a.dim(0) == b.dim(0) && a.dim(0) == c.dim(0), op,
               "batch sizes of " + to_string(a.shape()) + ", " + to_string(b.shape()) + ", " +
                   to_string(c.shape()) + " differ");
  check_dtypes(a, b, c, op);
  const auto matrix = [](const Shape& shape) { return Shape{shape[1], shape[2]}; };
  const GemmShape s =
      gemm_shape(matrix(a.shape()), trans_a, matrix(b.shape()), trans_b, matrix(c.shape()), op);
  // One sgemm after another: each is multithreaded by OpenBLAS and the order is fixed.
  for (int64_t i = 0; i < a.dim(0); ++i) {
    const Tensor ai = a.slice(i, i + 1).view(matrix(a.shape()));
    const Tensor bi = b.slice(i, i + 1).view(matrix(b.shape()));
    Tensor ci = c.slice(i, i + 1).view(matrix(c.shape()));
    gemm_2d(ai, trans_a, bi, trans_b, ci, alpha, beta, s);
  }
}

}  // namespace megatron::tensor
