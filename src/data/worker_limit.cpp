#include "data/worker_limit.hpp"

#include <fmt/format.h>


#include "core/error.hpp"
#include "core/parallelism.hpp"

namespace megatron::data {

int max_workers() { return max_parallelism(); }

void check_workers(int workers, std::string_view flag) {
  if (workers < 1) throw UserError(fmt::format("{} {}: must be at least 1", flag, workers));
  const int ceiling = max_workers();
  if (workers > ceiling)
    throw UserError(fmt::format(
        "{} {}: more threads than this machine can usefully run (it has {} cores; the limit is "
        "{}: 4 per core, at least 64, at most 1024); use {} {} or fewer",
        flag, workers, usable_cores(), ceiling, flag, ceiling));
}

}  // namespace megatron::data
