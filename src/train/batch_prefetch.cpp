#include "train/batch_prefetch.hpp"

#include <stdexcept>

namespace megatron::train {

BatchPrefetcher::BatchPrefetcher(const data::SampleSource& source, BatchSpec spec, int64_t count,
                                 int64_t stride, int workers, int depth)
    : source_(source), spec_(spec), count_(count), stride_(stride), depth_(depth) {
  if (workers < 1 || depth < 1 || count < 1 || stride < 1)
    throw std::invalid_argument("BatchPrefetcher: workers, depth, count and stride must be >= 1");
  threads_.reserve(static_cast<std::size_t>(workers));
  for (int i = 0; i < workers; ++i) threads_.emplace_back([this] { work(); });
}

BatchPrefetcher::~BatchPrefetcher() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    jobs_.clear();
  }
  wake_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void BatchPrefetcher::schedule(int64_t first) {
  std::packaged_task<HostBatch()> job(
      [this, first] { return assemble_batch(source_, first, count_, spec_); });
  pending_.push_back({first, job.get_future()});
  {
    std::lock_guard lock(mutex_);
    jobs_.push_back(std::move(job));
  }
  wake_.notify_one();
}

void BatchPrefetcher::work() {
  for (;;) {
    std::packaged_task<HostBatch()> job;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();  // an exception is stored in the future, for take() to rethrow
  }
}

HostBatch BatchPrefetcher::take(int64_t first) {
  HostBatch batch;
  if (!pending_.empty() && pending_.front().first == first) {
    batch = pending_.front().result.get();
    pending_.pop_front();
  } else {
    // Off the progression: drop what was guessed (queued jobs go unrun; running ones finish
    // into futures nobody reads) and assemble this one here.
    {
      std::lock_guard lock(mutex_);
      jobs_.clear();
    }
    pending_.clear();
    batch = assemble_batch(source_, first, count_, spec_);
  }
  int64_t next = pending_.empty() ? first + stride_ : pending_.back().first + stride_;
  while (static_cast<int>(pending_.size()) < depth_) {
    schedule(next);
    next += stride_;
  }
  return batch;
}

}  // namespace megatron::train
