// One stage's programs as the engine runs them: the Plan's schedule for this stage at a number of
// micro-batches (fewer while the batch ramps up), made once per size and kept.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "plan/plan.hpp"
#include "plan/program.hpp"

namespace megatron::plan {

class StagePrograms {
 public:
  // `plan` must outlive this.
  StagePrograms(const Plan& plan, int64_t stage) : plan_(plan), stage_(stage) {}
  // stage_program(the plan's schedule, pipeline, this stage, chunks, microbatches).
  const std::vector<PipelineOp>& at(int64_t microbatches);

 private:
  const Plan& plan_;
  int64_t stage_;
  std::map<int64_t, std::vector<PipelineOp>> made_;
};

}  // namespace megatron::plan
