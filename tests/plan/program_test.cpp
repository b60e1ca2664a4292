// Pipeline programs: every pass runs once, all stages together finish without deadlock, the
// orders and activation peaks match Megatron-LM's schedules (hand-checked sequences), and the
// simulated bubble matches the closed forms.
#include "plan/program.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "recipe/enum_names.hpp"

namespace megatron::plan {
namespace program_test {

PipelineOp F(int chunk, int microbatch) { return {Phase::Forward, chunk, microbatch}; }
PipelineOp B(int chunk, int microbatch) { return {Phase::Backward, chunk, microbatch}; }

struct Case {
  recipe::Schedule kind;
  int p, v, m;
};

std::string describe(const Case& c) {
  return std::string(recipe::name_of(c.kind)) + " p=" + std::to_string(c.p) + " v=" + std::to_string(c.v) +
         " m=" + std::to_string(c.m);
}

bool allowed(const Case& c) {
  switch (c.kind) {
    case recipe::Schedule::AllForwardAllBackward:
      return true;
    case recipe::Schedule::OneFOneB:
      return c.v == 1;
    case recipe::Schedule::Interleaved:
      return c.v > 1 && c.m % c.p == 0;
  }
  return false;
}

// Every (kind, p, v, m) the schedules accept with p in 1..4, v in 1..3, m in 1..12.
std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (recipe::Schedule kind :
       {recipe::Schedule::AllForwardAllBackward, recipe::Schedule::OneFOneB, recipe::Schedule::Interleaved})
    for (int p = 1; p <= 4; ++p)
      for (int v = 1; v <= 3; ++v)
        for (int m = 1; m <= 12; ++m)
          if (allowed({kind, p, v, m})) cases.push_back({kind, p, v, m});
  return cases;
}

std::vector<std::vector<PipelineOp>> all_stages(const Case& c) {
  std::vector<std::vector<PipelineOp>> stages;
  for (int s = 0; s < c.p; ++s) stages.push_back(stage_program(c.kind, c.p, s, c.v, c.m));
  return stages;
}

struct Located {
  int stage;
  PipelineOp op;
};

// The ops that must complete before `op` can run on `stage`: the activation from the previous
// model position, the gradient from the next one, and a stage's own forward before its backward.
std::vector<Located> dependencies(const Case& c, int stage, const PipelineOp& op) {
  std::vector<Located> deps;
  const int last = c.p - 1;
  if (op.phase == Phase::Forward) {
    if (stage > 0)
      deps.push_back({stage - 1, op});
    else if (op.chunk > 0)
      deps.push_back({last, {Phase::Forward, op.chunk - 1, op.microbatch}});
    return deps;
  }
  deps.push_back({stage, {Phase::Forward, op.chunk, op.microbatch}});
  if (stage < last)
    deps.push_back({stage + 1, op});
  else if (op.chunk < c.v - 1)
    deps.push_back({0, {Phase::Backward, op.chunk + 1, op.microbatch}});
  return deps;
}

class Completed {
 public:
  explicit Completed(const Case& c) : c_(c), done_(2 * c.p * c.v * c.m, false) {}
  bool has(const Located& x) const { return done_[index(x)]; }
  void add(const Located& x) { done_[index(x)] = true; }

