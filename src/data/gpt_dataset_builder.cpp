#include "data/gpt_dataset_builder.hpp"

#include <fmt/format.h>

#include <cmath>
#include <numeric>

#include "core/error.hpp"
#include "data/blended_dataset.hpp"
#include "data/token_ids.hpp"

namespace megatron::data {

int64_t BlendSizes::total() const {
  return std::accumulate(target.begin(), target.end(), int64_t{0});
}

BlendSizes blend_sizes(std::span<const double> normalized_weights, int64_t size, double surplus) {
  BlendSizes out;
  for (const double w : normalized_weights) {
    // Same floating-point expression as Megatron, so the counts agree to the sample.
    const double target = std::ceil(static_cast<double>(size) * w);
    out.target.push_back(static_cast<int64_t>(target));
    out.requested.push_back(static_cast<int64_t>(std::ceil(target * (1.0 + surplus))));
  }
  return out;
}

std::array<std::shared_ptr<const SampleSource>, 3> build_gpt_datasets(
    const BlendSpec& spec, const SplitSizes& sizes, const GptDatasetConfig& config) {
  return build_datasets(
      spec, sizes,
      {.elements = [](const IndexedDataset& d) { return d.sequences(); },
       .make = [&](std::shared_ptr<const IndexedDataset> d, Split split, DocumentRange range,
                   std::optional<int64_t> samples) -> std::shared_ptr<const SampleSource> {
         return std::make_shared<GptDataset>(std::move(d), split, range, samples, config);
       }});
}

std::array<std::shared_ptr<const SampleSource>, 3> build_datasets(const BlendSpec& spec,
                                                                  const SplitSizes& sizes,
                                                                  const DatasetFactory& factory) {
  if (spec.prefixes.empty()) throw UserError("data blend names no datasets");
  if (!spec.weights.empty() && spec.weights.size() != spec.prefixes.size())
    throw UserError(fmt::format("data blend has {} datasets but {} weights", spec.prefixes.size(),
                                spec.weights.size()));

  std::vector<std::shared_ptr<const IndexedDataset>> data;
  std::vector<std::array<std::optional<DocumentRange>, 3>> ranges;
  for (const auto& prefix : spec.prefixes) {
    data.push_back(std::make_shared<const IndexedDataset>(prefix));
    if (spec.vocab_size > 0) check_token_ids(*data.back(), spec.vocab_size);
    ranges.push_back(split_document_ranges(spec.split, factory.elements(*data.back())));
  }

  std::array<std::shared_ptr<const SampleSource>, 3> out;
  for (const Split split : kSplits) {
    const auto s = static_cast<std::size_t>(split);
    if (!ranges[0][s]) continue;  // the split string gives this split no share
    if (spec.prefixes.size() == 1 && spec.weights.empty()) {
      out[s] = factory.make(data[0], split, *ranges[0][s], sizes[s]);
      continue;
    }
    std::vector<std::shared_ptr<const SampleSource>> parts;
    if (!spec.weights.empty()) {
      if (!sizes[s])
        throw UserError(fmt::format("data blend weights need a sample count for the {} split",
                                    split_name(split)));
      const std::vector<double> weights = normalize_weights(spec.weights);
      const BlendSizes counts = blend_sizes(weights, *sizes[s]);
      for (std::size_t d = 0; d < data.size(); ++d)
        parts.push_back(factory.make(data[d], split, *ranges[d][s], counts.requested[d]));
      out[s] = std::make_shared<BlendedDataset>(std::move(parts), weights, counts.total());
    } else {
      // Megatron's unweighted blend: one epoch of each, weighed by size, capped at the need.
      if (!sizes[s])
        throw UserError(
            fmt::format("an unweighted blend of several datasets needs a sample "
                        "count for the {} split",
                        split_name(split)));
      std::vector<double> weights;
      int64_t available = 0;
      for (std::size_t d = 0; d < data.size(); ++d) {
        auto part = factory.make(data[d], split, *ranges[d][s], std::nullopt);
        weights.push_back(static_cast<double>(part->size()));
        available += part->size();
        parts.push_back(std::move(part));
      }
      out[s] = std::make_shared<BlendedDataset>(std::move(parts), weights,
                                                std::min(*sizes[s], available));
    }
  }
  return out;
}

}  // namespace megatron::data
