#include "train/train_data.hpp"

#include <filesystem>

#include "core/error.hpp"
#include "data/gpt_dataset_builder.hpp"
#include "tensor/host_io.hpp"
#include "train/mock_data.hpp"

namespace megatron::train {

TrainData load_train_data(const recipe::CompiledRecipe& compiled, int64_t train_samples,
                          int64_t valid_samples) {
  const recipe::Recipe& r = compiled.recipe;
  const int64_t vocab = r.model.vocab_size;
  if (r.data.mock) {
    return {.train = std::make_shared<MockGptSource>(r.data.seq_length, vocab, r.training.seed, 0,
                                                      train_samples),
            .valid = std::make_shared<MockGptSource>(r.data.seq_length, vocab, r.training.seed, 1,
                                                      valid_samples),
            .description = "mock (repeated random phrases)"};
  }
  if (r.data.prefixes.empty()) {
    throw UserError(compiled.file +
                    ": data.prefixes is empty: name indexed datasets (made by `megatron "
                    "preprocess`) or set data.mock: true");
  }
  // Every id of every dataset is checked here, before any step: a dataset from another
  // tokenizer must not stop a run hours in, when a bad sample is first drawn.
  data::GptBlendSpec spec{.weights = r.data.weights, .split = r.data.split, .vocab_size = vocab};
  const auto base = std::filesystem::path(compiled.file).parent_path();
  std::string description;
  for (const std::string& prefix : r.data.prefixes) {
    const std::filesystem::path p(prefix);
    spec.prefixes.push_back((p.is_absolute() ? p : base / p).lexically_normal().string());
    description += (description.empty() ? "" : ", ") + spec.prefixes.back();
  }
  data::GptDatasetConfig config{.seq_length = r.data.seq_length,
                                .seed = static_cast<uint64_t>(r.training.seed)};
  auto splits = data::build_gpt_datasets(spec, {train_samples, valid_samples, 0}, config);
  if (!splits[0]) {
    throw UserError(compiled.file + ": data.split '" + r.data.split +
                    "' gives training no share of the data");
  }
  return {.train = splits[0], .valid = splits[1], .description = description};
}

model::GptBatch make_batch(tensor::Backend& backend, const data::GptSampleSource& source,
                           int64_t first, int64_t count, int64_t vocab_size) {
  std::vector<int32_t> tokens, labels, positions;
  std::vector<float> mask;
  int64_t seq = 0;
  for (int64_t i = first; i < first + count; ++i) {
    data::GptSample s = source.sample(i % source.size());
    seq = static_cast<int64_t>(s.tokens.size());
    for (size_t t = 0; t < s.tokens.size(); ++t) {
      for (int32_t id : {s.tokens[t], s.labels[t]}) {
        if (id < 0 || id >= vocab_size) {
          throw UserError("sample " + std::to_string(i) + " holds token id " + std::to_string(id) +
                          ", outside model.vocab_size " + std::to_string(vocab_size) +
                          ": the dataset was made with another tokenizer, or vocab_size is wrong");
        }
      }
    }
    tokens.insert(tokens.end(), s.tokens.begin(), s.tokens.end());
    labels.insert(labels.end(), s.labels.begin(), s.labels.end());
    positions.insert(positions.end(), s.position_ids.begin(), s.position_ids.end());
    mask.insert(mask.end(), s.loss_mask.begin(), s.loss_mask.end());
  }
  const tensor::Shape shape{count * seq};
  return {.batch = count,
          .seq = seq,
          .tokens = tensor::from_ints(backend, tokens, shape),
          .labels = tensor::from_ints(backend, labels, shape),
          .loss_mask = tensor::from_floats(backend, mask, shape),
          .positions = tensor::from_ints(backend, positions, shape)};
}

}  // namespace megatron::train
