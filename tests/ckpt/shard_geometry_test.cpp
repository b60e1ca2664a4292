// Shard rectangles and flat-range runs: the arithmetic that places every rank's piece.
#include "ckpt/shard_geometry.hpp"

#include <gtest/gtest.h>

#include <numeric>

namespace megatron::ckpt {
namespace {

// The global flat index of every element of `boxes`, in sequence order.
std::vector<int64_t> indices(const std::vector<Box>& boxes, int64_t cols) {
  std::vector<int64_t> out;
  for (const Box& b : boxes)
    for (int64_t r = 0; r < b.rows; ++r)
      for (int64_t c = 0; c < b.cols; ++c) out.push_back((b.row0 + r) * cols + b.col0 + c);
  return out;
}

TEST(ShardGeometry, ReplicatedTensorIsOneBoxOverEverything) {
  EXPECT_EQ(shard_boxes({.global_shape = {6, 4}, .split = Split::None, .tp_rank = 1, .tp_size = 2}),
            (std::vector<Box>{{0, 6, 0, 4}}));
}

TEST(ShardGeometry, RowSplitTakesAContiguousBlockOfRows) {
  EXPECT_EQ(shard_boxes({.global_shape = {8, 3}, .split = Split::Rows, .tp_rank = 1, .tp_size = 4}),
            (std::vector<Box>{{2, 2, 0, 3}}));
}

TEST(ShardGeometry, ColumnSplitTakesAColumnBand) {
  EXPECT_EQ(shard_boxes({.global_shape = {5, 8}, .split = Split::Columns, .tp_rank = 3, .tp_size = 4}),
            (std::vector<Box>{{0, 5, 6, 2}}));
}

TEST(ShardGeometry, FusedPartsAreSplitPartByPart) {
  // SwiGLU's [gate; up] of 8 rows on rank 1 of 2: rows 2-3 of the gate and 6-7 of the up part.
  EXPECT_EQ(shard_boxes({.global_shape = {8, 3}, .split = Split::Rows, .parts = 2, .tp_rank = 1,
                         .tp_size = 2}),
            (std::vector<Box>{{2, 2, 0, 3}, {6, 2, 0, 3}}));
}

TEST(ShardGeometry, OneDimensionalTensorsAreColumnsOfOne) {
  EXPECT_EQ(shard_boxes({.global_shape = {8}, .split = Split::Rows, .tp_rank = 0, .tp_size = 2}),
            (std::vector<Box>{{0, 4, 0, 1}}));
}

TEST(ShardGeometry, SegmentsOfAFlatRangeCoverExactlyItsElementsInOrder) {
  const std::vector<Box> shard =
      shard_boxes({.global_shape = {6, 10}, .split = Split::Columns, .tp_rank = 1, .tp_size = 2});
  const std::vector<int64_t> all = indices(shard, 10);
  for (int64_t begin = 0; begin < 30; ++begin) {
    for (int64_t end = begin + 1; end <= 30; ++end) {
      std::vector<int64_t> got(size_t(end - begin), -1);
      for (const Segment& run : range_segments(shard, begin, end)) {
        const std::vector<int64_t> ids = indices({run.box}, 10);
        for (size_t i = 0; i < ids.size(); ++i) got[size_t(run.offset) + i] = ids[i];
      }
      EXPECT_EQ(got, std::vector<int64_t>(all.begin() + begin, all.begin() + end))
          << "range [" << begin << ", " << end << ")";
    }
  }
}

TEST(ShardGeometry, SegmentsAreAtMostThreeRectanglesPerBox) {
  // A partial first row, the whole rows between, a partial last row.
  const std::vector<Box> whole{{0, 10, 0, 7}};
  EXPECT_EQ(range_segments(whole, 3, 60).size(), 3u);
  EXPECT_EQ(range_segments(whole, 0, 70).size(), 1u);
  EXPECT_EQ(range_segments(whole, 2, 5).size(), 1u);
}

TEST(ShardGeometry, SegmentsCrossFromOnePartToTheNext) {
  const std::vector<Box> shard = shard_boxes(
      {.global_shape = {8, 3}, .split = Split::Rows, .parts = 2, .tp_rank = 0, .tp_size = 2});
  const std::vector<Segment> runs = range_segments(shard, 4, 8);  // the gate's last 2, the up's first 2
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].box, (Box{1, 1, 1, 2}));
  EXPECT_EQ(runs[1].box, (Box{4, 1, 0, 2}));
  EXPECT_EQ(runs[1].offset, 2);
}

}  // namespace
}  // namespace megatron::ckpt
