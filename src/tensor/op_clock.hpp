// Timing work on a backend's device without stalling it: marks recorded in the order work is
// queued, read back after a synchronisation. The profile and the op harness's timer both use it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

namespace megatron::tensor {

// A mark records when the work queued before it finishes: on the CPU, where every op returns
// finished, the clock's time; on a GPU, an event on the compute stream. Marks are indices in
// recording order and stay valid until clear().
class OpClock {
 public:
  virtual ~OpClock() = default;
  virtual int64_t mark() = 0;
  // Milliseconds from mark `from` to mark `to`; the backend must have been synchronised since
  // `to` was recorded.
  virtual double elapsed_ms(int64_t from, int64_t to) = 0;
  virtual void clear() = 0;
};

// The host's steady clock: exact for a backend whose ops finish before they return.
class HostClock final : public OpClock {
 public:
  int64_t mark() override {
    times_.push_back(std::chrono::steady_clock::now());
    return int64_t(times_.size()) - 1;
  }
  double elapsed_ms(int64_t from, int64_t to) override {
    return std::chrono::duration<double, std::milli>(times_.at(size_t(to)) -
                                                     times_.at(size_t(from))).count();
  }
  void clear() override { times_.clear(); }

 private:
  std::vector<std::chrono::steady_clock::time_point> times_;
};

}  // namespace megatron::tensor
