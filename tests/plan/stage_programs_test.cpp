// A stage's programs as the engine runs them: the Plan's schedule at each micro-batch count
// (ramp-up sizes included), made once and kept.
#include "plan/stage_programs.hpp"

#include <gtest/gtest.h>

#include "gpt_recipe.hpp"

namespace megatron::plan {
namespace stage_programs_test {

// pp 2, v 2, 8 micro-batches at the full batch.
Plan interleaved() {
  return make_plan(testing::make_gpt({.layers = 8, .global_batch = 8, .pipeline = 2,
                                      .virtual_pipeline = 2}),
                   find_hardware("h100-sxm"));
}

TEST(StagePrograms, AreThePlansScheduleForThatStageAndSize) {
  const Plan plan = interleaved();
  StagePrograms programs(plan, 1);
  EXPECT_EQ(programs.at(8), stage_program(plan.schedule.kind, 2, 1, 2, 8));
  EXPECT_EQ(programs.at(4), stage_program(plan.schedule.kind, 2, 1, 2, 4));
}

TEST(StagePrograms, AreMadeOncePerSize) {
  const Plan plan = interleaved();
  StagePrograms programs(plan, 0);
  const std::vector<PipelineOp>* first = &programs.at(8);
  programs.at(4);
  EXPECT_EQ(&programs.at(8), first);
}

}  // namespace stage_programs_test
}  // namespace megatron::plan
