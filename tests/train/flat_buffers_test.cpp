// The flat weight and gradient buffers: every parameter and every rank's slice of a bucket
// starts on a 64-element boundary (aligned GEMMs, vector kernels and NCCL on the GPU), values
// survive the move, and the padding between parameters is zero.
#include <gtest/gtest.h>

#include <vector>

#include "model/parameter.hpp"
#include "tensor/cpu_backend.hpp"
#include "tensor/host_io.hpp"
#include "train/flat_buffers.hpp"

namespace megatron::train {
namespace {

class FlatBuffersTest : public ::testing::Test {
 protected:
  tensor::CpuBackend backend{1};
  model::ParameterSet params{backend, tensor::DType::Bf16};

  void SetUp() override {
    // Odd sizes, so that packing them end to end would leave them misaligned.
    for (int64_t n : {7, 130, 33, 1000, 5, 64}) {
      params.add("p" + std::to_string(n), {n}, model::Init::Normal, model::TpSplit::None, true);
    }
    params.initialise(3, 0.02, 1);
  }
};

TEST_F(FlatBuffersTest, EveryParameterStartsOnA64ElementBoundary) {
  FlatBuffers buffers(backend, params, 3, 200);
  for (const FlatBuffers::Range& r : buffers.ranges()) {
    EXPECT_EQ(r.begin % 64, 0) << r.param->name;
    EXPECT_EQ(r.end - r.begin, r.param->value.numel()) << r.param->name;
  }
}

TEST_F(FlatBuffersTest, EveryRanksSliceOfEveryBucketStartsOnA64ElementBoundary) {
  FlatBuffers buffers(backend, params, 3, 200);
  for (const FlatBuffers::Bucket& b : buffers.buckets()) {
    EXPECT_EQ((b.end - b.begin) % (3 * 64), 0);
    for (int64_t shard = 0; shard < 3; ++shard) EXPECT_EQ(buffers.slice(b, shard).first % 64, 0);
  }
}

TEST_F(FlatBuffersTest, ValuesSurviveTheMoveAndThePaddingIsZero) {
  std::vector<std::vector<float>> before;
  for (const auto& p : params.all()) before.push_back(tensor::to_floats(backend, p->value));
  FlatBuffers buffers(backend, params, 2, 100);
  for (size_t i = 0; i < params.all().size(); ++i) {
    EXPECT_EQ(tensor::to_floats(backend, params.all()[i]->value), before[i]);
    EXPECT_TRUE(params.all()[i]->value.same_storage(buffers.weights()));
  }
  const std::vector<float> all = tensor::to_floats(backend, buffers.weights());
  std::vector<bool> used(all.size(), false);
  for (const FlatBuffers::Range& r : buffers.ranges()) {
    for (int64_t i = r.begin; i < r.end; ++i) used[size_t(i)] = true;
  }
  for (size_t i = 0; i < all.size(); ++i) {
    if (!used[i]) EXPECT_EQ(all[i], 0.0f) << "padding element " << i;
  }
}

}  // namespace
}  // namespace megatron::train
