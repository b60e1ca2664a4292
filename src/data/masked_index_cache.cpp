#include "data/masked_index_cache.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <array>
#include <cctype>

#include "core/error.hpp"
#include "data/dataset_index_cache.hpp"
#include "data/gpt_index_cache.hpp"

namespace megatron::data {
namespace fs = std::filesystem;
namespace {

// Raise when the sample index's algorithm changes, so older cache files are rebuilt.
constexpr int kMaskedIndexAlgorithm = 1;

std::string description(const std::string& family, const IndexedDataset& data, Split split,
                        DocumentRange documents, const BertSampleIndexParams& p) {
  return fmt::format(
      "megatron {} sample index\nalgorithm: {}\ncache format: {}\n{}split: {}\n"
      "documents: [{}, {})\nsamples: {}\ntarget length: {}\nshort_seq_prob: {}\nseed: {}\n"
      "min sentences: {}\n",
      family, kMaskedIndexAlgorithm, kIndexCacheVersion, dataset_identity(data), split_name(split),
      documents.begin, documents.end, p.max_samples, p.target_length, p.short_seq_prob, p.seed,
      p.min_sentences);
}

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

void check_document_range(const IndexedDataset& data, Split split, DocumentRange documents) {
  if (documents.begin < 0 || documents.begin > documents.end || documents.end > data.documents())
    throw UserError(fmt::format("dataset '{}': {} documents [{}, {}) are outside its {} documents",
                                data.prefix(), split_name(split), documents.begin, documents.end,
                                data.documents()));
}

MaskedSampleIndex load_masked_sample_index(const IndexedDataset& data, Split split,
                                           DocumentRange documents,
                                           const BertSampleIndexParams& params,
                                           const fs::path& cache_dir, const std::string& family) {
  const std::string& prefix = data.prefix();
  const std::string text = description(family, data, split, documents, params);
  const fs::path dir = cache_dir.empty() ? default_index_cache_dir(prefix) : cache_dir;
  MaskedSampleIndex out;
  out.path = dir / fmt::format("{}-{}-{}.{}idx", fs::path(prefix).filename().string(),
                               split_name(split), description_hash(text), lower(family));
  auto cached = load_index_cache(out.path, text, 1);
  if (!cached) {
    ensure_writable_cache_dir(dir);
    const CacheBuildLock lock(out.path.string() + ".lock");
    std::string why;
    cached = load_index_cache(out.path, text, 1, &why);
    if (!cached) {
      if (fs::exists(out.path)) {
        spdlog::warn("rebuilding dataset index cache '{}': {}", out.path.string(), why);
      }
      const auto bounds = data.document_indices();
      std::vector<int64_t> split_bounds;
      for (int64_t d = documents.begin; d <= documents.end; ++d) split_bounds.push_back(bounds[size_t(d)]);
      BertSampleIndex index;
      try {
        index = build_bert_sample_index(split_bounds, data.sequence_lengths(), params);
      } catch (const NoBertSamples& e) {
        throw UserError(fmt::format(
            "dataset '{}': the {} split (documents [{}, {})): {}; {} samples are runs of whole "
            "sentences of one document: make the data with `megatron preprocess "
            "--split-sentences`, or give this split a larger share of data.split",
            prefix, split_name(split), documents.begin, documents.end, e.what(), family));
      } catch (const UserError& e) {
        throw UserError(fmt::format("dataset '{}': the {} split: {}", prefix, split_name(split),
                                    e.what()));
      }
      const std::array<std::span<const int64_t>, 1> arrays{index.entries};
      write_index_cache(out.path, text, arrays);
      spdlog::info("built {} {} sample index for '{}': {} samples -> {}", split_name(split), family,
                   prefix, index.samples(), out.path.string());
      out.built = true;
      cached = load_index_cache(out.path, text, 1, &why);
      if (!cached) throw RuntimeFailure("cannot read back " + out.path.string() + ": " + why);
    }
  }
  out.entries = cached->arrays[0];
  out.storage = cached->mapping;
  if (out.entries.size() % 3 != 0 || out.entries.empty()) {
    throw RuntimeFailure(fmt::format("index cache '{}' is damaged; delete it to rebuild",
                                     out.path.string()));
  }
  return out;
}

}  // namespace megatron::data
