// The machinery of byte-pair encoding shared by the GPT-2 tokenizer and tokenizer.json's BPE:
// merge ranks by token pair, a per-thread cache of word encodings, and the merge loop itself.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace megatron::data {

// One merge rule: `left` then `right` become `result`.
struct BpeMerge {
  int32_t left = 0;
  int32_t right = 0;
  int32_t result = 0;  // the token whose text is left's then right's

  bool operator==(const BpeMerge&) const = default;
};

// The rank of each merge rule by the pair of token ids it joins. BPE asks for every adjacent
// pair of a new word, so this is a flat open-addressing table: with a node-based map, the
// modulo and pointer chase of each lookup were most of the cost of a word not yet cached.
class MergeRanks {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;

  // `pairs[rank]` is the pair of that rank; a pair listed twice keeps its later rank.
  explicit MergeRanks(const std::vector<std::pair<int32_t, int32_t>>& pairs) {
    std::size_t size = 1024;
    while (size < 2 * pairs.size()) size *= 2;
    slots_.assign(size, Slot{});
    shift_ = 64 - std::countr_zero(size);
    for (std::size_t rank = 0; rank < pairs.size(); ++rank) {
      const uint64_t key = pack(pairs[rank].first, pairs[rank].second);
      std::size_t i = home(key);
      while (slots_[i].key != kEmpty && slots_[i].key != key) i = (i + 1) & (size - 1);
      slots_[i] = {.key = key, .rank = static_cast<uint32_t>(rank)};
    }
  }

  // The rank of merging `left` then `right`, or kNone.
  uint32_t find(int32_t left, int32_t right) const {
    const uint64_t key = pack(left, right);
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = home(key);; i = (i + 1) & mask) {
      if (slots_[i].key == key) return slots_[i].rank;
      if (slots_[i].key == kEmpty) return kNone;
    }
  }

 private:
  static constexpr uint64_t kEmpty = UINT64_MAX;  // ids are never negative
  struct Slot {
    uint64_t key = kEmpty;
    uint32_t rank = kNone;
  };

  static uint64_t pack(int32_t left, int32_t right) {
    return uint64_t{static_cast<uint32_t>(left)} << 32 | static_cast<uint32_t>(right);
  }
  // Fibonacci hashing: the multiply spreads both halves into the top bits we keep.
  std::size_t home(uint64_t key) const {
    return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ULL) >> shift_);
  }

  std::vector<Slot> slots_;
  int shift_ = 0;
};

// A hash of a short word, inline: std::hash's out-of-line call cost as much as the rest of a
// cache lookup. Eight bytes at a time, then murmur3's finaliser.
uint64_t hash_word(std::string_view word);

// Remembers the BPE of recent words (most text repeats a few thousand words), in flat arrays
// so that a lookup allocates nothing. Bounded: when full it starts again empty.
class WordCache {
 public:
  static constexpr std::size_t kMaxWordBytes = 128;  // longer words are rare: not cached

  // The ids of `word`, or nullptr (and count 0) when it is not cached.
  const int32_t* find(std::string_view word, uint64_t hash, std::size_t& count) const {
    count = 0;
    if (slots_.empty()) return nullptr;
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = hash & mask;; i = (i + 1) & mask) {
      const Slot& slot = slots_[i];
      if (slot.key_length == 0) return nullptr;
      if (slot.hash == hash && slot.key_length == word.size() &&
          std::memcmp(keys_.data() + slot.key_offset, word.data(), word.size()) == 0) {
        count = slot.value_length;
        return values_.data() + slot.value_offset;
      }
    }
  }

  void insert(std::string_view word, uint64_t hash, const int32_t* ids, std::size_t count) {
    if (word.empty() || word.size() > kMaxWordBytes) return;
    if ((size_ + 1) * 2 > slots_.size()) {
      if (slots_.size() >= kMaxSlots) {
        clear();
      } else {
        grow();
      }
    }
    Slot slot{.hash = hash,
              .key_offset = static_cast<uint32_t>(keys_.size()),
              .value_offset = static_cast<uint32_t>(values_.size()),
              .key_length = static_cast<uint16_t>(word.size()),
              .value_length = static_cast<uint16_t>(count)};
    keys_.append(word);
    values_.insert(values_.end(), ids, ids + count);
    place(slot);
    ++size_;
  }

  void clear() {
    std::fill(slots_.begin(), slots_.end(), Slot{});
    keys_.clear();
    values_.clear();
    size_ = 0;
  }

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t key_offset = 0;
    uint32_t value_offset = 0;
    uint16_t key_length = 0;  // 0 marks an empty slot: words are never empty
    uint16_t value_length = 0;
  };
  // 2^16 words at most (half the slots): about 1.5 MiB of slots plus the words, per thread.
  static constexpr std::size_t kMaxSlots = std::size_t{1} << 17;

  void place(const Slot& slot) {
    const std::size_t mask = slots_.size() - 1;
    std::size_t i = slot.hash & mask;
    while (slots_[i].key_length != 0) i = (i + 1) & mask;
    slots_[i] = slot;
  }

  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 1024 : old.size() * 2, Slot{});
    for (const Slot& slot : old) {
      if (slot.key_length != 0) place(slot);
    }
  }

  std::vector<Slot> slots_;
  std::string keys_;
  std::vector<int32_t> values_;
  std::size_t size_ = 0;
};

// Working arrays for one word's BPE, reused from word to word.
struct BpeScratch {
  std::vector<int32_t> initial;  // the word's tokens before any merge (callers fill it)
  std::vector<int32_t> id;     // token at each byte position; -1 once merged into its left
  std::vector<int32_t> next;   // next live position (word size at the end)
  std::vector<int32_t> prev;   // previous live position (-1 at the start)
  std::vector<uint64_t> heap;  // rank << 32 | position of each candidate pair, min first
  std::vector<int32_t> batch;  // positions of the pairs merged in the current round
};

// What one thread keeps for the BPE tokenizer it used last. encode() is const and called from
// several threads at once; per-thread state needs no locks. Keyed by a serial number rather
// than the address, which a later tokenizer may reuse.
struct BpeThreadState {
  uint64_t owner = 0;
  WordCache cache;
  BpeScratch scratch;
};

// A serial number for a new tokenizer.
uint64_t next_bpe_serial();
// The calling thread's state for the tokenizer numbered `serial`; the cache starts empty when
// the thread last worked for another tokenizer.
BpeThreadState& bpe_thread_state(uint64_t serial);

// Merges `s.initial` by rank until no ranked pair is left and appends the result to `out`.
// `merges[rank]` is the rule of that rank.
void bpe_merge(std::span<const int32_t> initial, const MergeRanks& ranks, std::span<const BpeMerge> merges,
               BpeScratch& s, std::vector<int32_t>& out);

}  // namespace megatron::data
