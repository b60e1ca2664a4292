#include "plan/stage_programs.hpp"

namespace megatron::plan {

const std::vector<PipelineOp>& StagePrograms::at(int64_t microbatches) {
  auto it = made_.find(microbatches);
  if (it == made_.end()) {
    it = made_.emplace(microbatches, stage_program(plan_.schedule.kind, plan_.layout.pp, stage_,
                                                   plan_.schedule.chunks, microbatches))
             .first;
  }
  return it->second;
}

}  // namespace megatron::plan
