#include "data/bert_dataset.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <array>
#include <stdexcept>

#include "core/error.hpp"
#include "data/masked_index_cache.hpp"

namespace megatron::data {

BertDataset::BertDataset(std::shared_ptr<const IndexedDataset> data, Split split,
                         DocumentRange documents, std::optional<int64_t> num_samples,
                         BertDatasetConfig config)
    : data_(std::move(data)), config_(std::move(config)) {
  const std::string& prefix = data_->prefix();
  check_document_range(*data_, split, documents);
  if (config_.seq_length < 5 || config_.seq_length > (int64_t{1} << 30))
    throw UserError(fmt::format("dataset '{}': sequence length {} cannot hold [CLS], two "
                                "segments and two [SEP]; use at least 5",
                                prefix, config_.seq_length));
  if (!config_.continuation) throw std::invalid_argument("BertDatasetConfig: no continuation table");
  if (num_samples == 0) return;  // a split nobody draws from (the test split while training)
  const BertSampleIndexParams params{.max_samples = num_samples.value_or(0),
                                     .target_length = int32_t(config_.seq_length - 3),
                                     .short_seq_prob = config_.short_seq_prob,
                                     .seed = config_.seed,
                                     .min_sentences = config_.binary_head ? 2 : 1};
  MaskedSampleIndex index =
      load_masked_sample_index(*data_, split, documents, params, config_.cache_dir, "BERT");
  index_ = index.entries;
  storage_ = std::move(index.storage);
  cache_path_ = std::move(index.path);
  built_ = index.built;
  samples_ = index.samples();
}

std::array<int64_t, 3> BertDataset::index_entry(int64_t i) const {
  if (i < 0 || i >= samples_) throw std::out_of_range(fmt::format("BERT sample {} of {}", i, samples_));
  return {index_[size_t(3 * i)], index_[size_t(3 * i + 1)], index_[size_t(3 * i + 2)]};
}

Sample BertDataset::sample(int64_t i) const {
  const auto [first, end, target] = index_entry(i);
  if (first < 0 || first >= end || end > data_->sequences() || target < 2 ||
      target > config_.seq_length - 3) {
    throw RuntimeFailure(fmt::format("dataset '{}': sample {}: out of range in the index cache "
                                     "'{}'; delete the file to rebuild it",
                                     data_->prefix(), i, cache_path_.string()));
  }
  std::vector<std::vector<int32_t>> sentences;
  for (int64_t s = first; s < end; ++s) sentences.push_back(data_->tokens(s));
  NumpyRandomState random(uint32_t((uint64_t(uint32_t(config_.seed)) + uint64_t(i)) & 0xffffffffull));

  // Segments A and B split at a pivot; with the binary head swapped with p 0.5.
  size_t pivot = sentences.size();
  bool swapped = false;
  if (config_.binary_head) {
    pivot = 1;
    if (sentences.size() >= 3) pivot = size_t(random.randint(1, int64_t(sentences.size())));
    swapped = random.random() < 0.5;
  }
  std::vector<int32_t> a, b;
  for (size_t s = 0; s < sentences.size(); ++s) {
    auto& to = s < pivot ? a : b;
    to.insert(to.end(), sentences[s].begin(), sentences[s].end());
  }
  if (swapped) std::swap(a, b);
  // Trim the longer segment (B on ties) a token at a time, from the front or the back; kept as
  // [begin, end) offsets so that a long segment costs one pass.
  size_t a0 = 0, a1 = a.size(), b0 = 0, b1 = b.size();
  while (int64_t((a1 - a0) + (b1 - b0)) > target) {
    const bool trim_a = (a1 - a0) > (b1 - b0);
    size_t& front = trim_a ? a0 : b0;
    size_t& back = trim_a ? a1 : b1;
    if (random.random() < 0.5) {
      ++front;
    } else {
      --back;
    }
  }
  a = std::vector<int32_t>(a.begin() + std::ptrdiff_t(a0), a.begin() + std::ptrdiff_t(a1));
  b = std::vector<int32_t>(b.begin() + std::ptrdiff_t(b0), b.begin() + std::ptrdiff_t(b1));
  std::vector<int32_t> tokens{config_.masking.cls};
  tokens.insert(tokens.end(), a.begin(), a.end());
  tokens.push_back(config_.masking.sep);
  std::vector<int32_t> types(tokens.size(), 0);
  if (!b.empty()) {
    tokens.insert(tokens.end(), b.begin(), b.end());
    tokens.push_back(config_.masking.sep);
    types.resize(tokens.size(), 1);
  }
  const std::vector<bool>& continuation = *config_.continuation;
  const MaskedTokens masked = mask_tokens(
      tokens, target, config_.masking,
      [&](int32_t id) { return id >= 0 && size_t(id) < continuation.size() && continuation[size_t(id)]; },
      random);

  const size_t S = size_t(config_.seq_length);
  Sample out;
  out.valid_length = int32_t(masked.tokens.size());
  out.tokens = masked.tokens;
  out.tokens.resize(S, config_.pad);
  out.token_types = types;
  out.token_types.resize(S, 0);
  out.labels.assign(S, 0);
  out.loss_mask.assign(S, 0.0f);
  for (size_t k = 0; k < masked.positions.size(); ++k) {
    out.labels[size_t(masked.positions[k])] = masked.labels[k];
    out.loss_mask[size_t(masked.positions[k])] = 1.0f;
  }
  out.position_ids.resize(S);
  for (size_t t = 0; t < S; ++t) out.position_ids[t] = int32_t(t);
  out.sentence_order = config_.binary_head ? (swapped ? 1 : 0) : -1;
  return out;
}

}  // namespace megatron::data