 private:
  size_t index(const Located& x) const {
    const int phase = x.op.phase == Phase::Forward ? 0 : 1;
    return static_cast<size_t>(((phase * c_.p + x.stage) * c_.v + x.op.chunk) * c_.m +
                               x.op.microbatch);
  }
  Case c_;
  std::vector<bool> done_;
};

// Runs every stage's list in order, in rounds; an op waits (blocking receive) until what it
// depends on has completed, and sends never wait. Returns "" or a description of the stall.
std::string simulate(const Case& c, const std::vector<std::vector<PipelineOp>>& stages) {
  std::vector<size_t> next(c.p, 0);
  Completed completed(c);
  for (bool progressed = true; progressed;) {
    progressed = false;
    for (int s = 0; s < c.p; ++s) {
      if (next[s] == stages[s].size()) continue;
      const PipelineOp& op = stages[s][next[s]];
      const auto deps = dependencies(c, s, op);
      if (!std::all_of(deps.begin(), deps.end(), [&](auto& d) { return completed.has(d); }))
        continue;
      completed.add({s, op});
      ++next[s];
      progressed = true;
    }
  }
  std::string stalled;
  for (int s = 0; s < c.p; ++s)
    if (next[s] < stages[s].size())
      stalled += " stage " + std::to_string(s) + " waits at " + to_string(stages[s][next[s]]);
  return stalled;
}

std::vector<std::string> strings(const std::vector<PipelineOp>& ops) {
  std::vector<std::string> out;
  for (const PipelineOp& op : ops) out.push_back(to_string(op));
  return out;
}

TEST(PipelineSchedule, EveryChunkAndMicroBatchRunsOnceForwardAndOnceBackwardOnEachStage) {
  for (const Case& c : all_cases()) {
    for (int s = 0; s < c.p; ++s) {
      SCOPED_TRACE(describe(c) + " stage " + std::to_string(s));
      std::map<std::tuple<int, int, int>, int> count;
      for (const PipelineOp& op : stage_program(c.kind, c.p, s, c.v, c.m))
        ++count[{static_cast<int>(op.phase), op.chunk, op.microbatch}];
      ASSERT_EQ(count.size(), static_cast<size_t>(2 * c.v * c.m));
      for (const auto& [op, times] : count) {
        EXPECT_EQ(times, 1);
        EXPECT_TRUE(std::get<1>(op) >= 0 && std::get<1>(op) < c.v);
        EXPECT_TRUE(std::get<2>(op) >= 0 && std::get<2>(op) < c.m);
      }
    }
  }
}

TEST(PipelineSchedule, AllStagesRunningTheirListsTogetherFinishWithoutDeadlock) {
  for (const Case& c : all_cases()) EXPECT_EQ(simulate(c, all_stages(c)), "") << describe(c);
}

// Guards the check above: stage 0 waits for a gradient that stage 1 only computes after a
// forward stage 0 has not sent yet.
TEST(PipelineSchedule, SimulationReportsStagesWaitingOnEachOther) {
  const Case c{recipe::Schedule::OneFOneB, 2, 1, 2};
  EXPECT_EQ(
      simulate(c, {{F(0, 0), B(0, 0), F(0, 1), B(0, 1)}, {F(0, 0), F(0, 1), B(0, 0), B(0, 1)}}),
      " stage 0 waits at B(c0,mb0) stage 1 waits at F(c0,mb1)");
}

TEST(PipelineSchedule, MicroBatchesRunInIncreasingOrderWithinEachChunkAndPhase) {
  for (const Case& c : all_cases()) {
    for (int s = 0; s < c.p; ++s) {
      SCOPED_TRACE(describe(c) + " stage " + std::to_string(s));
      std::map<std::pair<int, int>, int> last;  // (phase, chunk) -> last micro-batch seen
      for (const PipelineOp& op : stage_program(c.kind, c.p, s, c.v, c.m)) {
        const auto key = std::make_pair(static_cast<int>(op.phase), op.chunk);
        const auto it = last.find(key);
        if (it != last.end()) {
          EXPECT_GT(op.microbatch, it->second) << to_string(op);
        }
        last[key] = op.microbatch;
      }
    }
  }
}

TEST(PipelineSchedule, OneFOneBKeepsTheDistanceToTheLastStageInFlightCappedByMicroBatches) {
  for (int p = 1; p <= 4; ++p)
    for (int m = 1; m <= 12; ++m)
      for (int s = 0; s < p; ++s)
        EXPECT_EQ(peak_in_flight(stage_program(recipe::Schedule::OneFOneB, p, s, 1, m)),
                  std::min(p - s, m))
            << "p=" << p << " m=" << m << " stage " << s;
}

TEST(PipelineSchedule, PeakChunksInFlightIsThePeakOfTheProgramWithoutBuildingIt) {
  for (const Case& c : all_cases())
    for (int s = 0; s < c.p; ++s)
      EXPECT_EQ(peak_chunks_in_flight(c.kind, c.p, s, c.v, c.m),
                peak_in_flight(stage_program(c.kind, c.p, s, c.v, c.m)))
          << describe(c) << " stage " << s;
}

TEST(PipelineSchedule, AllForwardAllBackwardHoldsEveryChunkOfEveryMicroBatch) {
  for (const Case& c : all_cases()) {
    if (c.kind != recipe::Schedule::AllForwardAllBackward) continue;
    for (int s = 0; s < c.p; ++s)
      EXPECT_EQ(peak_in_flight(stage_program(c.kind, c.p, s, c.v, c.m)), c.m * c.v)
          << describe(c) << " stage " << s;
  }
}

TEST(PipelineSchedule, InterleavedHoldsFewerActivationsOnTheFirstStageThanAllForwardAllBackward) {
  for (const Case& c : all_cases()) {
    // With m == p the first stage's warm-up already covers the whole iteration.
    if (c.kind != recipe::Schedule::Interleaved || c.m == c.p) continue;
    const int afab =
        peak_in_flight(stage_program(recipe::Schedule::AllForwardAllBackward, c.p, 0, c.v, c.m));
    EXPECT_LT(peak_in_flight(stage_program(c.kind, c.p, 0, c.v, c.m)), afab) << describe(c);
  }
}

TEST(PipelineSchedule, InterleavedRunsEveryForwardFirstWhenWarmUpWouldExceedTheIteration) {
  // p=4 v=2 m=4: stage 0 would warm up with 3*2 + 4 = 10 > 8 forwards, stage 3 with 4.
  EXPECT_EQ(peak_in_flight(stage_program(recipe::Schedule::Interleaved, 4, 0, 2, 4)), 8);
  EXPECT_EQ(peak_in_flight(stage_program(recipe::Schedule::Interleaved, 4, 3, 2, 4)), 5);
}

TEST(PipelineSchedule, AllForwardAllBackwardRunsChunksInModelOrderThenBackwardsInReverse) {
  EXPECT_EQ(strings(stage_program(recipe::Schedule::AllForwardAllBackward, 3, 1, 2, 2)),
            strings({F(0, 0), F(0, 1), F(1, 0), F(1, 1), B(1, 0), B(1, 1), B(0, 0), B(0, 1)}));
}

TEST(PipelineSchedule, OneFOneBOnFirstOfTwoStagesWarmsUpWithOneForward) {
  EXPECT_EQ(strings(stage_program(recipe::Schedule::OneFOneB, 2, 0, 1, 4)),
            strings({F(0, 0), F(0, 1), B(0, 0), F(0, 2), B(0, 1), F(0, 3), B(0, 2), B(0, 3)}));
}

TEST(PipelineSchedule, OneFOneBOnLastStageAlternatesFromTheStart) {
  EXPECT_EQ(strings(stage_program(recipe::Schedule::OneFOneB, 2, 1, 1, 4)),
            strings({F(0, 0), B(0, 0), F(0, 1), B(0, 1), F(0, 2), B(0, 2), F(0, 3), B(0, 3)}));
}

TEST(PipelineSchedule, OneFOneBWithFewerMicroBatchesThanStagesIsAllForwardThenAllBackward) {
  EXPECT_EQ(strings(stage_program(recipe::Schedule::OneFOneB, 4, 0, 1, 2)),
            strings({F(0, 0), F(0, 1), B(0, 0), B(0, 1)}));
}

// By hand from Megatron's rules, p=2 v=2 m=4 (8 virtual micro-batches). Virtual k runs forward
// chunk (k/2)%2 on micro-batch (k/4)*2 + k%2: c0m0 c0m1 c1m0 c1m1 c0m2 c0m3 c1m2 c1m3; backward
// chunk 1-(k/2)%2: c1m0 c1m1 c0m0 c0m1 c1m2 c1m3 c0m2 c0m3. Stage 0 warms up with
// (2-0-1)*2 + (2-1)*2 = 4 of the 8 forwards, then 4 forward/backward pairs, then 4 backwards.
TEST(PipelineSchedule, InterleavedOnFirstOfTwoStagesMatchesMegatronsOrder) {
  EXPECT_EQ(strings(stage_program(recipe::Schedule::Interleaved, 2, 0, 2, 4)),
            strings({F(0, 0), F(0, 1), F(1, 0), F(1, 1),     // warm-up
                     F(0, 2), B(1, 0), F(0, 3), B(1, 1),     // steady
                     F(1, 2), B(0, 0), F(1, 3), B(0, 1),     //
                     B(1, 2), B(1, 3), B(0, 2), B(0, 3)}));  // cool-down
}

// Same order; the last stage warms up with only (2-1-1)*2 + (2-1)*2 = 2 forwards.
TEST(PipelineSchedule, InterleavedOnLastOfTwoStagesWarmsUpWithOneGroupLess) {
  EXPECT_EQ(strings(stage_program(recipe::Schedule::Interleaved, 2, 1, 2, 4)),
            strings({F(0, 0), F(0, 1),                                      // warm-up
                     F(1, 0), B(1, 0), F(1, 1), B(1, 1), F(0, 2), B(0, 0),  // steady
                     F(0, 3), B(0, 1), F(1, 2), B(1, 2), F(1, 3), B(1, 3),  //
                     B(0, 2), B(0, 3)}));                                   // cool-down
}

TEST(PipelineSchedule, PeakInFlightCountsForwardsNotYetMatchedByBackwards) {
  EXPECT_EQ(peak_in_flight({}), 0);
  EXPECT_EQ(peak_in_flight({F(0, 0), F(0, 1), B(0, 0), F(0, 2), F(0, 3), B(0, 1)}), 3);
}

TEST(PipelineSchedule, InterleavedRejectsMicroBatchesNotAMultipleOfThePipelineSize) {
  try {
    stage_program(recipe::Schedule::Interleaved, 4, 0, 2, 6);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              "interleaved pipeline schedule: 6 micro-batches per iteration is not a multiple "
              "of the pipeline size 4");
  }
}

