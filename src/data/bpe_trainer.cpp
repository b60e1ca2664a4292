#include "data/bpe_trainer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <queue>
#include <unordered_map>

#include "core/error.hpp"
#include "data/byte_unicode.hpp"

namespace megatron::data {
namespace {

// A pair of token ids packed so that comparing keys compares (left, right): ids are never
// negative.
using PairKey = uint64_t;
PairKey pack(int32_t left, int32_t right) {
  return uint64_t{static_cast<uint32_t>(left)} << 32 | static_cast<uint32_t>(right);
}
int32_t left_of(PairKey key) { return static_cast<int32_t>(key >> 32); }
int32_t right_of(PairKey key) { return static_cast<int32_t>(key & 0xFFFFFFFFu); }

// std::hash of an integer is the integer itself; packed pairs differ mostly in the high half,
// so mix the bits before the map takes a remainder.
struct PairHash {
  std::size_t operator()(PairKey key) const {
    key ^= key >> 33;
    key *= 0xFF51AFD7ED558CCDULL;
    return static_cast<std::size_t>(key ^ (key >> 33));
  }
};

// A heap entry: a pair and its count when pushed. Counts of existing pairs only fall as merges
// happen (new pairs are new keys), so an entry whose count is out of date is too high: it is
// corrected when it reaches the top (lazy deletion) and the top, once current, is the best.
struct Candidate {
  int64_t count;
  PairKey pair;
  // std::priority_queue puts the greatest on top: the highest count, then the smallest pair.
  bool operator<(const Candidate& o) const {
    return count != o.count ? count < o.count : pair > o.pair;
  }
};

// Replaces each occurrence of (a, b) in `symbols`, left to right without overlap, with c, and
// tells `change(pair, +1 or -1)` how the word's pair counts moved. A neighbour that was itself
// just merged is already c, so the pair recorded at each step is the one the word has then.
template <class Change>
void merge_word(std::vector<int32_t>& symbols, int32_t a, int32_t b, int32_t c, Change&& change) {
  const std::size_t n = symbols.size();
  std::size_t out = 0;
  for (std::size_t i = 0; i < n;) {
    if (i + 1 < n && symbols[i] == a && symbols[i + 1] == b) {
      if (out > 0) {
        change(pack(symbols[out - 1], a), -1);
        change(pack(symbols[out - 1], c), +1);
      }
      change(pack(a, b), -1);
      if (i + 2 < n) {
        change(pack(b, symbols[i + 2]), -1);
        change(pack(c, symbols[i + 2]), +1);
      }
      symbols[out++] = c;
      i += 2;
    } else {
      symbols[out++] = symbols[i++];
    }
  }
  symbols.resize(out);
}

class Trainer {
 public:
  Trainer(std::span<const WordCount> words, const BpeTrainOptions& options) : options_(options) {
    const std::array<unsigned char, 256> order = gpt2_byte_order();
    std::array<int32_t, 256> byte_id{};
    for (int32_t id = 0; id < 256; ++id) {
      byte_id[order[id]] = id;
      vocab_.tokens.emplace_back(1, static_cast<char>(order[id]));
      token_ids_.emplace(vocab_.tokens.back(), id);
    }
    symbols_.reserve(words.size());
    counts_.reserve(words.size());
    for (const WordCount& w : words) {
      if (w.word.size() < 2 || w.count <= 0) continue;  // no pairs to learn from
      std::vector<int32_t> symbols;
      symbols.reserve(w.word.size());
      for (const char c : w.word) symbols.push_back(byte_id[static_cast<unsigned char>(c)]);
      symbols_.push_back(std::move(symbols));
      counts_.push_back(w.count);
    }
    for (std::size_t w = 0; w < symbols_.size(); ++w) {
      const auto index = static_cast<int32_t>(w);
      for (std::size_t i = 0; i + 1 < symbols_[w].size(); ++i) {
        add(pack(symbols_[w][i], symbols_[w][i + 1]), counts_[w], index);
      }
    }
    std::vector<Candidate> all;
    all.reserve(pair_count_.size());
    for (const auto& [pair, count] : pair_count_) all.push_back({count, pair});
    heap_ = std::priority_queue<Candidate>(std::less<Candidate>{}, std::move(all));
  }

