#include "ckpt/raw_elements.hpp"

#include <algorithm>
#include <cstring>

#include "core/error.hpp"
#include "tensor/half.hpp"

namespace megatron::ckpt {

using tensor::DType;

namespace {

std::vector<float> to_f32(std::span<const std::byte> in, DType from) {
  std::vector<float> out(in.size() / tensor::size_of(from));
  switch (from) {
    case DType::F32:
      std::memcpy(out.data(), in.data(), in.size());
      break;
    case DType::Bf16:
      tensor::convert(std::span(reinterpret_cast<const tensor::bf16*>(in.data()), out.size()),
                      std::span<float>(out));
      break;
    case DType::F16:
      tensor::convert(std::span(reinterpret_cast<const tensor::f16*>(in.data()), out.size()),
                      std::span<float>(out));
      break;
    default:
      throw RuntimeFailure("convert_elements: not a float dtype");
  }
  return out;
}

// Tiles keep both the rows read and the rows written in cache (matrices of 10^7 elements).
template <class T>
void transpose_as(const std::byte* in, std::byte* out, int64_t rows, int64_t cols) {
  constexpr int64_t kTile = 64;
  const auto* src = reinterpret_cast<const T*>(in);
  auto* dst = reinterpret_cast<T*>(out);
  for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
    for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
      const int64_t r1 = std::min(rows, r0 + kTile), c1 = std::min(cols, c0 + kTile);
      for (int64_t r = r0; r < r1; ++r) {
        for (int64_t c = c0; c < c1; ++c) dst[c * rows + r] = src[r * cols + c];
      }
    }
  }
}

}  // namespace

namespace {

// An element is NaN or infinite when its exponent bits are all ones, in every float format.
template <class Bits>
int64_t first_all_ones(std::span<const std::byte> bytes, Bits exponent) {
  const size_t n = bytes.size() / sizeof(Bits);
  for (size_t i = 0; i < n; ++i) {
    Bits v;
    std::memcpy(&v, bytes.data() + i * sizeof(Bits), sizeof(Bits));
    if ((v & exponent) == exponent) return int64_t(i);
  }
  return -1;
}

}  // namespace

int64_t first_non_finite(std::span<const std::byte> bytes, DType dtype) {
  switch (dtype) {
    case DType::F32: return first_all_ones<uint32_t>(bytes, 0x7F800000u);
    case DType::Bf16: return first_all_ones<uint16_t>(bytes, uint16_t{0x7F80});
    case DType::F16: return first_all_ones<uint16_t>(bytes, uint16_t{0x7C00});
    default: throw RuntimeFailure("first_non_finite: not a float dtype");
  }
}

void scale_elements(std::span<std::byte> bytes, DType dtype, double factor) {
  if (factor == 1.0) return;
  std::vector<float> f = to_f32(bytes, dtype);
  for (float& v : f) v = float(double(v) * factor);
  const std::vector<std::byte> back = convert_elements(
      std::as_bytes(std::span<const float>(f)), DType::F32, dtype);
  std::memcpy(bytes.data(), back.data(), bytes.size());
}

std::vector<std::byte> convert_elements(std::span<const std::byte> in, DType from, DType to) {
  if (from == to) return {in.begin(), in.end()};
  const std::vector<float> f = to_f32(in, from);
  std::vector<std::byte> out(f.size() * tensor::size_of(to));
  switch (to) {
    case DType::F32:
      std::memcpy(out.data(), f.data(), out.size());
      break;
    case DType::Bf16:
      tensor::convert(std::span<const float>(f),
                      std::span(reinterpret_cast<tensor::bf16*>(out.data()), f.size()));
      break;
    case DType::F16:
      tensor::convert(std::span<const float>(f),
                      std::span(reinterpret_cast<tensor::f16*>(out.data()), f.size()));
      break;
    default:
      throw RuntimeFailure("convert_elements: not a float dtype");
  }
  return out;
}

std::vector<std::byte> transpose_elements(std::span<const std::byte> in, int64_t rows, int64_t cols,
                                          size_t element_size) {
  if (in.size() != size_t(rows * cols) * element_size) {
    throw RuntimeFailure("transpose_elements: size does not match the shape");
  }
  std::vector<std::byte> out(in.size());
  switch (element_size) {
    case 2:
      transpose_as<uint16_t>(in.data(), out.data(), rows, cols);
      break;
    case 4:
      transpose_as<uint32_t>(in.data(), out.data(), rows, cols);
      break;
    default:
      throw RuntimeFailure("transpose_elements: elements of 2 or 4 bytes only");
  }
  return out;
}

}  // namespace megatron::ckpt
