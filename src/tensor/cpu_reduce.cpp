// CpuBackend: reductions to a host scalar (sum, dot, sum of squares, all-finite).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "tensor/cpu_backend.hpp"
#include "tensor/cpu_dispatch.hpp"
#include "tensor/cpu_f32.hpp"

namespace megatron::tensor {
namespace {

using cpu::Floats;
using cpu::kChunk;

// Each chunk is summed in kLanes independent f64 lanes (which vectorise; one accumulator would
// not), the lanes added in a fixed tree, and the chunks' partials added in chunk order: the
// same order for any thread count.
constexpr int kLanes = 8;

inline double reduce_lanes(double* acc) {
  for (int width = kLanes / 2; width >= 1; width /= 2) {
    for (int l = 0; l < width; ++l) acc[l] += acc[l + width];
  }
  return acc[0];
}

// term(a[i], b[i]) summed in f64 over every element; without b, term(a[i], a[i]).
template <typename Term>
double reduce(const Tensor& a, const Tensor* b, const char* op, Term term) {
  if (b) cpu::require_numel(a, *b, op);
  const Floats fa = cpu::floats(a, op), fb = b ? cpu::floats(*b, op) : Floats{};
  const int64_t n = a.numel();
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> partial(static_cast<size_t>(chunks));
#pragma omp parallel for schedule(static) if (n >= cpu::kParallelMin)
  for (int64_t k = 0; k < chunks; ++k) {
    const int64_t begin = k * kChunk, len = std::min(kChunk, n - begin);
    float ab[kChunk], bb[kChunk];
    const float* as = cpu::load_f32(fa, begin, len, ab);
    const float* bs = b ? cpu::load_f32(fb, begin, len, bb) : as;
    double acc[kLanes] = {};
    int64_t i = 0;
    for (; i + kLanes <= len; i += kLanes) {
      for (int l = 0; l < kLanes; ++l) acc[l] += term(double{as[i + l]}, double{bs[i + l]});
    }
    for (int l = 0; i < len; ++i, ++l) acc[l] += term(double{as[i]}, double{bs[i]});
    partial[static_cast<size_t>(k)] = reduce_lanes(acc);
  }
  double total = 0.0;
  for (double p : partial) total += p;
  return total;
}

// Nonzero where a word's exponent bits are all ones (Inf or NaN).
template <typename Word>
bool any_nonfinite(const Word* bits, int64_t n, Word exponent_mask) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  int bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad) if (n >= cpu::kParallelMin)
  for (int64_t k = 0; k < chunks; ++k) {
    const int64_t begin = k * kChunk, end = std::min(n, begin + kChunk);
    Word hit = 0;
    for (int64_t i = begin; i < end; ++i) {
      hit |= static_cast<Word>((bits[i] & exponent_mask) == exponent_mask);
    }
    bad |= hit != 0;
  }
  return bad != 0;
}

}  // namespace

double CpuBackend::sum(const Tensor& x) {
  return reduce(x, nullptr, "sum", [](double a, double) { return a; });
}

double CpuBackend::dot(const Tensor& a, const Tensor& b) {
  return reduce(a, &b, "dot", [](double x, double y) { return x * y; });
}

// Squares are taken in f64, so finite values never overflow; Inf and NaN still propagate.
double CpuBackend::sum_squares(const Tensor& x) {
  return reduce(x, nullptr, "sum_squares", [](double a, double) { return a * a; });
}

bool CpuBackend::all_finite(const Tensor& x) {
  const Floats fx = cpu::floats(x, "all_finite");
  const int64_t n = x.numel();
  switch (fx.dtype) {
    case DType::Bf16:
      return !any_nonfinite(reinterpret_cast<const uint16_t*>(fx.data), n, uint16_t{0x7F80});
    case DType::F16:
      return !any_nonfinite(reinterpret_cast<const uint16_t*>(fx.data), n, uint16_t{0x7C00});
    default:
      return !any_nonfinite(reinterpret_cast<const uint32_t*>(fx.data), n, 0x7F800000u);
  }
}

}  // namespace megatron::tensor
