#include "generate/server_metrics.hpp"

#include <fmt/format.h>

#include <array>

namespace megatron::generate {
namespace {

constexpr std::array<double, 10> kLatencyBounds = {0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};
constexpr std::chrono::seconds kRateWindow(10);

}  // namespace

void ServerMetrics::answered(const std::string& endpoint, int status, double seconds) {
  std::lock_guard lock(mutex_);
  ++answered_[{endpoint, status}];
  if (buckets_.empty()) buckets_.assign(kLatencyBounds.size(), 0);
  for (size_t i = 0; i < kLatencyBounds.size(); ++i) {
    if (seconds <= kLatencyBounds[i]) ++buckets_[i];
  }
  latency_sum_ += seconds;
  ++latency_count_;
}

void ServerMetrics::abandoned() {
  std::lock_guard lock(mutex_);
  ++abandoned_;
}

void ServerMetrics::tokens(int64_t prompt, int64_t generated, Clock::time_point when) {
  std::lock_guard lock(mutex_);
  prompt_tokens_ += prompt;
  generated_tokens_ += generated;
  recent_.emplace_back(when, generated);
  while (!recent_.empty() && when - recent_.front().first > kRateWindow) recent_.pop_front();
}

void ServerMetrics::queue(int64_t waiting, int64_t running) {
  std::lock_guard lock(mutex_);
  waiting_ = waiting;
  running_ = running;
}

void ServerMetrics::kv_cache(int64_t bytes) {
  std::lock_guard lock(mutex_);
  kv_cache_bytes_ = bytes;
}

void ServerMetrics::kv_blocks(int64_t used, int64_t total) {
  std::lock_guard lock(mutex_);
  blocks_used_ = used;
  blocks_ = total;
}

std::string ServerMetrics::prometheus(Clock::time_point now) const {
  std::lock_guard lock(mutex_);
  std::string out;
  const auto metric = [&](const char* name, const char* type, const char* help) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  };
  metric("megatron_requests_total", "counter", "Requests answered, by endpoint and HTTP status.");
  for (const auto& [key, count] : answered_) {
    out += fmt::format("megatron_requests_total{{endpoint=\"{}\",status=\"{}\"}} {}\n", key.first,
                       key.second, count);
  }
  metric("megatron_requests_abandoned_total", "counter",
         "Requests dropped, queued or running, because their client closed the connection.");
  out += fmt::format("megatron_requests_abandoned_total {}\n", abandoned_);
  metric("megatron_prompt_tokens_total", "counter", "Prompt tokens read.");
  out += fmt::format("megatron_prompt_tokens_total {}\n", prompt_tokens_);
  metric("megatron_generation_tokens_total", "counter", "Tokens generated.");
  out += fmt::format("megatron_generation_tokens_total {}\n", generated_tokens_);
  int64_t recent = 0;
  for (const auto& [when, n] : recent_) {
    if (now - when <= kRateWindow) recent += n;
  }
  metric("megatron_generation_tokens_per_second", "gauge",
         "Tokens generated per second over the last ten seconds.");
  out += fmt::format("megatron_generation_tokens_per_second {}\n", double(recent) / double(kRateWindow.count()));
  metric("megatron_queue_depth", "gauge", "Requests waiting to run.");
  out += fmt::format("megatron_queue_depth {}\n", waiting_);
  metric("megatron_requests_running", "gauge", "Requests generating now.");
  out += fmt::format("megatron_requests_running {}\n", running_);
  metric("megatron_kv_cache_bytes", "gauge", "Bytes of key/value cache held on this rank.");
  out += fmt::format("megatron_kv_cache_bytes {}\n", kv_cache_bytes_);
  metric("megatron_kv_cache_blocks_used", "gauge", "Key/value blocks held by running requests (continuous batching).");
  out += fmt::format("megatron_kv_cache_blocks_used {}\n", blocks_used_);
  metric("megatron_kv_cache_blocks", "gauge", "Key/value blocks in the pool (continuous batching).");
  out += fmt::format("megatron_kv_cache_blocks {}\n", blocks_);
  metric("megatron_request_duration_seconds", "histogram",
         "Time from a request's arrival to its answer's end.");
  for (size_t i = 0; i < kLatencyBounds.size(); ++i) {
    out += fmt::format("megatron_request_duration_seconds_bucket{{le=\"{}\"}} {}\n", kLatencyBounds[i],
                       buckets_.empty() ? 0 : buckets_[i]);
  }
  out += fmt::format("megatron_request_duration_seconds_bucket{{le=\"+Inf\"}} {}\n", latency_count_);
  out += fmt::format("megatron_request_duration_seconds_sum {}\n", latency_sum_);
  out += fmt::format("megatron_request_duration_seconds_count {}\n", latency_count_);
  return out;
}

}  // namespace megatron::generate
