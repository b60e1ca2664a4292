// The CUDA backend's rotary position embedding, matching CpuBackend::rotary
// (tensor/cpu_attention.cpp): rotate-half over the first rotary_dim channels of every query and
// key head of fused qkv rows, in place, with angles formed in f64 as the CPU forms them.
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/common.cuh"
#include "kernels/ops.hpp"
#include "kernels/row_access.cuh"
#include "tensor/rotary_frequencies.hpp"

namespace megatron::kernels {
namespace {

// --- float storage whose dtype is known at run time: kernels/row_access.cuh ----------------------
// Written like norm.cu's (whose kernels take several float tensors of independent dtypes) so
// that one kernel serves every dtype.
using namespace rows;

// --- the rotation --------------------------------------------------------------------------------

// base^(-2i / rotary_dim) for the first channels, computed on the host with the CPU's own
// std::pow (so the angles are bit for bit the CPU's) and passed by value; channels beyond (a
// rotary_dim over 512) compute theirs with the device's pow.
constexpr int kHostFrequencies = 256;
struct Frequencies {
  double value[kHostFrequencies];
};

constexpr int kMaxThreads = 256;
// The cosines and sines of one position sit in shared memory: at most 48 KiB of them.
constexpr int64_t kMaxHalf = 48 * 1024 / (2 * sizeof(float));

// Block (t, y) rotates position t of batches y, y + gridDim.y, ...: its cos and sin, rounded
// from f64 to f32 as the CPU's tables are (the angle t * frequency reaches thousands of radians,
// which f32 would misplace), are computed once and shared by those rows. Inverse negates the
// sine; both are scaled by YaRN's attention factor (1 otherwise). Each thread takes 8 channels i of a head and their partners i + half.
__global__ void __launch_bounds__(kMaxThreads)
    rotary_kernel(Floats qkv, int64_t batch, int64_t seq, int64_t width, int64_t dim,
                  int64_t per_group, int64_t groups, int64_t half, double base,
                  int64_t rotary_dim, int64_t offset, bool inverse, double scale,
                  const __grid_constant__ Frequencies frequencies) {
  extern __shared__ float table[];
  float* cos_t = table;
  float* sin_t = table + half;
  const int64_t t = blockIdx.x;
  const unsigned threads = blockDim.x;
  for (int64_t i = threadIdx.x; i < half; i += threads) {
    const double frequency =
        i < kHostFrequencies
            ? frequencies.value[i]
            : pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(rotary_dim));
    const double angle = static_cast<double>(t + offset) * frequency;
    double s = 0.0, c = 0.0;
    sincos(angle, &s, &c);
    cos_t[i] = static_cast<float>(scale * c);
    sin_t[i] = static_cast<float>(scale * (inverse ? -s : s));
  }
  __syncthreads();

  // Per group: its per_group query heads, then its key head (rotated), then its value head (not).
  const int64_t chunks = (half + 7) / 8;
  const int64_t rotated = per_group + 1;
  const int64_t work = groups * rotated * chunks;
  for (int64_t b = blockIdx.y; b < batch; b += gridDim.y) {
    const Floats row = qkv.at((b * seq + t) * width);
    for (int64_t w = threadIdx.x; w < work; w += threads) {
      const int64_t head = w / chunks, i0 = (w - head * chunks) * 8;
      const int64_t g = head / rotated, h = head - g * rotated;
      const int64_t column = (g * (per_group + 2) + h) * dim + i0;
      const int count = static_cast<int>(min(int64_t{8}, half - i0));
      const Raw8 raw1 = load_raw8(row, column, count);
      const Raw8 raw2 = load_raw8(row, column + half, count);
      float x1[8], x2[8], out1[8], out2[8];
      to_floats(raw1, row.kind, x1);
      to_floats(raw2, row.kind, x2);
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const float c = e < count ? cos_t[i0 + e] : 0.0f;
        const float s = e < count ? sin_t[i0 + e] : 0.0f;
        out1[e] = x1[e] * c - x2[e] * s;
        out2[e] = x2[e] * c + x1[e] * s;
      }
      store8(row, column, count, out1);
      store8(row, column + half, count, out2);
    }
  }
}

}  // namespace

void rotary(cudaStream_t stream, Tensor& qkv, const AttentionShape& shape,
            const RotaryOptions& options, bool inverse) {
  const char* op = "rotary";
  require(shape.batch >= 0 && shape.seq >= 0 && shape.head_dim > 0 && shape.groups > 0 &&
              shape.heads > 0 && shape.heads % shape.groups == 0,
          op, "bad shape (heads must be a positive multiple of groups)");
  const int64_t width = shape.qkv_width();
  require(qkv.numel() == shape.batch * shape.seq * width, op,
          "qkv " + tensor::to_string(qkv.shape()) + " does not match the shape");
  const int64_t rotary_dim = options.rotary_dim;
  require(rotary_dim > 0 && rotary_dim % 2 == 0 && rotary_dim <= shape.head_dim, op,
          "rotary_dim must be even and in (0, head_dim]");
  require(options.position_offset >= 0, op, "position_offset must not be negative");
  const int64_t half = rotary_dim / 2;
  require(half <= kMaxHalf, op, "rotary_dim must be at most " + std::to_string(2 * kMaxHalf));
  const Floats x = floats(qkv, op, "qkv");
  if (shape.batch == 0 || shape.seq == 0) return;
  require(shape.seq <= INT_MAX, op, "seq must be below 2^31");

  // As the CPU: the host's f64 frequencies, scaled where the options say so.
  require(options.scaling.kind == tensor::RotaryScaling::Kind::None || half <= kHostFrequencies, op,
          "scaled rotary frequencies need rotary_dim at most " + std::to_string(2 * kHostFrequencies));
  const std::vector<double> host = tensor::rotary_frequencies(options);
  Frequencies frequencies{};
  for (int64_t i = 0; i < std::min<int64_t>(half, kHostFrequencies); ++i) frequencies.value[i] = host[size_t(i)];
  const int64_t per_group = shape.heads / shape.groups;
  const int64_t work = shape.groups * (per_group + 1) * ((half + 7) / 8);
  const auto threads = static_cast<unsigned>(
      std::clamp<int64_t>((std::max(work, half) + 31) / 32 * 32, 32, kMaxThreads));
  // Enough blocks to fill the device when seq is short; else one block per position.
  const int64_t spread = std::clamp<int64_t>((2048 + shape.seq - 1) / shape.seq, 1, 65535);
  const dim3 grid(static_cast<unsigned>(shape.seq),
                  static_cast<unsigned>(std::min(shape.batch, spread)));
  const size_t shared = static_cast<size_t>(2 * half) * sizeof(float);
  rotary_kernel<<<grid, threads, shared, stream>>>(x, shape.batch, shape.seq, width,
                                                   shape.head_dim, per_group, shape.groups, half,
                                                   options.base, rotary_dim, options.position_offset,
                                                   inverse, options.scaling.attention_factor,
                                                   frequencies);
  check_launch(op);
}

}  // namespace megatron::kernels
