#include "train/mock_data.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <tuple>
#include <utility>
#include <vector>

#include "tensor/philox.hpp"

namespace megatron::train {
namespace {

std::array<uint32_t, 4> words(uint64_t seed, uint64_t a, uint64_t b) {
  return tensor::philox4x32_10(
      {static_cast<uint32_t>(a), static_cast<uint32_t>(a >> 32), static_cast<uint32_t>(b),
       static_cast<uint32_t>(b >> 32)},
      {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
}

constexpr uint32_t kJumpOneIn = 16;

// The affine map of a seed over v ids: a coprime to v.
std::pair<uint64_t, uint64_t> affine_map(uint64_t seed, uint64_t v) {
  const auto w = words(seed, ~0ull, ~0ull);
  uint64_t multiplier = 1 + w[0] % std::max<uint64_t>(v - 1, 1);
  while (std::gcd(multiplier, v) != 1) ++multiplier;
  return {multiplier, w[1] % v};
}

// Draws as a fraction in [0, 1).
double unit(uint32_t word) { return word / 4294967296.0; }

}  // namespace

MockGptSource::MockGptSource(int64_t seq_length, int64_t vocab_size, uint64_t seed, int split,
                             int64_t size, data::GptSampleOptions documents)
    : seq_length_(seq_length), vocab_size_(vocab_size), seed_(seed), split_(split), size_(size),
      documents_(documents) {
  // The permutation belongs to the seed, not the split: validation tests the same map.
  std::tie(multiplier_, offset_) = affine_map(seed, uint64_t(vocab_size));
}

data::Sample MockGptSource::sample(int64_t i) const {
  const uint64_t v = uint64_t(vocab_size_);
  std::vector<int32_t> window(static_cast<size_t>(seq_length_ + 1));
  const uint64_t stream = (uint64_t(split_) << 48) ^ uint64_t(i);
  const bool documents =
      documents_.reset_attention_mask || documents_.reset_position_ids || documents_.eod_mask_loss;
  uint64_t token = 0;
  for (size_t t = 0; t < window.size(); ++t) {
    const auto w = words(seed_, stream, t);
    const bool jump = t == 0 || w[0] % kJumpOneIn == 0;
    token = jump ? w[1] % v : (multiplier_ * token + offset_) % v;
    window[t] = documents && jump && t > 0 ? documents_.eod_token : static_cast<int32_t>(token);
  }
  return data::make_gpt_sample(window, documents_);
}

MockBertSource::MockBertSource(int64_t seq_length, int64_t vocab_size, uint64_t seed, int split,
                               int64_t size, bool binary_head)
    : seq_length_(seq_length), words_(vocab_size - kFirstWord), seed_(seed), split_(split),
      size_(size), binary_head_(binary_head) {
  if (seq_length < 5 || words_ < 2)
    throw std::invalid_argument("MockBertSource: needs 5 positions and 2 word ids");
  std::tie(multiplier_, offset_) = affine_map(seed, uint64_t(words_));
}

data::Sample MockBertSource::sample(int64_t i) const {
  const uint64_t v = uint64_t(words_);
  const int64_t s = seq_length_;
  const uint64_t stream = (uint64_t(split_) << 48) ^ uint64_t(i) ^ (1ull << 47);
  const auto head = words(seed_, stream, ~0ull);
  // Megatron's short_seq_prob 0.1: a shorter target length, padded.
  const int64_t length = unit(head[0]) < 0.1 ? 5 + int64_t(head[1] % uint64_t(s - 4)) : s;
  const int64_t content = length - 3;
  const int64_t first_len = 1 + int64_t(head[2] % uint64_t(std::max<int64_t>(content - 1, 1)));
  const bool swapped = binary_head_ && (head[3] & 1u);

  std::vector<int32_t> walk(static_cast<size_t>(content));
  uint64_t token = 0;
  for (int64_t t = 0; t < content; ++t) {
    const auto w = words(seed_, stream, uint64_t(t));
    token = (t == 0 || w[0] % kJumpOneIn == 0) ? w[1] % v : (multiplier_ * token + offset_) % v;
    walk[size_t(t)] = kFirstWord + int32_t(token);
  }
  std::vector<int32_t> a(walk.begin(), walk.begin() + first_len), b(walk.begin() + first_len, walk.end());
  if (swapped) std::swap(a, b);

  data::Sample out;
  out.tokens.reserve(size_t(s));
  out.tokens.push_back(kCls);
  out.token_types.push_back(0);
  for (int32_t t : a) out.tokens.push_back(t), out.token_types.push_back(0);
  out.tokens.push_back(kSep);
  out.token_types.push_back(0);
  for (int32_t t : b) out.tokens.push_back(t), out.token_types.push_back(1);
  out.tokens.push_back(kSep);
  out.token_types.push_back(1);
  out.tokens.resize(size_t(s), kPad);
  out.token_types.resize(size_t(s), 0);
  out.labels.assign(size_t(s), 0);
  out.loss_mask.assign(size_t(s), 0.0f);
  for (int64_t p = 0; p < length; ++p) {
    const int32_t id = out.tokens[size_t(p)];
    if (id < kFirstWord) continue;
    const auto w = words(seed_, stream ^ (1ull << 46), uint64_t(p));
    if (unit(w[0]) >= 0.15) continue;
    out.labels[size_t(p)] = id;
    out.loss_mask[size_t(p)] = 1.0f;
    const double how = unit(w[1]);
    if (how < 0.8) out.tokens[size_t(p)] = kMask;
    else if (how < 0.9) out.tokens[size_t(p)] = kFirstWord + int32_t(w[2] % v);
  }
  out.position_ids.resize(size_t(s));
  std::iota(out.position_ids.begin(), out.position_ids.end(), 0);
  out.valid_length = int32_t(length);
  out.sentence_order = binary_head_ ? int32_t(swapped) : -1;
  return out;
}

MockT5Source::MockT5Source(int64_t encoder_length, int64_t decoder_length, int64_t vocab_size,
                           int64_t sentinels, uint64_t seed, int split, int64_t size)
    : encoder_length_(encoder_length), decoder_length_(decoder_length), vocab_size_(vocab_size),
      sentinels_(sentinels), words_(vocab_size - sentinels - kFirstWord), seed_(seed),
      split_(split), size_(size) {
  if (encoder_length < 4 || decoder_length < 1 || sentinels < 1 || words_ < 2)
    throw std::invalid_argument("MockT5Source: needs 4 encoder positions, a sentinel and 2 word ids");
  std::tie(multiplier_, offset_) = affine_map(seed, uint64_t(words_));
}

data::Sample MockT5Source::sample(int64_t i) const {
  const uint64_t v = uint64_t(words_);
  const uint64_t stream = (uint64_t(split_) << 48) ^ uint64_t(i) ^ (1ull << 45);
  const auto head = words(seed_, stream, ~0ull);
  const int64_t target = encoder_length_ - 2;
  const int64_t length = unit(head[0]) < 0.1 ? 2 + int64_t(head[1] % uint64_t(target - 1)) : target;
  std::vector<int32_t> walk(static_cast<size_t>(length));
  uint64_t token = 0;
  for (int64_t t = 0; t < length; ++t) {
    const auto w = words(seed_, stream, uint64_t(t));
    token = (t == 0 || w[0] % kJumpOneIn == 0) ? w[1] % v : (multiplier_ * token + offset_) % v;
    walk[size_t(t)] = kFirstWord + int32_t(token);
  }
  data::Sample out;
  std::vector<int32_t> decoder{kBos};
  int64_t spans = 0;
  for (int64_t t = 0; t < length;) {
    const auto w = words(seed_, stream ^ (1ull << 44), uint64_t(t));
    const int64_t n = std::min<int64_t>(1 + int64_t(w[1] % 5), length - t);
    if (unit(w[0]) >= 0.05 || spans == sentinels_ || int64_t(decoder.size()) + 1 + n > decoder_length_) {
      out.tokens.push_back(walk[size_t(t++)]);
      continue;
    }
    const int32_t sentinel = int32_t(vocab_size_ - sentinels_ + spans++);
    out.tokens.push_back(sentinel);
    out.labels.push_back(sentinel);
    decoder.push_back(sentinel);
    for (int64_t k = 0; k < n; ++k, ++t) {
      out.labels.push_back(walk[size_t(t)]);
      decoder.push_back(walk[size_t(t)]);
    }
  }
  out.labels.push_back(kEos);
  out.valid_length = int32_t(out.tokens.size());
  out.loss_mask.assign(size_t(decoder_length_), 0.0f);
  std::fill(out.loss_mask.begin(), out.loss_mask.begin() + std::ptrdiff_t(decoder.size()), 1.0f);
  out.tokens.resize(size_t(encoder_length_), kPad);
  decoder.resize(size_t(decoder_length_), kPad);
  out.decoder_tokens = std::move(decoder);
  out.labels.resize(size_t(decoder_length_), 0);
  out.position_ids.resize(size_t(encoder_length_));
  std::iota(out.position_ids.begin(), out.position_ids.end(), 0);
  return out;
}

}  // namespace megatron::train
