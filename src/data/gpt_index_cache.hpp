// Caching a GPT split's indices next to the data: which file holds them (named by a hash of
// everything that determines them), saving them after a build and mapping them on later runs.
//
// The first process to need a missing cache builds it under a file lock; every other process
// (other ranks, later runs) maps the finished file. See docs/datasets.md for the naming rule.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "data/dataset_split.hpp"
#include "data/gpt_indices.hpp"
#include "data/indexed_dataset.hpp"

namespace megatron::data {

// Bumped whenever the index-building algorithm changes, so old caches stop matching.
inline constexpr int kGptIndexAlgorithmVersion = 2;  // 2: numpy RandomState shuffles

// Every input of the indices, one per line: the dataset's absolute path and its files' sizes
// and .idx modification time (so a rewritten dataset gets new indices), the split and its
// documents, S, the sample count, the seed, and the algorithm and file format versions.
std::string gpt_index_description(const IndexedDataset& dataset, Split split,
                                  DocumentRange documents, const GptIndexParams& params);

// <cache_dir>/<dataset file name>-<split>-<16 hex digits of the description hash>.gptidx
std::filesystem::path gpt_index_cache_path(const std::filesystem::path& cache_dir,
                                           const IndexedDataset& dataset, Split split,
                                           std::string_view description);

// Where caches go when no directory is given: "cache" beside the dataset's files.
std::filesystem::path default_index_cache_dir(const std::string& prefix);

// Writes `indices` to `path` atomically (see write_index_cache).
void save_gpt_indices(const std::filesystem::path& path, std::string_view description,
                      const GptIndices& indices);

// Maps the indices from `path`; nullopt (reason in *why) when the file is missing, damaged or
// describes different inputs.
std::optional<GptIndices> load_gpt_indices(const std::filesystem::path& path,
                                           std::string_view description,
                                           std::string* why = nullptr);

struct CachedGptIndices {
  GptIndices indices;
  std::filesystem::path path;
  bool built = false;  // false: found in the cache; true: built (and saved) by this call
};

// Loads the split's indices from cache_dir, or builds and saves them when the file is missing
// or damaged. Creates cache_dir; throws UserError naming it when it cannot be created or
// written.
CachedGptIndices load_or_build_gpt_indices(const IndexedDataset& dataset, Split split,
                                           DocumentRange documents, const GptIndexParams& params,
                                           const std::filesystem::path& cache_dir);

}  // namespace megatron::data
