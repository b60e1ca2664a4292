#include "train/train_data.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <limits>
#include <utility>

#include "core/error.hpp"
#include "data/bert_dataset.hpp"
#include "data/classification_data.hpp"
#include "data/gpt_dataset_builder.hpp"
#include "data/seq2seq_data.hpp"
#include "data/sft_data.hpp"
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
    case recipe::Tokenizer::HuggingFace:
      tokenizer = "--tokenizer huggingface --tokenizer-model DIR_OR_TOKENIZER.json --append-eod";
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

// The tokenizer fine-tuning text is encoded with (its files are required), checked to fit the
// model's vocabulary.
std::shared_ptr<const data::Tokenizer> finetune_tokenizer(const recipe::CompiledRecipe& compiled) {
  const recipe::Recipe& r = compiled.recipe;
  data::TokenizerFiles files;
  if (r.data.vocab_file) files.vocab_file = relative_to(compiled, *r.data.vocab_file);
  if (r.data.merge_file) files.merge_file = relative_to(compiled, *r.data.merge_file);
  if (r.data.tokenizer_model) files.tokenizer_model = relative_to(compiled, *r.data.tokenizer_model);
  if (files.vocab_file.empty() && files.tokenizer_model.empty()) {
    throw UserError(compiled.file + ": finetune: the tokenizer's files are not named: set data.vocab_file "
                                    "(and data.merge_file for gpt2-bpe, or data.tokenizer_model)");
  }
  std::shared_ptr<const data::Tokenizer> tokenizer = data::make_tokenizer(r.data.tokenizer, files);
  if (tokenizer->vocab_size() > r.model.vocab_size) {
    throw UserError(fmt::format("{}: the tokenizer has {} tokens but model.vocab_size is {}",
                                compiled.file, tokenizer->vocab_size(), r.model.vocab_size));
  }
  return tokenizer;
}

