// The three indices behind a GPT split, built as Megatron-Core builds them: document index,
// sample index and shuffle index. Pure functions of the document lengths and the seed; no files.
//
// Document index: the split's documents tiled over epochs and shuffled. Sample index: where each
// sample of S + 1 tokens starts. Shuffle index: the order samples are served in.
// Glossary: S sequence length; E epochs; D documents in the split; N samples in the index.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "data/dataset_split.hpp"
#include "data/numpy_random.hpp"

namespace megatron::data {

// What determines a split's indices besides the documents themselves.
struct GptIndexParams {
  int64_t seq_length = 0;              // S; every sample reads S + 1 tokens
  std::optional<int64_t> num_samples;  // samples wanted; nullopt builds exactly one epoch
  uint64_t seed = 0;                   // at most 2^32 - 1, as numpy.random.RandomState's
};

// Megatron's _get_num_epochs: the fewest epochs E >= 1 with (E x tokens_per_epoch - 1) / S >=
// num_samples, because each sample needs S + 1 tokens and neighbours share one. Requires
// tokens_per_epoch > 0 when num_samples > 0.
int64_t num_epochs_for(int64_t tokens_per_epoch, int64_t seq_length, int64_t num_samples);

// How the epochs are laid out.
struct EpochPlan {
  int64_t tokens_per_epoch = 0;
  int64_t num_epochs = 1;
  // True when the final epoch is needed for fewer than 80% of an epoch's samples: then it is
  // shuffled on its own (documents and samples), so that the part of it actually used is a
  // uniform draw over all documents rather than a biased tail of one big shuffle.
  bool separate_final_epoch = false;
  int64_t samples_before_final_epoch = 0;  // the first shuffle range when separate
};
EpochPlan plan_epochs(int64_t tokens_per_epoch, const GptIndexParams& params);

// (E x D): the split's document ids, repeated E times, shuffled together; with a separate final
// epoch, the first E - 1 epochs are shuffled together and the last one on its own after them.
std::vector<int64_t> build_document_index(DocumentRange documents, const EpochPlan& plan,
                                          NumpyRandomState& rng);

// ((N + 1) x 2), flattened: row k is (position in document_index, token offset) of the first
// token of sample k; sample k runs from row k to row k + 1 inclusive, so it holds S + 1 tokens
// and its last token is the next sample's first (Megatron's build_sample_idx with
// add_extra_token_to_sequence). N = (tokens in document_index - 1) / S: the partial sample at
// the end is dropped. sequence_lengths: (sequences) token counts of the whole indexed dataset.
std::vector<int64_t> build_sample_index(std::span<const int32_t> sequence_lengths,
                                        std::span<const int64_t> document_index,
                                        int64_t seq_length);

// (total): 0..total-1 with [0, first) shuffled, then [first, total) shuffled on its own.
std::vector<int64_t> build_shuffle_index(int64_t first, int64_t total, NumpyRandomState& rng);

// A split's indices, in memory after a build or mapped from a cache file after a load.
struct GptIndices {
  EpochPlan plan;
  std::span<const int64_t> document_index;  // (E x D)
  std::span<const int64_t> sample_index;    // ((N + 1) x 2) flattened
  std::span<const int64_t> shuffle_index;   // (N)
  std::shared_ptr<const void> storage;      // owns the memory the spans point into

  int64_t samples() const { return static_cast<int64_t>(shuffle_index.size()); }
};

// Builds all three with one numpy.random.RandomState(params.seed), in Megatron-Core's order:
// document index, then shuffle index; so the orders are Megatron-Core's for the same seed. tokens_per_epoch must be > 0 unless params.num_samples is 0.
GptIndices build_gpt_indices(std::span<const int32_t> sequence_lengths, DocumentRange documents,
                             const GptIndexParams& params);

int64_t tokens_in(std::span<const int32_t> sequence_lengths, DocumentRange documents);

}  // namespace megatron::data
