#include "data/gpt_dataset.hpp"

#include <fmt/format.h>

#include <stdexcept>
#include <string_view>

#include "core/error.hpp"
#include "data/gpt_index_cache.hpp"

namespace megatron::data {

GptDataset::GptDataset(std::shared_ptr<const IndexedDataset> data, Split split,
                       DocumentRange documents, std::optional<int64_t> num_samples,
                       GptDatasetConfig config)
    : data_(std::move(data)), split_(split), documents_(documents), config_(std::move(config)) {
  const std::string& prefix = data_->prefix();
  if (documents_.begin < 0 || documents_.begin > documents_.end ||
      documents_.end > data_->sequences())
    throw UserError(fmt::format("dataset '{}': {} documents [{}, {}) are outside its {} documents",
                                prefix, split_name(split_), documents_.begin, documents_.end,
                                data_->sequences()));
  if (config_.seq_length < 1)
    throw UserError(fmt::format("dataset '{}': sequence length {} must be at least 1", prefix,
                                config_.seq_length));
  if (num_samples && *num_samples < 0)
    throw UserError(fmt::format("dataset '{}': {} samples requested", prefix, *num_samples));
  if (num_samples.value_or(0) > 0 && tokens_in(data_->sequence_lengths(), documents_) == 0)
    throw UserError(fmt::format(
        "dataset '{}': the {} split (documents [{}, {})) has no tokens, but {} samples are "
        "needed from it; give the split a larger share or add data",
        prefix, split_name(split_), documents_.begin, documents_.end, *num_samples));

  if (config_.seed > 0xffffffffull)
    throw UserError(fmt::format("dataset '{}': seed {} is above 2^32 - 1, the largest seed of "
                                "numpy.random.RandomState, which orders Megatron's samples",
                                prefix, config_.seed));
  const GptIndexParams params{
      .seq_length = config_.seq_length, .num_samples = num_samples, .seed = config_.seed};
  const auto dir = config_.cache_dir.empty() ? default_index_cache_dir(prefix) : config_.cache_dir;
  CachedGptIndices cached = load_or_build_gpt_indices(*data_, split_, documents_, params, dir);
  indices_ = std::move(cached.indices);
  cache_path_ = std::move(cached.path);
  built_ = cached.built;
}

std::vector<int32_t> GptDataset::window(int64_t i) const {
  if (i < 0 || i >= size()) throw std::out_of_range(fmt::format("GPT sample {} of {}", i, size()));
  // Mapped indices are only checked for shape when loaded; the values are checked here, per
  // sample, so a damaged cache file gives an error naming it rather than a wild read.
  const auto damaged = [&](std::string_view what) {
    return RuntimeFailure(
        fmt::format("dataset '{}': sample {}: {} in the index cache '{}'; "
                    "delete the file to rebuild it",
                    data_->prefix(), i, what, cache_path_.string()));
  };
  const int64_t k = indices_.shuffle_index[i];
  if (k < 0 || k >= size()) throw damaged("shuffle index out of range");
  const int64_t first_position = indices_.sample_index[2 * k];
  const int64_t first_offset = indices_.sample_index[2 * k + 1];
  const int64_t last_position = indices_.sample_index[2 * k + 2];
  const int64_t last_offset = indices_.sample_index[2 * k + 3];
  if (first_position < 0 || first_position > last_position ||
      last_position >= static_cast<int64_t>(indices_.document_index.size()))
    throw damaged("sample index out of range");

  std::vector<int32_t> tokens;
  tokens.reserve(static_cast<std::size_t>(config_.seq_length + 1));
  for (int64_t p = first_position; p <= last_position; ++p) {
    const int64_t document = indices_.document_index[p];
    if (document < documents_.begin || document >= documents_.end)
      throw damaged("document outside the split");
    const int64_t from = p == first_position ? first_offset : 0;
    // Through the next sample's first token, inclusive: the one token neighbours share.
    const int64_t to = p == last_position ? last_offset + 1 : data_->sequence_lengths()[document];
    if (from < 0 || to > data_->sequence_lengths()[document]) throw damaged("offset out of range");
    if (to > from) {
      const std::vector<int32_t> part = data_->tokens(document, from, to - from);
      tokens.insert(tokens.end(), part.begin(), part.end());
    }
  }
  if (static_cast<int64_t>(tokens.size()) != config_.seq_length + 1)
    throw damaged(fmt::format("{} tokens instead of {}", tokens.size(), config_.seq_length + 1));
  return tokens;
}

Sample GptDataset::sample(int64_t i) const { return make_gpt_sample(window(i), config_.sample); }

}  // namespace megatron::data
