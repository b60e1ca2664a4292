#include "data/bpe_merge.hpp"

#include <atomic>
#include <functional>

namespace megatron::data {

namespace {
std::atomic<uint64_t> serials{1};
}  // namespace

uint64_t next_bpe_serial() { return serials.fetch_add(1); }

BpeThreadState& bpe_thread_state(uint64_t serial) {
  thread_local BpeThreadState state;
  if (state.owner != serial) {
    state.cache.clear();
    state.owner = serial;
  }
  return state;
}

uint64_t hash_word(std::string_view word) {
  uint64_t h = 0x9E3779B97F4A7C15ULL ^ word.size();
  const char* p = word.data();
  std::size_t n = word.size();
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t chunk = 0;
    std::memcpy(&chunk, p, 8);
    h = (h ^ chunk) * 0xFF51AFD7ED558CCDULL;
    h ^= h >> 32;
  }
  uint64_t tail = 0;
  for (std::size_t i = 0; i < n; ++i) tail |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
  h = (h ^ tail) * 0xC4CEB9FE1A85EC53ULL;
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDULL;
  return h ^ (h >> 33);
}

// encoder.py's loop: find the best-ranked adjacent pair, merge every occurrence of it left to
// right, repeat. A heap of (rank, position) finds the best pair in O(log n) rather than a scan
// of the word, which matters for long runs (a paragraph of CJK is one pre-token). Each round
// pops every candidate of the best rank before merging, so pairs the round creates wait for
// the next round exactly as in encoder.py. Stale candidates (a side already merged) are
// skipped when popped: a position's token only ever grows, so a pair that still reads
// (left, right) is still real.
void bpe_merge(std::span<const int32_t> initial, const MergeRanks& ranks, std::span<const BpeMerge> merges,
               BpeScratch& s, std::vector<int32_t>& out) {
  const auto n = static_cast<int32_t>(initial.size());
  s.id.resize(n);
  s.next.resize(n);
  s.prev.resize(n);
  s.heap.clear();
  for (int32_t i = 0; i < n; ++i) {
    s.id[i] = initial[i];
    s.next[i] = i + 1;
    s.prev[i] = i - 1;
  }
  auto push_pair = [&](int32_t pos) {
    const int32_t right = s.next[pos];
    if (right >= n) return;
    const uint32_t rank = ranks.find(s.id[pos], s.id[right]);
    if (rank == MergeRanks::kNone) return;
    s.heap.push_back(uint64_t{rank} << 32 | static_cast<uint32_t>(pos));
    std::push_heap(s.heap.begin(), s.heap.end(), std::greater<>{});
  };
  for (int32_t i = 0; i + 1 < n; ++i) push_pair(i);

  while (!s.heap.empty()) {
    const auto rank = static_cast<uint32_t>(s.heap.front() >> 32);
    const BpeMerge& merge = merges[rank];
    s.batch.clear();
    // Equal ranks pop in position order: the round merges left to right.
    while (!s.heap.empty() && static_cast<uint32_t>(s.heap.front() >> 32) == rank) {
      std::pop_heap(s.heap.begin(), s.heap.end(), std::greater<>{});
      const auto pos = static_cast<int32_t>(s.heap.back() & 0xFFFFFFFFu);
      s.heap.pop_back();
      const int32_t right = s.next[pos];
      if (s.id[pos] != merge.left || right >= n || s.id[right] != merge.right) continue;
      s.id[pos] = merge.result;
      s.id[right] = -1;
      s.next[pos] = s.next[right];
      if (s.next[right] < n) s.prev[s.next[right]] = pos;
      s.batch.push_back(pos);
    }
    int32_t previous_merged = -1;
    for (const int32_t pos : s.batch) {
      // The pair on the left of two neighbouring merges was already pushed as the right pair
      // of the first.
      if (s.prev[pos] >= 0 && s.prev[pos] != previous_merged) push_pair(s.prev[pos]);
      push_pair(pos);
      previous_merged = pos;
    }
  }
  for (int32_t i = 0; i < n; i = s.next[i]) out.push_back(s.id[i]);
}

}  // namespace megatron::data
