#include "data/gpt_indices.hpp"

#include <stdexcept>

namespace megatron::data {

int64_t tokens_in(std::span<const int32_t> sequence_lengths, DocumentRange documents) {
  int64_t total = 0;
  for (int64_t d = documents.begin; d < documents.end; ++d) total += sequence_lengths[d];
  return total;
}

int64_t num_epochs_for(int64_t tokens_per_epoch, int64_t seq_length, int64_t num_samples) {
  if (num_samples <= 0) return 1;
  if (tokens_per_epoch <= 0)
    throw std::invalid_argument("num_epochs_for: samples requested from no tokens");
  // num_samples x S + 1 tokens are needed; ceil-divide by tokens per epoch.
  const int64_t needed = num_samples * seq_length + 1;
  return (needed + tokens_per_epoch - 1) / tokens_per_epoch;
}

EpochPlan plan_epochs(int64_t tokens_per_epoch, const GptIndexParams& params) {
  EpochPlan plan{.tokens_per_epoch = tokens_per_epoch};
  if (!params.num_samples) return plan;
  const int64_t s = params.seq_length;
  plan.num_epochs = num_epochs_for(tokens_per_epoch, s, *params.num_samples);
  if (plan.num_epochs == 1) return plan;
  plan.samples_before_final_epoch = ((plan.num_epochs - 1) * tokens_per_epoch - 1) / s;
  const int64_t from_final_epoch = *params.num_samples - plan.samples_before_final_epoch;
  const int64_t per_epoch = (tokens_per_epoch - 1) / s;
  // Megatron's threshold, truncated to an integer the way Python's int() does.
  const auto threshold = static_cast<int64_t>(0.80 * static_cast<double>(per_epoch));
  plan.separate_final_epoch = from_final_epoch < threshold;
  return plan;
}

namespace {

// Appends `epochs` copies of the documents, then shuffles just the appended part.
void append_shuffled_epochs(std::vector<int64_t>& out, DocumentRange documents, int64_t epochs,
                            NumpyRandomState& rng) {
  const std::size_t first = out.size();
  for (int64_t e = 0; e < epochs; ++e)
    for (int64_t d = documents.begin; d < documents.end; ++d) out.push_back(d);
  rng.shuffle(std::span<int64_t>(out).subspan(first));
}

}  // namespace

std::vector<int64_t> build_document_index(DocumentRange documents, const EpochPlan& plan,
                                          NumpyRandomState& rng) {
  std::vector<int64_t> index;
  index.reserve(static_cast<std::size_t>(plan.num_epochs * documents.size()));
  if (!plan.separate_final_epoch) {
    append_shuffled_epochs(index, documents, plan.num_epochs, rng);
  } else {
    append_shuffled_epochs(index, documents, plan.num_epochs - 1, rng);
    append_shuffled_epochs(index, documents, 1, rng);
  }
  return index;
}

std::vector<int64_t> build_sample_index(std::span<const int32_t> sequence_lengths,
                                        std::span<const int64_t> document_index,
                                        int64_t seq_length) {
  int64_t total_tokens = 0;
  for (int64_t doc : document_index) total_tokens += sequence_lengths[doc];
  const int64_t samples = total_tokens > 0 ? (total_tokens - 1) / seq_length : 0;

  std::vector<int64_t> index;
  index.reserve(static_cast<std::size_t>(2 * (samples + 1)));
  int64_t position = 0;  // into document_index
  int64_t offset = 0;    // token within that document
  index.push_back(position);
  index.push_back(offset);
  for (int64_t k = 1; k <= samples; ++k) {
    int64_t remaining = seq_length + 1;
    for (;;) {
      const int64_t available = sequence_lengths[document_index[position]] - offset;
      remaining -= available;
      if (remaining <= 0) {
        // The sample ends inside this document; the next one starts on its last token. When
        // it ends exactly on the document's last token the next start stays in this document
        // (offset = length - 1), as in Megatron, rather than moving to the next one.
        offset += available + remaining - 1;
        break;
      }
      if (position + 1 == static_cast<int64_t>(document_index.size()))
        throw std::logic_error("build_sample_index: ran past the document index");
      ++position;
      offset = 0;
    }
    index.push_back(position);
    index.push_back(offset);
  }
  return index;
}

std::vector<int64_t> build_shuffle_index(int64_t first, int64_t total, NumpyRandomState& rng) {
  std::vector<int64_t> index(static_cast<std::size_t>(total));
  for (int64_t i = 0; i < total; ++i) index[i] = i;
  const std::span<int64_t> all(index);
  rng.shuffle(all.first(static_cast<std::size_t>(first)));
  if (first < total) rng.shuffle(all.subspan(static_cast<std::size_t>(first)));
  return index;
}

namespace {

struct OwnedIndices {
  std::vector<int64_t> document_index, sample_index, shuffle_index;
};

}  // namespace

GptIndices build_gpt_indices(std::span<const int32_t> sequence_lengths, DocumentRange documents,
                             const GptIndexParams& params) {
  if (params.seq_length < 1) throw std::invalid_argument("build_gpt_indices: seq_length < 1");
  const EpochPlan plan = plan_epochs(tokens_in(sequence_lengths, documents), params);
  if (params.seed > 0xffffffffull) throw std::invalid_argument("build_gpt_indices: seed above 2^32 - 1");
  NumpyRandomState rng(static_cast<uint32_t>(params.seed));
  auto owned = std::make_shared<OwnedIndices>();
  owned->document_index = build_document_index(documents, plan, rng);
  owned->sample_index =
      build_sample_index(sequence_lengths, owned->document_index, params.seq_length);
  const auto samples = static_cast<int64_t>(owned->sample_index.size() / 2) - 1;
  owned->shuffle_index = build_shuffle_index(
      plan.separate_final_epoch ? plan.samples_before_final_epoch : samples, samples, rng);
  return GptIndices{.plan = plan,
                    .document_index = owned->document_index,
                    .sample_index = owned->sample_index,
                    .shuffle_index = owned->shuffle_index,
                    .storage = owned};
}

}  // namespace megatron::data
