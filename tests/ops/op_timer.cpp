// The median of timed calls, each closed by the backend's synchronisation.
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
  while (int(ms.size()) < options.reps) {
    const auto begin = Clock::now();
    call();
    backend.synchronize();
    ms.push_back(since(begin));
    spent += ms.back();
    if (spent > options.budget_ms && int(ms.size()) >= at_least) break;
  }
  std::sort(ms.begin(), ms.end());
  const size_t mid = ms.size() / 2;
  return {.median_ms = ms.size() % 2 == 1 ? ms[mid] : 0.5 * (ms[mid - 1] + ms[mid]),
          .reps = int(ms.size())};
}

}  // namespace megatron::ops_test
