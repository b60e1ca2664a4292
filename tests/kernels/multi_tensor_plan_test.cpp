// The launch plan of the multi-tensor kernels (host code, so it runs without a GPU): every chunk
// of every tensor exactly once and in order, within each launch's limits on tensors and blocks.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/multi_tensor_plan.hpp"

namespace megatron::kernels {
namespace multi_tensor_plan_test {

// Replays the plan: the (tensor, chunk) pairs its blocks cover, checking each launch's limits.
std::vector<std::pair<size_t, int>> covered(const std::vector<int64_t>& sizes, int64_t chunk,
                                            int max_tensors, int max_blocks) {
  std::vector<std::pair<size_t, int>> out;
  for (const MultiTensorLaunch& l :
       plan_multi_tensor_launches(sizes, chunk, max_tensors, max_blocks)) {
    EXPECT_FALSE(l.blocks.empty());
    EXPECT_LE(int(l.blocks.size()), max_blocks);
    EXPECT_LE(l.last - l.first, size_t(max_tensors));
    for (const MultiTensorLaunch::Block& b : l.blocks) {
      EXPECT_LT(size_t(b.slot), l.last - l.first);
      out.emplace_back(l.first + size_t(b.slot), b.chunk);
    }
  }
  return out;
}

std::vector<std::pair<size_t, int>> every_chunk(const std::vector<int64_t>& sizes, int64_t chunk) {
  std::vector<std::pair<size_t, int>> out;
  for (size_t i = 0; i < sizes.size(); ++i) {
    for (int c = 0; c * chunk < sizes[i]; ++c) out.emplace_back(i, c);
  }
  return out;
}

TEST(MultiTensorPlan, SmallTensorsShareOneLaunch) {
  const std::vector<int64_t> sizes{10, 20, 30};
  const auto launches = plan_multi_tensor_launches(sizes, 100, 8, 8);
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].first, 0u);
  EXPECT_EQ(launches[0].last, 3u);
  EXPECT_EQ(covered(sizes, 100, 8, 8), every_chunk(sizes, 100));
}

TEST(MultiTensorPlan, MoreTensorsThanALaunchHoldsStartAnotherLaunch) {
  const std::vector<int64_t> sizes(20, 5);
  EXPECT_EQ(plan_multi_tensor_launches(sizes, 100, 8, 64).size(), 3u);
  EXPECT_EQ(covered(sizes, 100, 8, 64), every_chunk(sizes, 100));
}

TEST(MultiTensorPlan, ATensorOfMoreChunksThanALaunchHasBlocksIsSplit) {
  const std::vector<int64_t> sizes{3, 1000, 7};
  const auto launches = plan_multi_tensor_launches(sizes, 10, 4, 16);
  EXPECT_GT(launches.size(), 5u);
  EXPECT_EQ(covered(sizes, 10, 4, 16), every_chunk(sizes, 10));
}

TEST(MultiTensorPlan, EmptyTensorsGetNoBlocksAndNoLaunch) {
  EXPECT_TRUE(plan_multi_tensor_launches(std::vector<int64_t>{0, 0}, 10, 4, 4).empty());
  const std::vector<int64_t> sizes{0, 5, 0, 0, 0, 0, 0, 0, 0, 12, 0};
  EXPECT_EQ(covered(sizes, 10, 4, 4), every_chunk(sizes, 10));
}

TEST(MultiTensorPlan, MixedSizesCoverEveryChunkInOrder) {
  std::vector<int64_t> sizes;
  for (int i = 0; i < 300; ++i) sizes.push_back((i * 7919) % 5000);
  EXPECT_EQ(covered(sizes, 64, 96, 320), every_chunk(sizes, 64));
}

}  // namespace multi_tensor_plan_test
}  // namespace megatron::kernels