TEST(PipelineSchedule, InterleavedRejectsASingleChunk) {
  EXPECT_THROW(stage_program(recipe::Schedule::Interleaved, 2, 0, 1, 4), std::invalid_argument);
}

TEST(PipelineSchedule, OneFOneBRejectsMoreThanOneChunk) {
  EXPECT_THROW(stage_program(recipe::Schedule::OneFOneB, 2, 0, 2, 4), std::invalid_argument);
}

TEST(PipelineSchedule, RejectsAStageOutsideThePipeline) {
  EXPECT_THROW(stage_program(recipe::Schedule::OneFOneB, 2, 2, 1, 4), std::invalid_argument);
  EXPECT_THROW(stage_program(recipe::Schedule::AllForwardAllBackward, 2, -1, 1, 4),
               std::invalid_argument);
}

TEST(PipelineSchedule, RejectsSizesBelowOne) {
  EXPECT_THROW(stage_program(recipe::Schedule::AllForwardAllBackward, 0, 0, 1, 4),
               std::invalid_argument);
  EXPECT_THROW(stage_program(recipe::Schedule::AllForwardAllBackward, 2, 0, 0, 4),
               std::invalid_argument);
  EXPECT_THROW(stage_program(recipe::Schedule::OneFOneB, 2, 0, 1, 0), std::invalid_argument);
}

