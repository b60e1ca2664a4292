// What `megatron plan` prints: the text report's sections and numbers, and the JSON keys.
#include "plan/report.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.hpp"
#include "gpt_recipe.hpp"
#include "plan/plan.hpp"

namespace megatron::plan {
namespace report_test {

using ::testing::HasSubstr;
using testing::gpt3_175b;
using testing::make_gpt;
using ::testing::Not;


std::string report_of(const recipe::CompiledRecipe& compiled) {
  return render_text(make_plan(compiled, find_hardware("h100-sxm")), compiled);
}

TEST(Report, TextHasOneSectionPerPartOfThePlan) {
  const std::string text = report_of(gpt3_175b(8, 16, 8));
  for (const char* section :
       {"Layout\n", "Parameters\n", "Memory per rank", "Compute per iteration\n",
        "Communication per rank per iteration", "Estimate on h100-sxm"})
    EXPECT_THAT(text, HasSubstr(section));
}

TEST(Report, TextFor175bFitsOnAScreen) {
  const std::string text = report_of(gpt3_175b(8, 16, 8));
  const auto lines = std::count(text.begin(), text.end(), '\n');
  EXPECT_GE(lines, 40);
  EXPECT_LE(lines, 70);
}

TEST(Report, TextWritesParameterCountsWithThousandsSeparatorsAndShortForm) {
  EXPECT_THAT(report_of(gpt3_175b(8, 16, 8)), HasSubstr("174,615,846,912 (174.6B)"));
}

TEST(Report, TextShowsTheRankFormulaForTheLayout) {
  EXPECT_THAT(report_of(gpt3_175b(8, 16, 8)),
              HasSubstr("rank = tp + 8 x (cp + 1 x (dp + 8 x pp))"));
}

TEST(Report, TextShowsStageLayersAsRanges) {
  EXPECT_THAT(report_of(gpt3_175b(8, 16, 8)), HasSubstr(" 90-95 "));
}

TEST(Report, TextShowsInterleavedStagesAsSeveralRanges) {
  const auto compiled =
      make_gpt({.layers = 16, .global_batch = 8, .pipeline = 4, .virtual_pipeline = 2});
  EXPECT_THAT(report_of(compiled), HasSubstr("0-1, 8-9"));
}

TEST(Report, TextElidesTheMiddleOfLongPipelines) {
  // 32 stages of 3 layers: stages 0-3 and 30-31 are shown.
  const std::string text = report_of(gpt3_175b(8, 32, 4));
  EXPECT_THAT(text, HasSubstr(" 9-11 "));        // stage 3
  EXPECT_THAT(text, Not(HasSubstr(" 12-14 ")));  // stage 4
  EXPECT_THAT(text, HasSubstr(" 93-95 "));       // stage 31
  EXPECT_THAT(text, HasSubstr("  ...\n"));
}

TEST(Report, TextSaysWhenAPlanDoesNotFitAndWhatToTry) {
  const std::string text = report_of(gpt3_175b(1, 1, 1));
  EXPECT_THAT(text, HasSubstr("DOES NOT FIT"));
  EXPECT_THAT(text, HasSubstr("warning: stage 0 needs"));
  EXPECT_THAT(text, HasSubstr("try: training.recompute=full"));
}

TEST(Report, JsonHasEveryDocumentedKey) {
  const auto compiled = gpt3_175b(8, 16, 8);
  const nlohmann::json json = to_json(make_plan(compiled, find_hardware("h100-sxm")), compiled);
  const std::vector<std::pair<std::string, std::vector<std::string>>> keys = {
      {"layout", {"tp", "pp", "dp", "cp", "vpp", "world"}},
      {"parameters", {"total", "per_rank_max", "per_rank_min", "embedding", "per_layer"}},
      {"flops", {"model_per_iteration", "hardware_per_iteration"}},
      {"communication",
       {"tensor_parallel", "pipeline_parallel", "data_parallel", "embedding_sync"}},
      {"schedule", {"name", "microbatches", "bubble_fraction"}},
      {"estimate",
       {"hardware", "step_time_s", "mfu", "tokens_per_second", "fits", "warnings", "suggestions"}},
  };
  for (const auto& [object, members] : keys)
    for (const std::string& member : members)
      EXPECT_TRUE(json[object].contains(member)) << object << "." << member;
  for (const char* member : {"weights", "gradients", "optimizer", "activations", "total"})
    EXPECT_TRUE(json["memory"]["peak_rank"].contains(member)) << member;
  EXPECT_TRUE(json["memory"].contains("peak_stage"));
  EXPECT_TRUE(json.contains("tokens_per_iteration"));
  ASSERT_EQ(json["stages"].size(), 16u);
  for (const char* member :
       {"index", "layers", "parameters_per_rank", "microbatches_in_flight", "memory"})
    EXPECT_TRUE(json["stages"][0].contains(member)) << member;
}

TEST(Report, JsonNumbersAreThePlansNumbers) {
  const auto compiled = gpt3_175b(8, 16, 8);
  const Plan plan = make_plan(compiled, find_hardware("h100-sxm"));
  const nlohmann::json json = to_json(plan, compiled);
  EXPECT_EQ(json["parameters"]["total"].get<int64_t>(), 174'615'846'912);
  EXPECT_EQ(json["stages"][1]["layers"].get<std::vector<int64_t>>().front(), 6);
  EXPECT_DOUBLE_EQ(json["memory"]["peak_rank"]["total"].get<double>(), plan.peak_rank.total());
}

Plan plan_for(const recipe::CompiledRecipe& compiled) {
  return make_plan(compiled, find_hardware("h100-sxm"));
}

// tp 2 x dp 1 x pp 2, v 2, 8 layers, 4 micro-batches: rank 3 is tensor rank 1 of stage 1.
recipe::CompiledRecipe two_by_two() {
  return make_gpt({.layers = 8, .global_batch = 4, .tensor = 2, .pipeline = 2,
                   .virtual_pipeline = 2});
}

TEST(RankReport, NamesTheRanksCoordinatesAndTheLayersOfEachChunk) {
  const std::string text = render_rank(plan_for(two_by_two()), 3);
  EXPECT_THAT(text, HasSubstr("Rank 3 of 4: tensor 1, context 0, data 0, pipeline stage 1 of 2\n"));
  EXPECT_THAT(text, HasSubstr("  chunk 0 (model chunk 1): layers 2-3\n"));
  EXPECT_THAT(text, HasSubstr("  chunk 1 (model chunk 3): layers 6-7\n"));
  EXPECT_THAT(text, HasSubstr("  output layer and loss: yes\n"));
  EXPECT_THAT(text, Not(HasSubstr("embedding: yes")));
}

TEST(RankReport, ListsTheProgramTheEngineRunsOnThatStage) {
  const std::string text = render_rank(plan_for(two_by_two()), 3);
  EXPECT_THAT(text, HasSubstr("Program (interleaved, 4 micro-batches, 2 chunks): 16 ops, 2 warm-up "
                              "forwards, at most 3 chunk activations alive\n"));
  // The last stage warms up with (2-1-1)*2 + (2-1)*2 = 2 forwards, then alternates.
  EXPECT_THAT(text, HasSubstr("  F(c0,mb0) F(c0,mb1) F(c1,mb0) B(c1,mb0) F(c1,mb1) B(c1,mb1)"));
}

TEST(RankReport, JsonHasTheSameFacts) {
  const nlohmann::json json = rank_to_json(plan_for(two_by_two()), 0);
  EXPECT_EQ(json["pp"], 0);
  EXPECT_EQ(json["tp"], 0);
  EXPECT_EQ(json["embedding"], true);
  EXPECT_EQ(json["chunks"][1]["layers"], nlohmann::json::array({4, 5}));
  EXPECT_EQ(json["warmup_forwards"], 4);
  ASSERT_EQ(json["program"].size(), 16u);
  EXPECT_EQ(json["program"][0], nlohmann::json({{"phase", "forward"}, {"chunk", 0}, {"microbatch", 0}}));
}

TEST(RankReport, ARankOutsideTheLayoutIsAUserError) {
  try {
    render_rank(plan_for(two_by_two()), 4);
    FAIL() << "rank 4 accepted";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "--rank 4: the layout has 4 ranks (0..3)");
  }
}

TEST(RankReport, VeryLongProgramsAreCountedNotListed) {
  const std::string text = render_rank(plan_for(make_gpt({.global_batch = 200'000, .pipeline = 2})), 0);
  EXPECT_THAT(text, HasSubstr("400000 ops, 1 warm-up forward, at most 2 chunk activations alive"));
  EXPECT_THAT(text, HasSubstr("(not listed: more than 100000 ops)"));
}

}  // namespace report_test
}  // namespace megatron::plan
