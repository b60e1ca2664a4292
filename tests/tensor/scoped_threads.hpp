// Runs a scope on a given number of OpenMP threads and restores the previous count after it:
// the determinism tests compare results across thread counts.
#pragma once

#include <omp.h>

namespace megatron::test_support {

class ScopedThreads {
 public:
  explicit ScopedThreads(int threads) : saved_(omp_get_max_threads()) {
    omp_set_num_threads(threads);
  }
  ~ScopedThreads() { omp_set_num_threads(saved_); }
  ScopedThreads(const ScopedThreads&) = delete;
  ScopedThreads& operator=(const ScopedThreads&) = delete;

 private:
  int saved_;
};

}  // namespace megatron::test_support
