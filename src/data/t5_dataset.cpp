#include "data/t5_dataset.hpp"

#include <fmt/format.h>

#include <stdexcept>

#include "core/error.hpp"
#include "data/masked_index_cache.hpp"
#include "data/numpy_random.hpp"

namespace megatron::data {

T5Dataset::T5Dataset(std::shared_ptr<const IndexedDataset> data, Split split,
                     DocumentRange documents, std::optional<int64_t> num_samples,
                     T5DatasetConfig config)
    : data_(std::move(data)), config_(std::move(config)) {
  const std::string& prefix = data_->prefix();
  check_document_range(*data_, split, documents);
  // Target lengths are drawn in [2, S - 2] (build_mapping's short samples start at 2).
  if (config_.encoder_length < 4 || config_.encoder_length > (int64_t{1} << 30))
    throw UserError(fmt::format("dataset '{}': encoder length {} (data.seq_length) is outside 4..2^30: "
                                "T5 samples need at least two tokens, a sentinel and padding room",
                                prefix, config_.encoder_length));
  if (config_.decoder_length < 1 || config_.decoder_length > (int64_t{1} << 30))
    throw UserError(fmt::format("dataset '{}': decoder length {} (data.decoder_seq_length) is "
                                "outside 1..2^30",
                                prefix, config_.decoder_length));
  if (!config_.continuation) throw std::invalid_argument("T5DatasetConfig: no continuation table");
  if (num_samples == 0) return;
  const BertSampleIndexParams params{.max_samples = num_samples.value_or(0),
                                     .target_length = int32_t(config_.encoder_length - 2),
                                     .short_seq_prob = config_.short_seq_prob,
                                     .seed = config_.seed,
                                     .min_sentences = 1};
  MaskedSampleIndex index =
      load_masked_sample_index(*data_, split, documents, params, config_.cache_dir, "T5");
  index_ = index.entries;
  storage_ = std::move(index.storage);
  cache_path_ = std::move(index.path);
  samples_ = index.samples();
}

std::array<int64_t, 3> T5Dataset::index_entry(int64_t i) const {
  if (i < 0 || i >= samples_) throw std::out_of_range(fmt::format("T5 sample {} of {}", i, samples_));
  return {index_[size_t(3 * i)], index_[size_t(3 * i + 1)], index_[size_t(3 * i + 2)]};
}

Sample T5Dataset::sample(int64_t i) const {
  const auto [first, end, target] = index_entry(i);
  if (first < 0 || first >= end || end > data_->sequences() || target < 2 ||
      target > config_.encoder_length - 2) {
    throw RuntimeFailure(fmt::format("dataset '{}': sample {}: out of range in the index cache "
                                     "'{}'; delete the file to rebuild it",
                                     data_->prefix(), i, cache_path_.string()));
  }
  std::vector<int32_t> tokens;
  for (int64_t s = first; s < end && int64_t(tokens.size()) < target; ++s) {
    const std::vector<int32_t> sentence = data_->tokens(s);
    tokens.insert(tokens.end(), sentence.begin(), sentence.end());
  }
  if (int64_t(tokens.size()) > target) tokens.resize(size_t(target));
  NumpyRandomState random(uint32_t((uint64_t(uint32_t(config_.seed)) + uint64_t(i)) & 0xffffffffull));
  const std::vector<bool>& continuation = *config_.continuation;
  const MaskedTokens masked = mask_tokens(
      tokens, target, config_.masking,
      [&](int32_t id) { return id >= 0 && size_t(id) < continuation.size() && continuation[size_t(id)]; },
      random);

  if (masked.spans.size() > config_.sentinels.size()) {
    throw UserError(fmt::format(
        "dataset '{}': T5 sample {} masks {} spans but the tokenizer has {} sentinels: raise "
        "data.vocab_extra_ids to at least {} (and model.vocab_size with it)",
        data_->prefix(), i, masked.spans.size(), config_.sentinels.size(), masked.spans.size()));
  }
  std::vector<int32_t> encoder, decoder{config_.bos}, labels;
  size_t begin = 0;
  for (size_t k = 0; k < masked.spans.size(); ++k) {
    const std::vector<int64_t>& span = masked.spans[k];
    const int32_t sentinel = config_.sentinels[k];
    encoder.insert(encoder.end(), masked.tokens.begin() + std::ptrdiff_t(begin),
                   masked.tokens.begin() + std::ptrdiff_t(span.front()));
    encoder.push_back(sentinel);
    decoder.push_back(sentinel);
    labels.push_back(sentinel);
    for (const int64_t at : span) {
      decoder.push_back(tokens[size_t(at)]);
      labels.push_back(tokens[size_t(at)]);
    }
    begin = size_t(span.back()) + 1;
  }
  encoder.insert(encoder.end(), masked.tokens.begin() + std::ptrdiff_t(std::min(begin, masked.tokens.size())),
                 masked.tokens.end());
  labels.push_back(config_.eos);
  if (int64_t(decoder.size()) > config_.decoder_length) {
    throw UserError(fmt::format(
        "dataset '{}': T5 sample {} needs {} decoder positions ([BOS], {} sentinels and {} masked "
        "tokens) but data.decoder_seq_length is {}: raise it to at least {}, or lower "
        "data.mask_prob",
        data_->prefix(), i, decoder.size(), masked.spans.size(), masked.positions.size(),
        config_.decoder_length, decoder.size()));
  }
  if (int64_t(encoder.size()) > config_.encoder_length) {
    throw std::logic_error("T5Dataset: the encoder input outgrew its target");
  }

  // Megatron pads with the tokenizer's pad id and then rewrites pad ids to 0 (ids the
  // embedding can look up); the masks come from the pad id, i.e. from these lengths.
  const auto zero_pad = [&](std::vector<int32_t>& v, int64_t length) {
    for (int32_t& id : v) id = id == config_.pad ? 0 : id;
    v.resize(size_t(length), 0);
  };
  Sample out;
  out.valid_length = int32_t(encoder.size());
  const size_t decoded = decoder.size();
  zero_pad(encoder, config_.encoder_length);
  zero_pad(decoder, config_.decoder_length);
  labels.resize(size_t(config_.decoder_length), 0);
  out.tokens = std::move(encoder);
  out.decoder_tokens = std::move(decoder);
  out.labels = std::move(labels);
  out.loss_mask.assign(size_t(config_.decoder_length), 0.0f);
  for (size_t t = 0; t < decoded; ++t) out.loss_mask[t] = 1.0f;
  out.position_ids.resize(size_t(config_.encoder_length));
  for (size_t t = 0; t < out.position_ids.size(); ++t) out.position_ids[t] = int32_t(t);
  return out;
}

}  // namespace megatron::data