TEST(PipelineSchedule, RejectsMorePassesThanAnIterationCanRun) {
  EXPECT_THROW(stage_program(recipe::Schedule::AllForwardAllBackward, 2, 0, 1024, 1 << 20),
               std::invalid_argument);
  EXPECT_THROW(stage_program(recipe::Schedule::OneFOneB, int64_t{1} << 31, 0, 1, 4),
               std::invalid_argument);
}

ProgramTiming timing_of(const Case& c) { return time_programs(all_stages(c), c.v, c.m); }

// The closed forms the plan used before it simulated: a stage waits p - 1 slots of 3/v units
// while the pipeline fills and drains, over v m slots of work.
double closed_form_bubble(const Case& c) {
  const int v = c.kind == recipe::Schedule::Interleaved ? c.v : 1;
  return double(c.p - 1) / (double(v) * c.m + c.p - 1);
}

TEST(PipelineTiming, OneFOneBBubbleIsPMinus1OverMPlusPMinus1) {
  for (const Case& c : all_cases()) {
    if (c.kind != recipe::Schedule::OneFOneB) continue;
    EXPECT_NEAR(timing_of(c).bubble_fraction(), closed_form_bubble(c), 1e-12) << describe(c);
  }
}

TEST(PipelineTiming, AllForwardAllBackwardWithOneChunkHasThe1F1BBubble) {
  for (const Case& c : all_cases()) {
    if (c.kind != recipe::Schedule::AllForwardAllBackward || c.v != 1) continue;
    EXPECT_NEAR(timing_of(c).bubble_fraction(), closed_form_bubble(c), 1e-12) << describe(c);
  }
}

