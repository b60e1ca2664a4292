#include "plan/schedule.hpp"

#include "plan/program.hpp"
#include "recipe/enum_names.hpp"

namespace megatron::plan {

Schedule make_schedule(const ModelShape& x) {
  Schedule out{.name = std::string(recipe::name_of(x.schedule)),
               .kind = x.schedule,
               .microbatches = x.m,
               .chunks = x.v};
  // In doubles: a recipe at its ceilings has more ops than int64_t counts.
  const double ops = 2.0 * double(x.p) * double(x.v) * double(x.m);
  if (ops <= double(kMaxSimulatedOps)) {
    std::vector<std::vector<PipelineOp>> programs;
    for (int64_t stage = 0; stage < x.p; ++stage)
      programs.push_back(stage_program(x.schedule, x.p, stage, x.v, x.m));
    out.bubble_fraction = time_programs(programs, x.v, x.m).bubble_fraction();
    out.bubble_simulated = true;
  } else {
    // A stage works v m chunk-slots of (1/v) the time each and waits (p - 1) slots in total
    // while the pipeline fills and drains; interleaving shrinks the slots, not the count.
    const int64_t v = x.schedule == recipe::Schedule::Interleaved ? x.v : 1;
    const double p = static_cast<double>(x.p);
    out.bubble_fraction = (p - 1) / (static_cast<double>(v) * static_cast<double>(x.m) + p - 1);
  }
  return out;
}

}  // namespace megatron::plan
