#include "train/batch_prefetch.hpp"

#include <gtest/gtest.h>

#include <atomic>

#include "core/error.hpp"

namespace megatron::train {
namespace {

// Sample i is the tokens i, i + 1, i + 2 (labels one on); sample `bad` holds an id outside the
// vocabulary. Counts the samples read.
class Counting : public data::SampleSource {
 public:
  explicit Counting(int64_t bad = -1) : bad_(bad) {}
  int64_t size() const override { return 1000; }
  data::Sample sample(int64_t i) const override {
    ++reads;
    data::Sample s;
    for (int32_t t = 0; t < 3; ++t) {
      s.tokens.push_back(i == bad_ ? 99999 : int32_t(i + t));
      s.labels.push_back(int32_t(i + t + 1));
      s.position_ids.push_back(t);
      s.loss_mask.push_back(1.0f);
    }
    return s;
  }
  mutable std::atomic<int64_t> reads{0};

 private:
  int64_t bad_;
};

const BatchSpec kSpec{.vocab_size = 2000};

TEST(BatchPrefetch, BatchesAlongTheProgressionAreTheOnesAssembledDirectly) {
  Counting source;
  BatchPrefetcher prefetcher(source, kSpec, /*count=*/2, /*stride=*/4, /*workers=*/2, /*depth=*/3);
  for (int64_t first = 1; first < 60; first += 4) {
    const HostBatch got = prefetcher.take(first);
    const HostBatch want = assemble_batch(source, first, 2, kSpec);
    EXPECT_EQ(got.tokens, want.tokens) << first;
    EXPECT_EQ(got.labels, want.labels) << first;
    EXPECT_EQ(got.seq, 3);
  }
}

TEST(BatchPrefetch, ARequestOffTheProgressionIsServedAndRestartsIt) {
  Counting source;
  BatchPrefetcher prefetcher(source, kSpec, 2, 4, 1, 2);
  prefetcher.take(0);
  EXPECT_EQ(prefetcher.take(500).tokens, assemble_batch(source, 500, 2, kSpec).tokens);
  EXPECT_EQ(prefetcher.take(504).tokens, assemble_batch(source, 504, 2, kSpec).tokens);
}

TEST(BatchPrefetch, ItReadsAheadOfTheRequests) {
  Counting source;
  BatchPrefetcher prefetcher(source, kSpec, 2, 2, 2, 4);
  prefetcher.take(0);  // 2 samples now, then 4 batches of 2 ahead
  for (int i = 0; i < 2000 && source.reads < 10; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(source.reads, 10);
}

TEST(BatchPrefetch, AnErrorInAWorkerReachesTheCaller) {
  Counting source(/*bad=*/7);
  BatchPrefetcher prefetcher(source, kSpec, 2, 2, 2, 4);
  prefetcher.take(0);
  prefetcher.take(2);
  prefetcher.take(4);
  EXPECT_THROW(prefetcher.take(6), UserError);
}

}  // namespace
}  // namespace megatron::train
