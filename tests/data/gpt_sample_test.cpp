// Turning an S + 1 token window into a GPT sample: labels, loss mask, position ids and
// document boundaries under Megatron's three EOD options. EOD is token 0 throughout.
#include "data/gpt_sample.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace megatron::data {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// Two documents meet inside the window: "5 EOD | 6 7 EOD".
const std::vector<int32_t> kWindow{5, 0, 6, 7, 0};

TEST(GptDatasetSample, TokensAreTheFirstSAndLabelsTheLastS) {
  const Sample s = make_gpt_sample(kWindow, {});
  EXPECT_THAT(s.tokens, ElementsAre(5, 0, 6, 7));
  EXPECT_THAT(s.labels, ElementsAre(0, 6, 7, 0));
}

TEST(GptDatasetSample, WithoutOptionsEveryPositionCountsAndPositionsRunOn) {
  const Sample s = make_gpt_sample(kWindow, {});
  EXPECT_THAT(s.loss_mask, ElementsAre(1.0f, 1.0f, 1.0f, 1.0f));
  EXPECT_THAT(s.position_ids, ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(s.document_starts, IsEmpty());
}

TEST(GptDatasetSample, EodMaskLossZeroesPositionsWhoseInputIsEod) {
  // Megatron masks by input token: predicting the next document's first token from an EOD is
  // not trained. The label EOD at the last position is still predicted.
  const Sample s = make_gpt_sample(kWindow, {.eod_mask_loss = true});
  EXPECT_THAT(s.loss_mask, ElementsAre(1.0f, 0.0f, 1.0f, 1.0f));
  EXPECT_THAT(s.position_ids, ElementsAre(0, 1, 2, 3));
}

TEST(GptDatasetSample, ResetPositionIdsRestartsAfterEachEod) {
  const Sample s = make_gpt_sample(kWindow, {.reset_position_ids = true});
  EXPECT_THAT(s.position_ids, ElementsAre(0, 1, 0, 1));
  EXPECT_THAT(s.loss_mask, ElementsAre(1.0f, 1.0f, 1.0f, 1.0f));
}

TEST(GptDatasetSample, ResetAttentionMaskRecordsWhereEachDocumentStarts) {
  const Sample s =
      make_gpt_sample(std::vector<int32_t>{0, 5, 0, 6, 0, 7}, {.reset_attention_mask = true});
  EXPECT_THAT(s.document_starts, ElementsAre(0, 1, 3));  // the EOD at position 4 is last
  EXPECT_THAT(s.position_ids, ElementsAre(0, 1, 2, 3, 4));
}

TEST(GptDatasetSample, TheEodTokenIsConfigurable) {
  const Sample s =
      make_gpt_sample(kWindow, {.eod_token = 7, .eod_mask_loss = true, .reset_position_ids = true});
  EXPECT_THAT(s.loss_mask, ElementsAre(1.0f, 1.0f, 1.0f, 0.0f));
  EXPECT_THAT(s.position_ids, ElementsAre(0, 1, 2, 3));
}

}  // namespace
}  // namespace megatron::data
