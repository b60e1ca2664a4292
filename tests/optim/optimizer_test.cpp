#include "optim/optimizer.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "tensor/cpu_backend.hpp"
#include "tensor/host_io.hpp"

namespace megatron::optim {
namespace {

using tensor::DType;

TEST(Optimizer, GradNormIsTheL2NormOfEveryGradientUnscaled) {
  tensor::CpuBackend b(1);
  tensor::Tensor w1 = b.zeros({2}, DType::F32), w2 = b.zeros({1}, DType::F32);
  tensor::Tensor g1 = tensor::from_floats(b, std::vector<float>{3, 0}, {2});
  tensor::Tensor g2 = tensor::from_floats(b, std::vector<float>{4}, {1});
  Optimizer opt(b, {{"a", &w1, &g1}, {"b", &w2, &g2}}, {});
  EXPECT_DOUBLE_EQ(opt.grad_norm(1.0), 5.0);
  EXPECT_DOUBLE_EQ(opt.grad_norm(0.5), 2.5);
}

TEST(Optimizer, GradNormIsNotFiniteWhenAGradientOverflowed) {
  tensor::CpuBackend b(1);
  tensor::Tensor w = b.zeros({2}, DType::F32);
  tensor::Tensor g = tensor::from_floats(b, std::vector<float>{1, INFINITY}, {2});
  Optimizer opt(b, {{"a", &w, &g}}, {});
  EXPECT_FALSE(std::isfinite(opt.grad_norm(1.0)));
}

TEST(Optimizer, SixteenBitWeightsFollowTheirF32Masters) {
  tensor::CpuBackend b(1);
  // bf16 has 8 significant bits: near 1 its spacing is 2^-7, so a step of 2^-9 applied to the
  // bf16 weight itself would round away every time. The f32 master keeps each step.
  tensor::Tensor w = tensor::from_floats(b, std::vector<float>{1.0f}, {1}, DType::Bf16);
  tensor::Tensor g = tensor::from_floats(b, std::vector<float>{-1.0f}, {1});
  Optimizer opt(b, {{"w", &w, &g, false}}, {.kind = optim::OptimizerKind::Sgd, .momentum = 0.0});
  opt.step(1.0 / 512, 1.0);
  EXPECT_EQ(tensor::to_floats(b, w)[0], 1.0f);
  for (int i = 0; i < 3; ++i) opt.step(1.0 / 512, 1.0);
  EXPECT_EQ(tensor::to_floats(b, w)[0], 1.0f + 1.0f / 128);
}

TEST(Optimizer, WeightDecayAppliesOnlyWhereAsked) {
  tensor::CpuBackend b(1);
  tensor::Tensor decayed = tensor::from_floats(b, std::vector<float>{1.0f}, {1});
  tensor::Tensor kept = tensor::from_floats(b, std::vector<float>{1.0f}, {1});
  tensor::Tensor g1 = b.zeros({1}, DType::F32), g2 = b.zeros({1}, DType::F32);
  Optimizer opt(b, {{"w", &decayed, &g1, true}, {"b", &kept, &g2, false}},
                {.kind = optim::OptimizerKind::Sgd, .weight_decay = 0.5, .momentum = 0.0});
  opt.step(0.1, 1.0);
  EXPECT_FLOAT_EQ(tensor::to_floats(b, decayed)[0], 0.95f);
  EXPECT_FLOAT_EQ(tensor::to_floats(b, kept)[0], 1.0f);
}

}  // namespace
}  // namespace megatron::optim