// Classification fine-tuning: the labelled files as samples, the training rows shuffled each
// epoch from training.seed, the validation rows in order.
TrainData classification_data(const recipe::CompiledRecipe& compiled, int64_t train_samples,
                              int64_t valid_samples) {
  const recipe::Recipe& r = compiled.recipe;
  const recipe::FinetuneSection& ft = r.finetune;
  const std::shared_ptr<const data::Tokenizer> tokenizer = finetune_tokenizer(compiled);
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

// Instruction tuning (sft, chat): the examples tokenised once, the training ones shuffled each
// epoch from training.seed and packed (or one a sequence), the validation ones in order.
TrainData instruction_data(const recipe::CompiledRecipe& compiled, int64_t train_samples,
                           int64_t valid_samples) {
  const recipe::Recipe& r = compiled.recipe;
  const recipe::FinetuneSection& ft = r.finetune;
  const auto tokenizer = finetune_tokenizer(compiled);
  const auto eod = tokenizer->special_tokens().eod;
  if (!eod) {
    throw UserError(compiled.file + ": instruction tuning ends every example with the tokenizer's "
                                    "end-of-document token, and this tokenizer has none");
  }
  const data::SftFields fields{.prompt = ft.prompt_field, .response = ft.response_field,
                               .messages = ft.messages_field};
  const data::ChatTemplate chat_template = data::chat_template_for(
      recipe::name_of(ft.chat_template),
      r.data.tokenizer_model ? relative_to(compiled, *r.data.tokenizer_model) : std::string());
  const auto read = [&](const std::string& path) {
    const std::string file = relative_to(compiled, path);
    const std::vector<data::SftExample> examples =
        ft.format == recipe::FinetuneFormat::Sft ? data::read_prompt_response_jsonl(file, fields)
                                                 : data::read_chat_jsonl(file, fields, chat_template);
    std::vector<data::TokenizedExample> out;
    for (const data::SftExample& e : examples) out.push_back(data::tokenize_example(e, *tokenizer, *eod));
    return out;
  };
  const auto describe = [](const std::string& path, const data::SftSource& s) {
    const data::SftStats& st = s.stats();
    return fmt::format("{} ({} examples, {} tokens of which {} scored, {} sequences an epoch{}{})", path,
                       st.examples, st.tokens, st.scored_tokens, s.samples_per_epoch(),
                       st.cut ? fmt::format(", {} cut to data.seq_length + 1 tokens", st.cut) : "",
                       st.unscored ? fmt::format(", {} with nothing left to score", st.unscored) : "");
  };
  const auto train = std::make_shared<data::SftSource>(read(*ft.train_data), r.data.seq_length, ft.pack,
                                                       uint64_t(r.training.seed),
                                                       std::max<int64_t>(train_samples, 1), true, *eod);
  if (train->stats().scored_tokens == 0) {
    throw UserError(fmt::format("{}: no example keeps a response token within data.seq_length + 1 = {} "
                                "tokens, so training would learn nothing: raise data.seq_length or "
                                "shorten the prompts",
                                *ft.train_data, r.data.seq_length + 1));
  }
  TrainData out{.train = train, .description = describe(*ft.train_data, *train)};
  if (ft.valid_data) {
    const auto valid = std::make_shared<data::SftSource>(read(*ft.valid_data), r.data.seq_length, ft.pack, 0,
                                                         std::max<int64_t>(valid_samples, 1), false, *eod);
    out.valid = valid;
    out.description += "; validation " + describe(*ft.valid_data, *valid);
  }
  return out;
}

// Sequence-to-sequence fine-tuning (T5): source/target pairs, the training ones shuffled each
// epoch from training.seed, the validation ones in order.
TrainData seq2seq_data(const recipe::CompiledRecipe& compiled, int64_t train_samples, int64_t valid_samples) {
  const recipe::Recipe& r = compiled.recipe;
  const recipe::FinetuneSection& ft = r.finetune;
  const auto tokenizer = finetune_tokenizer(compiled);
  const data::WordPieceExtras extras = data::wordpiece_extras(*tokenizer, compiled.derived.vocab_extra_ids);
  const data::Seq2SeqTokens tokens{.bos = extras.bos, .eos = extras.eos,
                                   .pad = tokenizer->special_tokens().pad.value_or(0)};
  const data::Seq2SeqFields fields{.source = ft.source_field, .target = ft.target_field};
  const int64_t decoder = compiled.derived.decoder_seq_length;
  const auto make = [&](const std::string& path, uint64_t seed, int64_t size, bool shuffle) {
    return std::make_shared<data::Seq2SeqSource>(data::read_seq2seq_jsonl(relative_to(compiled, path), fields),
                                                 *tokenizer, tokens, r.data.seq_length, decoder, seed,
                                                 std::max<int64_t>(size, 1), shuffle);
  };
  const auto describe = [](const std::string& path, const data::Seq2SeqSource& s) {
    const data::Seq2SeqStats& st = s.stats();
    return fmt::format("{} ({} pairs{}{})", path, st.pairs,
                       st.cut_sources ? fmt::format(", {} sources cut to data.seq_length", st.cut_sources) : "",
                       st.cut_targets ? fmt::format(", {} targets cut to data.decoder_seq_length", st.cut_targets)
                                      : "");
  };
  const auto train = make(*ft.train_data, uint64_t(r.training.seed), train_samples, true);
  TrainData out{.train = train, .description = describe(*ft.train_data, *train)};
  if (ft.valid_data) {
    const auto valid = make(*ft.valid_data, 0, valid_samples, false);
    out.valid = valid;
    out.description += "; validation " + describe(*ft.valid_data, *valid);
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
  if (r.data.tokenizer != recipe::Tokenizer::BertWordPieceLowerCase &&
      r.data.tokenizer != recipe::Tokenizer::BertWordPieceCased) {
    throw UserError(fmt::format("{}: data.tokenizer: {} data is made with a WordPiece vocab.txt "
                                "(bert-wordpiece-lowercase or bert-wordpiece-cased), not {}; set "
                                "data.tokenizer to the one the dataset was made with",
                                compiled.file, family, recipe::name_of(r.data.tokenizer)));
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

int32_t end_of_document(const recipe::CompiledRecipe& compiled) {
  const recipe::Recipe& r = compiled.recipe;
  // Mock data ends its documents with the last id, whatever tokenizer the recipe names.
  if (r.data.mock) return int32_t(r.model.vocab_size - 1);
  if (r.data.vocab_file || r.data.tokenizer_model) {
    data::TokenizerFiles files;
    if (r.data.vocab_file) files.vocab_file = relative_to(compiled, *r.data.vocab_file);
    if (r.data.merge_file) files.merge_file = relative_to(compiled, *r.data.merge_file);
    if (r.data.tokenizer_model) files.tokenizer_model = relative_to(compiled, *r.data.tokenizer_model);
    const auto tokenizer = data::make_tokenizer(r.data.tokenizer, files);
    if (const auto eod = tokenizer->special_tokens().eod) return *eod;
    throw UserError(compiled.file + ": the tokenizer of data.vocab_file / data.tokenizer_model has "
                                    "no end-of-document token");
  }
  if (r.data.tokenizer == recipe::Tokenizer::Gpt2Bpe) return kGpt2EndOfText;
  throw UserError(compiled.file + ": data.vocab_file or data.tokenizer_model: the end-of-document "
                                  "id is the tokenizer's; name its files");
}

data::GptSampleOptions document_options(const recipe::CompiledRecipe& compiled) {
  const recipe::DataSection& d = compiled.recipe.data;
  if (!d.reset_position_ids && !d.reset_attention_mask && !d.eod_mask_loss) return {};
  const int32_t eod = end_of_document(compiled);
  if (eod < 0 || eod >= compiled.recipe.model.vocab_size) {
    throw UserError(fmt::format("{}: the end-of-document id {} is outside model.vocab_size {}",
                                compiled.file, eod, compiled.recipe.model.vocab_size));
  }
  return {.eod_token = eod,
          .eod_mask_loss = d.eod_mask_loss,
          .reset_position_ids = d.reset_position_ids,
          .reset_attention_mask = d.reset_attention_mask};
}

TrainData load_train_data(const recipe::CompiledRecipe& compiled, int64_t train_samples,
                          int64_t valid_samples) {
  const recipe::Recipe& r = compiled.recipe;
  if (r.finetune.train_data) {
    switch (r.finetune.format) {
      case recipe::FinetuneFormat::Sft:
      case recipe::FinetuneFormat::Chat:
        return instruction_data(compiled, train_samples, valid_samples);
      case recipe::FinetuneFormat::Seq2Seq:
        return seq2seq_data(compiled, train_samples, valid_samples);
      default:
        return classification_data(compiled, train_samples, valid_samples);
    }
  }
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
  const data::GptSampleOptions documents = document_options(compiled);
  if (r.data.mock) {
    return {.train = std::make_shared<MockGptSource>(r.data.seq_length, vocab, r.training.seed, 0,
                                                      train_samples, documents),
            .valid = std::make_shared<MockGptSource>(r.data.seq_length, vocab, r.training.seed, 1,
                                                      valid_samples, documents),
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
                                .seed = static_cast<uint64_t>(r.training.seed),
                                .sample = documents};
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
