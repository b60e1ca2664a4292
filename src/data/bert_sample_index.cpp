#include "data/bert_sample_index.hpp"

#include <fmt/format.h>

#include <cmath>
#include <random>

#include "core/error.hpp"

namespace megatron::data {
namespace {

int32_t target_length(int32_t short_ratio, int32_t max_length, std::mt19937& gen) {
  if (short_ratio == 0) return max_length;
  const auto r = gen();
  if (r % uint32_t(short_ratio) == 0) return int32_t(2 + r % uint32_t(max_length - 1));
  return max_length;
}

// One epoch over the documents, appending (first, end, target) triples.
void one_epoch(std::span<const int64_t> bounds, std::span<const int32_t> lengths,
               const BertSampleIndexParams& p, int32_t short_ratio, std::mt19937& gen,
               std::vector<int64_t>& out) {
  for (size_t doc = 0; doc + 1 < bounds.size(); ++doc) {
    const int64_t first = bounds[doc], last = bounds[doc + 1];
    int64_t remaining = last - first;
    bool long_sentence = false;
    if (remaining > 1) {
      for (int64_t s = first; s < last && !long_sentence; ++s) {
        long_sentence = lengths[size_t(s)] > kLongSentenceTokens;
      }
    }
    if (remaining < p.min_sentences || long_sentence) continue;
    int64_t start = first, tokens = 0;
    int32_t sentences = 0;
    int32_t target = target_length(short_ratio, p.target_length, gen);
    for (int64_t s = first; s < last; ++s) {
      tokens += lengths[size_t(s)];
      ++sentences;
      --remaining;
      if ((tokens >= target && remaining > 1 && sentences >= p.min_sentences) || remaining == 0) {
        out.insert(out.end(), {start, s + 1, int64_t(target)});
        start = s + 1;
        target = target_length(short_ratio, p.target_length, gen);
        tokens = 0;
        sentences = 0;
      }
    }
  }
}

}  // namespace

BertSampleIndex build_bert_sample_index(std::span<const int64_t> bounds,
                                        std::span<const int32_t> lengths,
                                        const BertSampleIndexParams& p) {
  if (p.target_length < 2) {
    throw UserError(fmt::format("a sample of {} tokens of text cannot hold two segments",
                                p.target_length));
  }
  for (size_t i = 0; i + 1 < bounds.size(); ++i) {
    if (bounds[i] < 0 || bounds[i] > bounds[i + 1] || bounds[i + 1] > int64_t(lengths.size())) {
      throw UserError("document boundaries outside the dataset's sentences");
    }
  }
  // Megatron's int32 ratio; a probability so small that it overflows never shortens anything.
  const double ratio = p.short_seq_prob > 0.0 ? std::round(1.0 / p.short_seq_prob) : 0.0;
  const int32_t short_ratio = ratio < 2147483647.0 ? int32_t(ratio) : 0;
  std::mt19937 gen(uint32_t(p.seed));
  BertSampleIndex index;
  do {
    const size_t before = index.entries.size();
    one_epoch(bounds, lengths, p, short_ratio, gen, index.entries);
    if (index.entries.size() == before) {
      throw NoBertSamples(p.min_sentences == 1
                              ? std::string("it holds no sentences")
                              : fmt::format("no document has the 2 or more sentences, each of at "
                                            "most {} tokens, that a sample's two segments need",
                                            kLongSentenceTokens));
    }
  } while (index.samples() < p.max_samples);
  // Megatron's shuffle: 64-bit Mersenne Twister seeded with seed + 1, from the back.
  std::mt19937_64 shuffle(uint64_t(p.seed) + 1);
  for (int64_t i = index.samples() - 1; i > 0; --i) {
    const auto j = int64_t(shuffle() % uint64_t(i + 1));
    for (int k = 0; k < 3; ++k) std::swap(index.entries[size_t(3 * i + k)], index.entries[size_t(3 * j + k)]);
  }
  return index;
}

}  // namespace megatron::data
