// What the generation server counts, and its Prometheus text (GET /metrics): requests by
// endpoint and status, requests whose clients left, prompt and generated tokens, the queue,
// the key/value cache, the generation rate over the last ten seconds and request latency.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace megatron::generate {

class ServerMetrics {
 public:
  using Clock = std::chrono::steady_clock;

  // A request answered (or refused) with `status`, `seconds` after it arrived.
  void answered(const std::string& endpoint, int status, double seconds);
  // A request dropped because its client closed the connection.
  void abandoned();
  void tokens(int64_t prompt, int64_t generated, Clock::time_point when = Clock::now());
  void queue(int64_t waiting, int64_t running);
  void kv_cache(int64_t bytes);
  void kv_blocks(int64_t used, int64_t total);
  // Prometheus' text exposition format, version 0.0.4.
  std::string prometheus(Clock::time_point now = Clock::now()) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, int64_t> answered_;
  int64_t abandoned_ = 0;
  int64_t prompt_tokens_ = 0, generated_tokens_ = 0;
  int64_t waiting_ = 0, running_ = 0, kv_cache_bytes_ = 0, blocks_used_ = 0, blocks_ = 0;
  std::deque<std::pair<Clock::time_point, int64_t>> recent_;  // generated tokens, last 10 s
  std::vector<int64_t> buckets_;  // request latency, cumulative per kLatencyBounds
  double latency_sum_ = 0.0;
  int64_t latency_count_ = 0;
};

}  // namespace megatron::generate
