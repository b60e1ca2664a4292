// CpuBackend::rotary: the rotate-half rotation of the query and key heads inside fused qkv rows,
// against a double-precision reference, and its inverse as the rotation's backward.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "tensor/cpu_backend.hpp"
#include "tensor/gradcheck.hpp"
#include "tensor/host_io.hpp"

namespace megatron::tensor {
namespace cpu_rotary_test {

using test_support::expect_gradient_near;
using test_support::numeric_gradient;
using test_support::random_values;

// Which part of the qkv row a column belongs to.
enum class Part { Query, Key, Value };

Part part_of(const AttentionShape& s, int64_t column) {
  const int64_t per_group = s.heads / s.groups;
  const int64_t slot = (column / s.head_dim) % (per_group + 2);
  return slot < per_group ? Part::Query : slot == per_group ? Part::Key : Part::Value;
}

// The rotation in double, channel by channel from the documented formula.
std::vector<double> reference(const std::vector<float>& qkv, const AttentionShape& s,
                              const RotaryOptions& o, bool inverse) {
  const int64_t width = s.qkv_width(), half = o.rotary_dim / 2;
  std::vector<double> out(qkv.begin(), qkv.end());
  for (int64_t row = 0; row < s.batch * s.seq; ++row) {
    const double t = double(row % s.seq);
    for (int64_t head = 0; head < width / s.head_dim; ++head) {
      if (part_of(s, head * s.head_dim) == Part::Value) continue;
      for (int64_t i = 0; i < half; ++i) {
        const double angle =
            (inverse ? -t : t) * std::pow(o.base, -2.0 * double(i) / double(o.rotary_dim));
        const size_t a = static_cast<size_t>(row * width + head * s.head_dim + i);
        const size_t b = a + static_cast<size_t>(half);
        out[a] = qkv[a] * std::cos(angle) - qkv[b] * std::sin(angle);
        out[b] = qkv[b] * std::cos(angle) + qkv[a] * std::sin(angle);
      }
    }
  }
  return out;
}

std::vector<float> rotate(CpuBackend& backend, const std::vector<float>& qkv,
                          const AttentionShape& s, const RotaryOptions& o, bool inverse,
                          DType dtype = DType::F32) {
  Tensor x = from_floats(backend, qkv, {s.batch * s.seq, s.qkv_width()}, dtype);
  backend.rotary(x, s, o, inverse);
  return to_floats(backend, x);
}

// Every |got - want| within tolerance + relative * |want|.
void expect_all_near(const std::vector<float>& got, const std::vector<double>& want,
                     double tolerance, double relative = 0.0) {
  ASSERT_EQ(got.size(), want.size());
  size_t failures = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double bound = tolerance + relative * std::abs(want[i]);
    if (!(std::abs(got[i] - want[i]) <= bound) && failures++ < 5) {
      ADD_FAILURE() << "[" << i << "] = " << got[i] << ", want " << want[i];
    }
  }
  EXPECT_EQ(failures, 0u);
}

// Two groups of two query heads: the value heads sit between the rotated ones.
const AttentionShape kShape{.batch = 2, .seq = 9, .heads = 4, .groups = 2, .head_dim = 8};

// Values ~1 rotated in f32 with f32 cosines and sines: a few ulp of error.
constexpr double kTolerance = 1e-6;

TEST(CpuRotary, RotatesQueryAndKeyHeadsByTheirPositionsAngles) {
  CpuBackend backend(2);
  const auto qkv = random_values(static_cast<size_t>(18 * kShape.qkv_width()), 1);
  const RotaryOptions o{.rotary_dim = 8, .base = 10000.0};
  expect_all_near(rotate(backend, qkv, kShape, o, false), reference(qkv, kShape, o, false),
                  kTolerance);
}

TEST(CpuRotary, LeavesValueHeadsAndChannelsBeyondRotaryDimUntouched) {
  CpuBackend backend(2);
  const auto qkv = random_values(static_cast<size_t>(18 * kShape.qkv_width()), 2);
  const auto rotated = rotate(backend, qkv, kShape, {.rotary_dim = 4, .base = 500.0}, false);
  size_t changed = 0;
  for (size_t i = 0; i < qkv.size(); ++i) {
    const int64_t column = static_cast<int64_t>(i) % kShape.qkv_width();
    const bool rotated_channel =
        part_of(kShape, column) != Part::Value && column % kShape.head_dim < 4;
    if (!rotated_channel) changed += rotated[i] != qkv[i];
  }
  EXPECT_EQ(changed, 0u);
}

TEST(CpuRotary, PartialRotaryDimUsesItsOwnFrequencies) {
  CpuBackend backend(2);
  const auto qkv = random_values(static_cast<size_t>(18 * kShape.qkv_width()), 3);
  const RotaryOptions o{.rotary_dim = 4, .base = 500.0};
  expect_all_near(rotate(backend, qkv, kShape, o, false), reference(qkv, kShape, o, false),
                  kTolerance);
}

TEST(CpuRotary, InverseRotatesByTheNegativeAngle) {
  CpuBackend backend(2);
  const auto qkv = random_values(static_cast<size_t>(18 * kShape.qkv_width()), 4);
  const RotaryOptions o{.rotary_dim = 8, .base = 10000.0};
  expect_all_near(rotate(backend, qkv, kShape, o, true), reference(qkv, kShape, o, true),
                  kTolerance);
}

TEST(CpuRotary, InverseUndoesTheRotation) {
  CpuBackend backend(2);
  const auto qkv = random_values(static_cast<size_t>(18 * kShape.qkv_width()), 5);
  const RotaryOptions o{.rotary_dim = 8, .base = 10000.0};
  const auto there = rotate(backend, qkv, kShape, o, false);
  const auto back = rotate(backend, there, kShape, o, true);
  // Two rotations' rounding.
  expect_all_near(back, std::vector<double>(qkv.begin(), qkv.end()), 2 * kTolerance);
}

TEST(CpuRotary, InverseIsTheBackwardOfTheRotation) {
  // A rotation is orthogonal: its Jacobian's transpose, which the backward applies to the
  // output gradient, is the rotation by the negative angle.
  CpuBackend backend(2);
  const AttentionShape s{.batch = 1, .seq = 5, .heads = 2, .groups = 1, .head_dim = 4};
  const RotaryOptions o{.rotary_dim = 4, .base = 10.0};
  const auto qkv = random_values(static_cast<size_t>(5 * s.qkv_width()), 6);
  const auto weights = random_values(qkv.size(), 7);
  const auto numeric = numeric_gradient(
      qkv, [&](const std::vector<float>& x) { return rotate(backend, x, s, o, false); }, weights);
  // The rotation is linear: central differences are exact up to f32 rounding of outputs ~1.
  expect_gradient_near(rotate(backend, weights, s, o, true), numeric, 2e-3, 1e-5, "dqkv");
}

TEST(CpuRotary, AnglesStayAccurateAtLongPositions) {
  // Position 8191 turns the first channel pair by 8191 radians: an angle formed in f32 would be
  // off by ~5e-4 there, which this tolerance catches.
  CpuBackend backend(2);
  const AttentionShape s{.batch = 1, .seq = 8192, .heads = 1, .groups = 1, .head_dim = 8};
  const auto qkv = random_values(static_cast<size_t>(s.seq * s.qkv_width()), 8);
  const RotaryOptions o{.rotary_dim = 8, .base = 10000.0};
  expect_all_near(rotate(backend, qkv, s, o, false), reference(qkv, s, o, false), 1e-5);
}

TEST(CpuRotary, RotatesBf16StorageInPlace) {
  CpuBackend backend(2);
  auto qkv = random_values(static_cast<size_t>(18 * kShape.qkv_width()), 9);
  for (float& x : qkv) x = to_float(to_bf16(x));
  const RotaryOptions o{.rotary_dim = 8, .base = 10000.0};
  // The f32 results are rounded to bf16 (8 significant bits): 2^-8 relative.
  expect_all_near(rotate(backend, qkv, kShape, o, false, DType::Bf16),
                  reference(qkv, kShape, o, false), kTolerance, 1.0 / 256);
}

TEST(CpuRotary, RejectsAnOddRotaryDim) {
  CpuBackend backend(1);
  Tensor x = backend.zeros({18, kShape.qkv_width()}, DType::F32);
  EXPECT_THROW(backend.rotary(x, kShape, {.rotary_dim = 5}, false), std::logic_error);
}

}  // namespace cpu_rotary_test
}  // namespace megatron::tensor
