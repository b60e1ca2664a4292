#include "plan/schedule.hpp"

namespace megatron::plan {

Schedule make_schedule(const ModelShape& x) {
  Schedule out;
  switch (x.schedule) {
    case recipe::Schedule::OneFOneB:
      out.name = "1f1b";
      break;
    case recipe::Schedule::Interleaved:
      out.name = "interleaved";
      break;
    case recipe::Schedule::AllForwardAllBackward:
      out.name = "all-forward-all-backward";
      break;
  }
  out.microbatches = x.m;
  // A stage works v m chunk-slots of (1/v) the time each and waits (p - 1) slots in total while
  // the pipeline fills and drains; interleaving shrinks the slots, not the count.
  const int64_t v = x.schedule == recipe::Schedule::Interleaved ? x.v : 1;
  const double p = static_cast<double>(x.p);
  out.bubble_fraction = (p - 1) / (static_cast<double>(v) * static_cast<double>(x.m) + p - 1);
  return out;
}

}  // namespace megatron::plan