  BpeVocabulary run(const std::function<void(const BpeTrainProgress&)>& progress) {
    const auto start = std::chrono::steady_clock::now();
    double last_report = 0;
    const auto target = static_cast<std::size_t>(options_.vocab_size - 1);
    while (vocab_.tokens.size() < target && !heap_.empty()) {
      const Candidate top = heap_.top();
      heap_.pop();
      const auto it = pair_count_.find(top.pair);
      const int64_t count = it == pair_count_.end() ? 0 : it->second;
      if (count != top.count) {
        if (count > 0) heap_.push({count, top.pair});
        continue;
      }
      if (count < options_.min_frequency) break;
      merge(top.pair);
      if (progress) {
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (seconds - last_report >= 0.5) {
          last_report = seconds;
          progress({.merges = static_cast<int64_t>(vocab_.merges.size()),
                    .tokens = static_cast<int64_t>(vocab_.tokens.size()),
                    .target_tokens = options_.vocab_size - 1,
                    .seconds = seconds});
        }
      }
    }
    return std::move(vocab_);
  }

 private:
  // Adds `delta` occurrences of `pair` found in word `w`.
  void add(PairKey pair, int64_t delta, int32_t w) {
    const int64_t count = pair_count_[pair] += delta;
    if (count == 0) {
      pair_count_.erase(pair);
      where_.erase(pair);
    } else if (delta > 0) {
      // A word is listed once per gain, not per occurrence; words that lost the pair stay
      // listed and are skipped when scanned, which is cheaper than keeping exact sets.
      std::vector<int32_t>& words = where_[pair];
      if (words.empty() || words.back() != w) words.push_back(w);
    }
  }

  void merge(PairKey pair) {
    const int32_t a = left_of(pair);
    const int32_t b = right_of(pair);
    std::string bytes = vocab_.tokens[a] + vocab_.tokens[b];
    const auto [it, is_new] =
        token_ids_.emplace(std::move(bytes), static_cast<int32_t>(vocab_.tokens.size()));
    if (is_new) vocab_.tokens.push_back(it->first);
    const int32_t c = it->second;
    vocab_.merges.push_back({.left = a, .right = b, .result = c});

    std::vector<int32_t> words = std::move(where_[pair]);
    where_.erase(pair);
    std::sort(words.begin(), words.end());
    words.erase(std::unique(words.begin(), words.end()), words.end());
    grown_.clear();
    for (const int32_t w : words) {
      const int64_t weight = counts_[w];
      merge_word(symbols_[w], a, b, c, [&](PairKey p, int delta) {
        add(p, delta * weight, w);
        if (delta > 0) grown_.push_back(p);
      });
    }
    // Only pairs with c are new or grew; the heap already holds the rest (lazily).
    std::sort(grown_.begin(), grown_.end());
    grown_.erase(std::unique(grown_.begin(), grown_.end()), grown_.end());
    for (const PairKey p : grown_) {
      if (const auto found = pair_count_.find(p); found != pair_count_.end()) {
        heap_.push({found->second, p});
      }
    }
  }

  const BpeTrainOptions& options_;
  BpeVocabulary vocab_;
  std::unordered_map<std::string, int32_t> token_ids_;  // by bytes: finds a token spelt twice
  std::vector<std::vector<int32_t>> symbols_;           // each word's current tokens
  std::vector<int64_t> counts_;                         // each word's count
  std::unordered_map<PairKey, int64_t, PairHash> pair_count_;
  std::unordered_map<PairKey, std::vector<int32_t>, PairHash> where_;  // words that may hold it
  std::priority_queue<Candidate> heap_;
  std::vector<PairKey> grown_;  // scratch for merge()
};

}  // namespace

void check_bpe_train_options(const BpeTrainOptions& options) {
  if (options.vocab_size < 257) {
    throw UserError(fmt::format(
        "--vocab-size {} is too small: a byte-level BPE vocabulary holds the 256 byte tokens "
        "and <|endoftext|>, so it needs at least 257",
        options.vocab_size));
  }
  if (options.vocab_size > std::numeric_limits<int32_t>::max()) {
    throw UserError(
        fmt::format("--vocab-size {} is too large: token ids are 32-bit", options.vocab_size));
  }
  if (options.min_frequency < 1) {
    throw UserError(
        fmt::format("--min-frequency must be at least 1; got {}", options.min_frequency));
  }
}

BpeVocabulary train_bpe(std::span<const WordCount> words, const BpeTrainOptions& options,
                        const std::function<void(const BpeTrainProgress&)>& progress) {
  check_bpe_train_options(options);
  if (words.size() > static_cast<std::size_t>(std::numeric_limits<int32_t>::max())) {
    throw UserError("too many distinct words to train on (more than 2^31)");
  }
  Trainer trainer(words, options);
  return trainer.run(progress);
}

}  // namespace megatron::data
