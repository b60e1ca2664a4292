// The order a fine-tuning source reads its rows in for one epoch: a permutation drawn from
// (seed, epoch), shared by every source that shuffles per epoch so that they agree.
#pragma once

#include <cstdint>
#include <vector>

namespace megatron::data {

// 0..n-1 shuffled by Fisher-Yates with mt19937_64(seed * 1000003 + epoch) draws taken modulo by
// hand, so the order is the same with any standard library.
std::vector<int32_t> epoch_order(int64_t n, uint64_t seed, int64_t epoch);

}  // namespace megatron::data
