#include "data/gpt_index_cache.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "core/error.hpp"
#include "data/dataset_index_cache.hpp"

namespace megatron::data {
namespace fs = std::filesystem;

namespace {

// The cache holds four arrays: a small header of the epoch plan, then the three indices.
constexpr std::size_t kArrays = 4;
constexpr std::size_t kPlanWords = 4;

}  // namespace

std::string gpt_index_description(const IndexedDataset& dataset, Split split,
                                  DocumentRange documents, const GptIndexParams& params) {
  return fmt::format(
      "megatron GPT dataset indices\n"
      "algorithm: {}\n"
      "cache format: {}\n"
      "{}"
      "split: {}\n"
      "documents: [{}, {})\n"
      "seq_length: {}\n"
      "num_samples: {}\n"
      "seed: {}\n"
      "shuffle: numpy.random.RandomState(seed).shuffle\n",
      kGptIndexAlgorithmVersion, kIndexCacheVersion, dataset_identity(dataset), split_name(split), documents.begin, documents.end, params.seq_length,
      params.num_samples ? std::to_string(*params.num_samples) : std::string("one epoch"),
      params.seed);
}

fs::path gpt_index_cache_path(const fs::path& cache_dir, const IndexedDataset& dataset, Split split,
                              std::string_view description) {
  return cache_dir / fmt::format("{}-{}-{}.gptidx", fs::path(dataset.prefix()).filename().string(),
                                 split_name(split), description_hash(description));
}

fs::path default_index_cache_dir(const std::string& prefix) {
  return fs::absolute(prefix).parent_path() / "cache";
}

void save_gpt_indices(const fs::path& path, std::string_view description,
                      const GptIndices& indices) {
  const EpochPlan& p = indices.plan;
  const std::array<int64_t, kPlanWords> plan{p.tokens_per_epoch, p.num_epochs,
                                             p.separate_final_epoch ? 1 : 0,
                                             p.samples_before_final_epoch};
  const std::array<std::span<const int64_t>, kArrays> arrays{
      plan, indices.document_index, indices.sample_index, indices.shuffle_index};
  write_index_cache(path, description, arrays);
}

std::optional<GptIndices> load_gpt_indices(const fs::path& path, std::string_view description,
                                           std::string* why) {
  auto cache = load_index_cache(path, description, kArrays, why);
  if (!cache) return std::nullopt;
  const auto& a = cache->arrays;
  // The generic checks cover sizes against the header; these cover the arrays against each
  // other, which a damaged or hand-edited file could get wrong.
  if (a[0].size() != kPlanWords || a[2].size() < 2 || a[2].size() % 2 != 0 ||
      a[3].size() != a[2].size() / 2 - 1) {
    if (why) *why = "array sizes do not fit together";
    return std::nullopt;
  }
  GptIndices indices{.plan = {.tokens_per_epoch = a[0][0],
                              .num_epochs = a[0][1],
                              .separate_final_epoch = a[0][2] != 0,
                              .samples_before_final_epoch = a[0][3]},
                     .document_index = a[1],
                     .sample_index = a[2],
                     .shuffle_index = a[3],
                     .storage = cache->mapping};
  return indices;
}

CachedGptIndices load_or_build_gpt_indices(const IndexedDataset& dataset, Split split,
                                           DocumentRange documents, const GptIndexParams& params,
                                           const fs::path& cache_dir) {
  const std::string description = gpt_index_description(dataset, split, documents, params);
  const fs::path path = gpt_index_cache_path(cache_dir, dataset, split, description);
  if (auto indices = load_gpt_indices(path, description)) return {*std::move(indices), path, false};

  ensure_writable_cache_dir(cache_dir);
  // Whoever holds the lock builds; the rest wait on it, then find the finished file.
  const CacheBuildLock lock(path.string() + ".lock");
  std::string why;
  if (auto indices = load_gpt_indices(path, description, &why))
    return {*std::move(indices), path, false};
  if (fs::exists(path)) spdlog::warn("rebuilding dataset index cache '{}': {}", path.string(), why);

  const auto start = std::chrono::steady_clock::now();
  const GptIndices built = build_gpt_indices(dataset.sequence_lengths(), documents, params);
  save_gpt_indices(path, description, built);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  spdlog::info("built {} indices for '{}': {} samples over {} epoch(s) in {:.3f} s -> {}",
               split_name(split), dataset.prefix(), built.samples(), built.plan.num_epochs, seconds,
               path.string());
  // Serve from the mapped file like every later run does, so both paths are the same code.
  auto mapped = load_gpt_indices(path, description, &why);
  if (!mapped)
    throw RuntimeFailure(
        fmt::format("index cache '{}' unreadable right after writing: {}", path.string(), why));
  return {*std::move(mapped), path, true};
}

}  // namespace megatron::data
