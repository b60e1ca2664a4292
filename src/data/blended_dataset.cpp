#include "data/blended_dataset.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "core/error.hpp"

namespace megatron::data {

std::vector<double> normalize_weights(std::span<const double> weights) {
  double sum = 0.0;
  for (const double w : weights) {
    if (!(w >= 0.0) || !std::isfinite(w))
      throw UserError(fmt::format("data blend weight {} must be a non-negative number", w));
    sum += w;
  }
  if (!(sum > 0.0)) throw UserError("data blend weights sum to zero; give at least one a share");
  std::vector<double> out(weights.begin(), weights.end());
  for (double& w : out) w /= sum;
  return out;
}

BlendingIndices build_blending_indices(std::span<const double> weights, int64_t size) {
  if (weights.empty() ||
      weights.size() > static_cast<std::size_t>(std::numeric_limits<int16_t>::max()))
    throw std::invalid_argument("build_blending_indices: 1 to 32767 datasets");
  BlendingIndices out;
  out.dataset_index.resize(static_cast<std::size_t>(size));
  out.dataset_sample_index.resize(static_cast<std::size_t>(size));
  std::vector<int64_t> served(weights.size(), 0);
  for (int64_t i = 0; i < size; ++i) {
    // max(i, 1) rather than i + 1: Megatron's choice, kept so schedules match it exactly.
    const double x = std::max(static_cast<double>(i), 1.0);
    std::size_t best = 0;
    double best_error = weights[0] * x - static_cast<double>(served[0]);
    for (std::size_t d = 1; d < weights.size(); ++d) {
      const double error = weights[d] * x - static_cast<double>(served[d]);
      if (error > best_error) {
        best_error = error;
        best = d;
      }
    }
    out.dataset_index[i] = static_cast<int16_t>(best);
    out.dataset_sample_index[i] = served[best]++;
  }
  return out;
}

BlendedDataset::BlendedDataset(std::vector<std::shared_ptr<const SampleSource>> datasets,
                               std::span<const double> weights, int64_t size)
    : datasets_(std::move(datasets)), weights_(normalize_weights(weights)) {
  if (datasets_.size() != weights_.size())
    throw std::invalid_argument(fmt::format("BlendedDataset: {} datasets but {} weights",
                                            datasets_.size(), weights_.size()));
  indices_ = build_blending_indices(weights_, size);
  std::vector<int64_t> needed(datasets_.size(), 0);
  for (const int16_t d : indices_.dataset_index) ++needed[d];
  for (std::size_t d = 0; d < datasets_.size(); ++d)
    if (needed[d] > datasets_[d]->size())
      throw RuntimeFailure(
          fmt::format("blended dataset {} holds {} samples but the blend of {} "
                      "needs {} of them",
                      d, datasets_[d]->size(), size, needed[d]));
}

BlendedDataset::Source BlendedDataset::source(int64_t i) const {
  if (i < 0 || i >= size())
    throw std::out_of_range(fmt::format("blended sample {} of {}", i, size()));
  return {indices_.dataset_index[i], indices_.dataset_sample_index[i]};
}

Sample BlendedDataset::sample(int64_t i) const {
  const Source s = source(i);
  return datasets_[s.dataset]->sample(s.sample);
}

}  // namespace megatron::data
