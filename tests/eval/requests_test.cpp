// How task text becomes scoring requests: every token of a document is predicted exactly once by
// lm-evaluation-harness's rolling windows and by Megatron's overlapping windows, with the context
// each promises; Python's counts for words and characters.
#include "eval/requests.hpp"

#include <gtest/gtest.h>

#include <numeric>

#include "eval/tasks.hpp"

namespace megatron::eval {
namespace {

std::vector<int32_t> numbered(int n) {
  std::vector<int32_t> v(static_cast<size_t>(n), 0);
  std::iota(v.begin(), v.end(), 100);
  return v;
}

// The tokens predicted by the requests, in order.
std::vector<int32_t> predicted(const std::vector<Request>& requests) {
  std::vector<int32_t> out;
  for (const Request& r : requests) out.insert(out.end(), r.continuation.begin(), r.continuation.end());
  return out;
}

TEST(RollingWindows, PredictEveryTokenOnceWithTheFullContextBeforeIt) {
  const std::vector<int32_t> tokens = numbered(23);
  const std::vector<Request> r = rolling_windows(tokens, 7, 8);
  EXPECT_EQ(predicted(r), tokens);
  ASSERT_EQ(r.size(), 3u);  // 8 + 8 + 7
  EXPECT_EQ(r[0].context, std::vector<int32_t>{7});
  for (size_t i = 1; i < r.size(); ++i) {
    // Context + continuation is at most max_length + 1 tokens and ends where the window ends.
    EXPECT_LE(r[i].context.size() + r[i].continuation.size(), 9u);
    EXPECT_EQ(r[i].context.back() + 1, r[i].continuation.front());
  }
  EXPECT_EQ(r[2].context.size() + r[2].continuation.size(), 9u);
}

TEST(OverlappingWindows, ScoreEveryTargetOnceWithAtLeastSeqMinusStrideOfContext) {
  const std::vector<int32_t> tokens = numbered(50);
  const std::vector<Request> r = overlapping_windows(tokens, 16, 4);
  EXPECT_EQ(predicted(r), std::vector<int32_t>(tokens.begin() + 1, tokens.end()));
  for (size_t i = 1; i < r.size(); ++i) {
    EXPECT_GE(r[i].context.size(), 16u - 4u + 1u);
    EXPECT_LE(r[i].context.size() + r[i].continuation.size(), 17u);
  }
}

TEST(OverlappingWindows, AStrideOfTheSequenceLengthGivesDisjointWindows) {
  const std::vector<int32_t> tokens = numbered(40);
  const std::vector<Request> r = overlapping_windows(tokens, 16, 16);
  EXPECT_EQ(predicted(r), std::vector<int32_t>(tokens.begin() + 1, tokens.end()));
  EXPECT_EQ(r.size(), 3u);
}

TEST(PythonCounts, CodePointsWordsAndSpacePiecesAreCountedAsPythonCountsThem) {
  EXPECT_EQ(code_points("caf\xc3\xa9"), 4);
  EXPECT_EQ(whitespace_split_pieces("a  b\nc"), 3);
  EXPECT_EQ(whitespace_split_pieces(" a b"), 3);  // re.split gives a leading ''
  EXPECT_EQ(space_split_pieces_of_stripped("  a  b "), 3);  // "a  b".split(" ") = [a, '', b]
}

}  // namespace
}  // namespace megatron::eval
