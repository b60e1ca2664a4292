// The median of timed calls, each measured on the backend's clock and closed by its synchronisation.
#include "ops/op_timer.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

namespace megatron::ops_test {

OpTiming time_op(tensor::Backend& backend, const std::function<void()>& call,
                 const TimerOptions& options) {
  using Clock = std::chrono::steady_clock;
  const auto since = [](Clock::time_point begin) {
    return std::chrono::duration<double, std::milli>(Clock::now() - begin).count();
  };
  const auto warm_begin = Clock::now();
  for (int i = 0; i < options.warmup; ++i) {
    call();
    backend.synchronize();
    if (since(warm_begin) > options.budget_ms / 2) break;  // a slow op: warm enough already
  }
  backend.synchronize();
  const int at_least = std::min(3, options.reps);
  std::vector<double> ms;
  double spent = 0.0;
  // The backend's clock (CUDA events on the GPU), as the run's --profile times ops: what the
  // device spent, without the host's launch and synchronisation latency.
  const std::unique_ptr<tensor::OpClock> clock = backend.make_clock();
  while (int(ms.size()) < options.reps) {
    clock->clear();
    const int64_t begin = clock->mark();
    call();
    const int64_t end = clock->mark();
    backend.synchronize();
    ms.push_back(clock->elapsed_ms(begin, end));
    spent += ms.back();
    if (spent > options.budget_ms && int(ms.size()) >= at_least) break;
  }
  std::sort(ms.begin(), ms.end());
  const size_t mid = ms.size() / 2;
  return {.median_ms = ms.size() % 2 == 1 ? ms[mid] : 0.5 * (ms[mid - 1] + ms[mid]),
          .reps = int(ms.size())};
}

}  // namespace megatron::ops_test
