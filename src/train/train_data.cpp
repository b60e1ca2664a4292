#include "train/train_data.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <limits>
#include <utility>

#include "core/error.hpp"
#include "data/bert_dataset.hpp"
#include "data/classification_data.hpp"
#include "data/gpt_dataset_builder.hpp"
#include "data/t5_dataset.hpp"
#include "data/tokenizer.hpp"
#include "data/wordpiece_extras.hpp"
#include "recipe/enum_names.hpp"
#include "tensor/host_io.hpp"
#include "train/host_batch.hpp"
#include "train/mock_data.hpp"

namespace megatron::train {

std::string relative_to(const recipe::CompiledRecipe& compiled, const std::string& path) {
  const std::filesystem::path p(path);
  const auto base = std::filesystem::absolute(std::filesystem::path(compiled.file)).parent_path();
  return (p.is_absolute() ? p : base / p).lexically_normal().string();
}

recipe::CompiledRecipe with_absolute_paths(recipe::CompiledRecipe c) {
  recipe::DataSection& d = c.recipe.data;
  for (std::string& prefix : d.prefixes) prefix = relative_to(c, prefix);
  for (auto* file : {&d.vocab_file, &d.merge_file, &d.tokenizer_model, &c.recipe.finetune.train_data,
                     &c.recipe.finetune.valid_data}) {
    if (*file) *file = relative_to(c, **file);
  }
  return c;
}

namespace {

// What to do when a recipe names no data: a preprocess command for its tokenizer on the bundled
// corpus (or the user's own), and the override that then trains on it.
std::string no_data_message(const recipe::Recipe& r) {
  const bool bert = r.model.arch != recipe::Arch::Gpt;  // BERT and T5 read sentences
  std::string tokenizer;
  switch (r.data.tokenizer) {
    case recipe::Tokenizer::Gpt2Bpe:
      tokenizer = "--tokenizer gpt2-bpe --vocab-file data/tokenizers/gpt2/vocab.json --merge-file "
                  "data/tokenizers/gpt2/merges.txt --append-eod";
      break;
    case recipe::Tokenizer::SentencePiece:
      tokenizer = "--tokenizer sentencepiece --tokenizer-model TOKENIZER.model (megatron tokenizer "
                  "train makes one) --append-eod";
      break;
    default:
      tokenizer = fmt::format("--tokenizer {} --vocab-file data/tokenizers/bert-base-uncased/vocab.txt{}",
                              recipe::name_of(r.data.tokenizer), bert ? " --split-sentences" : "");
  }
  return fmt::format(
      "the recipe names no data (data.prefixes is empty). Make a dataset, e.g. from the bundled "
      "corpus: `megatron preprocess --input data/corpora/austen.jsonl --output-prefix data/austen "
      "{}`, then add 'data.prefixes=[data/austen_text_{}]'{}",
      tokenizer, bert ? "sentence" : "document", bert ? "" : " (or set data.mock=true for random tokens)");
}

// Classification fine-tuning: the labelled files as samples, the training rows shuffled each
// epoch from training.seed, the validation rows in order.
TrainData classification_data(const recipe::CompiledRecipe& compiled, int64_t train_samples,
                              int64_t valid_samples) {
  const recipe::Recipe& r = compiled.recipe;
  const recipe::FinetuneSection& ft = r.finetune;
  data::TokenizerFiles files;
  if (r.data.vocab_file) files.vocab_file = relative_to(compiled, *r.data.vocab_file);
  if (r.data.merge_file) files.merge_file = relative_to(compiled, *r.data.merge_file);
  if (r.data.tokenizer_model) files.tokenizer_model = relative_to(compiled, *r.data.tokenizer_model);
  if (files.vocab_file.empty() && files.tokenizer_model.empty()) {
    throw UserError(compiled.file + ": finetune: the tokenizer's files are not named: set data.vocab_file "
                                    "(and data.merge_file for gpt2-bpe, or data.tokenizer_model)");
  }
  const std::shared_ptr<const data::Tokenizer> tokenizer = data::make_tokenizer(r.data.tokenizer, files);
  if (tokenizer->vocab_size() > r.model.vocab_size) {
    throw UserError(fmt::format("{}: the tokenizer has {} tokens but model.vocab_size is {}",
                                compiled.file, tokenizer->vocab_size(), r.model.vocab_size));
  }
  const auto read = [&](const std::string& path) {
    const std::string file = relative_to(compiled, path);
    if (ft.format == recipe::FinetuneFormat::Jsonl) {
      return std::make_shared<const data::ClassificationSet>(data::read_labelled_jsonl(
          file, {.text = ft.text_field, .text_b = ft.text_b_field.value_or(""), .label = ft.label_field},
          ft.labels));
    }
    return std::make_shared<const data::ClassificationSet>(data::read_glue(
        file, ft.format == recipe::FinetuneFormat::Mnli ? data::GlueTask::Mnli : data::GlueTask::Qqp));
  };
  const bool bert = r.model.arch == recipe::Arch::Bert;
  const auto train = read(*ft.train_data);
  TrainData out{.train = std::make_shared<data::ClassificationSource>(
                    train, tokenizer, r.data.seq_length, bert, uint64_t(r.training.seed),
                    std::max<int64_t>(train_samples, 1), true),
                .description = fmt::format("{} ({} rows, {} classes{})", *ft.train_data, train->rows.size(),
                                           train->labels.size(),
                                           train->skipped ? fmt::format(", {} malformed rows skipped", train->skipped) : "")};
  if (ft.valid_data) {
    const auto valid = read(*ft.valid_data);
    out.valid = std::make_shared<data::ClassificationSource>(valid, tokenizer, r.data.seq_length, bert, 0,
                                                             std::max<int64_t>(valid_samples, 1), false);
    out.description += fmt::format("; validation {} ({} rows)", *ft.valid_data, valid->rows.size());
  }
  return out;
}

// What BERT and T5 data take from the WordPiece vocabulary: [CLS], [SEP], [MASK], [PAD],
// which pieces continue a word, and the ids Megatron's tokenizer appends ([BOS], [EOS],
// data.vocab_extra_ids sentinels).
struct WordPieceData {
  data::SpecialTokens special;
  std::shared_ptr<std::vector<bool>> continuation;
  data::WordPieceExtras extras;
};

WordPieceData wordpiece_data(const recipe::CompiledRecipe& compiled, const char* family,
                             int64_t extra_ids) {
  const recipe::Recipe& r = compiled.recipe;
  if (!r.data.vocab_file) {
    throw UserError(fmt::format("{}: data.vocab_file: {} data needs the WordPiece vocabulary "
                                "(vocab.txt) the dataset was made with",
                                compiled.file, family));
  }
  const std::string vocab = relative_to(compiled, *r.data.vocab_file);
  const auto tokenizer = data::make_tokenizer(r.data.tokenizer, {.vocab_file = vocab});
  WordPieceData out{.special = tokenizer->special_tokens(),
                    .continuation = std::make_shared<std::vector<bool>>(size_t(tokenizer->vocab_size())),
                    .extras = data::wordpiece_extras(*tokenizer, extra_ids)};
  for (const auto& [name, id] : {std::pair{"[CLS]", out.special.cls}, std::pair{"[SEP]", out.special.sep},
                                 std::pair{"[MASK]", out.special.mask}, std::pair{"[PAD]", out.special.pad}}) {
    if (!id) {
      throw UserError(fmt::format("{}: the vocabulary has no {} token, which {} samples need; "
                                  "use a BERT WordPiece vocab.txt",
                                  vocab, name, family));
    }
  }
  for (int32_t id = 0; id < int32_t(tokenizer->vocab_size()); ++id) {
    (*out.continuation)[size_t(id)] = tokenizer->token_text(id).rfind("##", 0) == 0;
  }
  // Masking draws BERT's random replacements from the whole vocabulary, appended ids included.
  if (out.extras.vocab_size > r.model.vocab_size) {
    throw UserError(fmt::format(
        "{}: model.vocab_size {} is smaller than the {} ids {} data uses ({}'s {} tokens, plus "
        "[BOS], [EOS]{}, which Megatron's BERT tokenizer adds); set model.vocab_size: {}",
        compiled.file, r.model.vocab_size, out.extras.vocab_size, family, vocab,
        tokenizer->vocab_size(),
        extra_ids ? fmt::format(" and {} data.vocab_extra_ids sentinels", extra_ids) : std::string(),
        out.extras.vocab_size));
  }
  if (r.training.seed > std::numeric_limits<int32_t>::max()) {
    throw UserError(fmt::format("{}: training.seed {} is above 2^31 - 1, Megatron's largest seed "
                                "for {} data",
                                compiled.file, r.training.seed, family));
  }
  return out;
}

// Megatron's BERTMaskedWordPieceDataset over each prefix.
data::DatasetFactory bert_factory(const recipe::CompiledRecipe& compiled) {
  const recipe::Recipe& r = compiled.recipe;
  WordPieceData w = wordpiece_data(compiled, "BERT", r.data.vocab_extra_ids.value_or(0));
  data::BertDatasetConfig config{
      .seq_length = r.data.seq_length,
      .seed = int32_t(r.training.seed),
      .short_seq_prob = r.data.short_seq_prob.value_or(0.1),
      .binary_head = r.model.bert_binary_head,
      .masking = {.mask_prob = r.data.mask_prob.value_or(0.15),
                  .max_ngram = int32_t(r.data.masking_max_ngram.value_or(3)),
                  .full_word = r.data.masking_full_word.value_or(true),
                  .cls = *w.special.cls,
                  .sep = *w.special.sep,
                  .mask = *w.special.mask,
                  .vocab_size = w.extras.vocab_size},
      .pad = *w.special.pad,
      .continuation = std::move(w.continuation)};
  return {.elements = [](const data::IndexedDataset& d) { return d.documents(); },
          .make = [config](std::shared_ptr<const data::IndexedDataset> d, data::Split split,
                           data::DocumentRange range, std::optional<int64_t> samples)
              -> std::shared_ptr<const data::SampleSource> {
            return std::make_shared<data::BertDataset>(std::move(d), split, range, samples, config);
          }};
}

// Megatron's T5MaskedWordPieceDataset over each prefix, with pretrain_t5.py's masking: spans of
// whole words, lengths min(Geometric(0.2), 10), always [MASK].
data::DatasetFactory t5_factory(const recipe::CompiledRecipe& compiled) {
  const recipe::Recipe& r = compiled.recipe;
  WordPieceData w = wordpiece_data(compiled, "T5", compiled.derived.vocab_extra_ids);
  data::T5DatasetConfig config{
      .encoder_length = r.data.seq_length,
      .decoder_length = compiled.derived.decoder_seq_length,
      .seed = int32_t(r.training.seed),
      .short_seq_prob = r.data.short_seq_prob.value_or(0.1),
      .masking = {.mask_prob = r.data.mask_prob.value_or(0.15),
                  .max_ngram = int32_t(r.data.masking_max_ngram.value_or(10)),
                  .full_word = r.data.masking_full_word.value_or(true),
                  .geometric = true,
                  .bert_replacement = false,
                  .cls = *w.special.cls,
                  .sep = *w.special.sep,
                  .mask = *w.special.mask,
                  .vocab_size = w.extras.vocab_size},
      .bos = w.extras.bos,
      .eos = w.extras.eos,
      .pad = *w.special.pad,
      .sentinels = w.extras.sentinels,
      .continuation = std::move(w.continuation)};
  return {.elements = [](const data::IndexedDataset& d) { return d.documents(); },
          .make = [config](std::shared_ptr<const data::IndexedDataset> d, data::Split split,
                           data::DocumentRange range, std::optional<int64_t> samples)
              -> std::shared_ptr<const data::SampleSource> {
            return std::make_shared<data::T5Dataset>(std::move(d), split, range, samples, config);
          }};
}

}  // namespace

TrainData load_train_data(const recipe::CompiledRecipe& compiled, int64_t train_samples,
                          int64_t valid_samples) {
  const recipe::Recipe& r = compiled.recipe;
  if (r.finetune.train_data) return classification_data(compiled, train_samples, valid_samples);
  const int64_t vocab = r.model.vocab_size;
  const bool bert = r.model.arch == recipe::Arch::Bert;
  if (r.data.mock && bert) {
    const bool nsp = r.model.bert_binary_head;
    return {.train = std::make_shared<MockBertSource>(r.data.seq_length, vocab, r.training.seed, 0,
                                                       train_samples, nsp),
            .valid = std::make_shared<MockBertSource>(r.data.seq_length, vocab, r.training.seed, 1,
                                                       valid_samples, nsp),
            .description = "mock (masked random phrases in two segments)"};
  }
  if (r.data.mock && r.model.arch == recipe::Arch::T5) {
    const int64_t dec = compiled.derived.decoder_seq_length, extra = compiled.derived.vocab_extra_ids;
    if (vocab - extra - MockT5Source::kFirstWord < 2) {
      throw UserError(fmt::format("{}: model.vocab_size {} leaves no word ids beside {} sentinels for "
                                  "mock T5 data; raise it",
                                  compiled.file, vocab, extra));
    }
    return {.train = std::make_shared<MockT5Source>(r.data.seq_length, dec, vocab, extra,
                                                     r.training.seed, 0, train_samples),
            .valid = std::make_shared<MockT5Source>(r.data.seq_length, dec, vocab, extra,
                                                     r.training.seed, 1, valid_samples),
            .description = "mock (random phrases with masked spans)"};
  }
  if (r.data.mock) {
    return {.train = std::make_shared<MockGptSource>(r.data.seq_length, vocab, r.training.seed, 0,
                                                      train_samples),
            .valid = std::make_shared<MockGptSource>(r.data.seq_length, vocab, r.training.seed, 1,
                                                      valid_samples),
            .description = "mock (repeated random phrases)"};
  }
  if (r.data.prefixes.empty()) throw UserError(compiled.file + ": " + no_data_message(r));
  // Every id of every dataset is checked here, before any step: a dataset from another
  // tokenizer must not stop a run hours in, when a bad sample is first drawn.
  data::BlendSpec spec{.weights = r.data.weights, .split = r.data.split, .vocab_size = vocab};
  std::string description;
  for (const std::string& prefix : r.data.prefixes) {
    spec.prefixes.push_back(relative_to(compiled, prefix));
    description += (description.empty() ? "" : ", ") + spec.prefixes.back();
  }
  data::GptDatasetConfig config{.seq_length = r.data.seq_length,
                                .seed = static_cast<uint64_t>(r.training.seed)};
  const bool t5 = r.model.arch == recipe::Arch::T5;
  auto splits = bert ? data::build_datasets(spec, {train_samples, valid_samples, 0},
                                            bert_factory(compiled))
                : t5 ? data::build_datasets(spec, {train_samples, valid_samples, 0},
                                            t5_factory(compiled))
                     : data::build_gpt_datasets(spec, {train_samples, valid_samples, 0}, config);
  if (!splits[0]) {
    throw UserError(compiled.file + ": data.split '" + r.data.split +
                    "' gives training no share of the data");
  }
  return {.train = splits[0], .valid = splits[1], .description = description};
}

BatchSpec batch_spec(const model::ModelConfig& config) {
  return {.vocab_size = config.vocab,
          .token_types = config.token_types > 0,
          .padding_mask = !config.causal,
          .valid_lengths = config.classes > 0 && !config.pooler,
          .sentence_order = config.binary_head || config.classes > 0,
          .decoder = config.encoder_decoder};
}

model::Batch make_batch(tensor::Backend& backend, const data::SampleSource& source,
                        int64_t first, int64_t count, const BatchSpec& spec) {
  return upload_batch(backend, assemble_batch(source, first, count, spec), spec);
}

}  // namespace megatron::train
