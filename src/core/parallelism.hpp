// How many threads or processes this machine is asked to run at most: one rule for --threads,
// --nproc and --workers, so a typo of 100000 is refused rather than exhausting memory.
#pragma once

namespace megatron {

// The cores this process may run on (its affinity mask: a container's or a job's share).
unsigned usable_cores();

// 4 per usable core (enough to cover I/O stalls and oversubscribed test jobs), at least 64
// (oversubscribing a small machine is slow, not wrong) and at most 1024.
int max_parallelism();

}  // namespace megatron