// Megatron's interleaving promises (p - 1) / (v m + p - 1) when m is a multiple of p; its
// warm-up order reaches that bound exactly with enough micro-batches to fill the steady phase.
TEST(PipelineTiming, InterleavedBubbleShrinksByTheChunksAsMegatronPromises) {
  for (const Case& c : all_cases()) {
    if (c.kind != recipe::Schedule::Interleaved || c.p == 1) continue;
    const double bubble = timing_of(c).bubble_fraction();
    EXPECT_GE(bubble, closed_form_bubble(c) - 1e-12) << describe(c);
    EXPECT_LT(bubble, double(c.p - 1) / (c.m + c.p - 1)) << describe(c) << ": no better than 1F1B";
  }
}

TEST(PipelineTiming, OneStageHasNoBubble) {
  EXPECT_DOUBLE_EQ(timing_of({recipe::Schedule::OneFOneB, 1, 1, 8}).bubble_fraction(), 0.0);
  EXPECT_DOUBLE_EQ(timing_of({recipe::Schedule::OneFOneB, 1, 1, 8}).makespan, 24.0);
}

TEST(PipelineTiming, StagesWaitingOnEachOtherAreADeadlockNamingTheirOps) {
  try {
    time_programs({{F(0, 0), B(0, 0), F(0, 1), B(0, 1)}, {F(0, 0), F(0, 1), B(0, 0), B(0, 1)}}, 1,
                  2);
    FAIL() << "no deadlock reported";
  } catch (const std::logic_error& e) {
    EXPECT_STREQ(e.what(), "pipeline programs deadlock: stage 0 waits at B(c0,mb0) stage 1 waits "
                           "at F(c0,mb1)");
  }
}

TEST(PipelineTiming, RefusesOpsOutsideTheChunksAndMicroBatchesItWasGiven) {
  EXPECT_THROW(time_programs({{F(0, 0), B(0, 0), F(0, 2), B(0, 2)}}, 1, 2), std::invalid_argument);
  EXPECT_THROW(time_programs({{F(1, 0), B(1, 0)}}, 1, 1), std::invalid_argument);
  EXPECT_THROW(time_programs({{F(0, -1), B(0, -1)}}, 1, 1), std::invalid_argument);
}

TEST(PipelineTiming, RefusesProgramsTooLongToSimulate) {
  EXPECT_THROW(time_programs(std::vector<std::vector<PipelineOp>>(64), 1, int64_t{1} << 20),
               std::invalid_argument);
}

}  // namespace program_test
}  // namespace megatron::plan
