// Micro-batches assembled on data.num_workers background threads ahead of the step that needs
// them, so reading and masking samples is off the training loop's critical path.
//
// A rank's training micro-batches start at samples that form one arithmetic progression (the
// next starts `stride` = data-parallel size x micro-batch size later, across iterations too), so
// the prefetcher assembles the next `depth` of them while the model computes. A request off the
// progression (the first, or one after a resume) is assembled at once and restarts it. Batches
// are pure functions of their first sample, so results never depend on the workers.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "train/host_batch.hpp"

namespace megatron::train {

class BatchPrefetcher {
 public:
  // `source` must outlive the prefetcher. workers >= 1; depth >= 1 micro-batches in flight.
  BatchPrefetcher(const data::SampleSource& source, BatchSpec spec, int64_t count, int64_t stride,
                  int workers, int depth);
  ~BatchPrefetcher();
  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;

  // The `count` samples from `first`; rethrows what assembling them threw.
  HostBatch take(int64_t first);

 private:
  struct Pending {
    int64_t first;
    std::future<HostBatch> result;
  };
  void schedule(int64_t first);  // caller holds no lock
  void work();

  const data::SampleSource& source_;
  const BatchSpec spec_;
  const int64_t count_, stride_;
  const int depth_;
  std::deque<Pending> pending_;  // touched by take() only
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::packaged_task<HostBatch()>> jobs_;  // guarded by mutex_
  bool stopping_ = false;                              // guarded by mutex_
  std::vector<std::thread> threads_;
};

}  // namespace megatron::train
