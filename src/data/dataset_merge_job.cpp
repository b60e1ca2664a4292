#include "data/dataset_merge_job.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <memory>

#include "core/error.hpp"
#include "data/indexed_dataset.hpp"

namespace megatron::data {

void merge_datasets(const DatasetMergeJob& job, std::ostream& out) {
  if (!job.force)
    for (const auto& path : {bin_path(job.output), idx_path(job.output)}) {
      std::error_code ignored;
      if (std::filesystem::exists(path, ignored))
        throw UserError(
            fmt::format("'{}' already exists; pass --force to replace it", path.string()));
    }
  std::vector<std::unique_ptr<IndexedDataset>> inputs;
  for (const auto& p : job.inputs) inputs.push_back(std::make_unique<IndexedDataset>(p));
  IndexedDatasetWriter writer(job.output, inputs.front()->token_type());
  for (const auto& in : inputs) writer.add_dataset(*in);
  writer.finish();
  out << fmt::format("merged {} datasets: {} documents, {} sequences, {} tokens into {}\n",
                     inputs.size(), writer.documents(), writer.sequences(), writer.tokens(),
                     job.output);
}

}  // namespace megatron::data
