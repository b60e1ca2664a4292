// The samples a run trains and validates on: the recipe's indexed datasets split and blended
// as Megatron does, or the synthetic mock source; and their assembly into device micro-batches.
#pragma once

#include <cstdint>
#include <memory>

#include "data/gpt_sample.hpp"
#include "data/sample.hpp"
#include "model/batch.hpp"
#include "model/model_config.hpp"
#include "recipe/compile.hpp"
#include "tensor/backend.hpp"

namespace megatron::train {

struct TrainData {
  std::shared_ptr<const data::SampleSource> train;
  std::shared_ptr<const data::SampleSource> valid;  // null when the split gives it no share
  std::string description;  // for the log: "mock" or the prefixes
};

// train_samples / valid_samples: how many each split must serve. Every token of every dataset
// is checked against model.vocab_size first (a UserError naming the dataset, sequence and id),
// so a dataset made with another tokenizer stops the run before its first step.
TrainData load_train_data(const recipe::CompiledRecipe& compiled, int64_t train_samples,
                          int64_t valid_samples);

// `path` as a recipe names it: relative to the recipe's directory unless absolute.
std::string relative_to(const recipe::CompiledRecipe& compiled, const std::string& path);

// The recipe with every file it names (datasets, tokenizer files, fine-tuning data) made
// absolute: what a checkpoint stores, so that evaluating or resuming it elsewhere finds them.
recipe::CompiledRecipe with_absolute_paths(recipe::CompiledRecipe compiled);

// The id that ends a document: the tokenizer's when its files are named, GPT-2's <|endoftext|>
// (50256) for gpt2-bpe data without them, the last id for mock data. UserError when unknown.
int32_t end_of_document(const recipe::CompiledRecipe& compiled);
constexpr int32_t kGpt2EndOfText = 50256;
// The data.reset_position_ids / reset_attention_mask / eod_mask_loss switches with that id.
data::GptSampleOptions document_options(const recipe::CompiledRecipe& compiled);

// What the model reads from a micro-batch besides tokens, labels, mask and positions.
struct BatchSpec {
  int64_t vocab_size = 0;
  bool token_types = false;     // segment ids (BERT with its binary head)
  bool padding_mask = false;    // keys per sequence (bidirectional attention)
  bool valid_lengths = false;   // a classifier on each sequence's last token
  bool sentence_order = false;  // the binary head's targets
  bool decoder = false;         // T5: the decoder's inputs
};
BatchSpec batch_spec(const model::ModelConfig& config);

// Samples [first, first + count) of `source` (indices wrap around its size) as one micro-batch
// on the backend. Throws UserError when a token is outside the model's vocabulary (a dataset
// made with another tokenizer).
model::Batch make_batch(tensor::Backend& backend, const data::SampleSource& source,
                        int64_t first, int64_t count, const BatchSpec& spec);

}  // namespace megatron::train
