// `megatron tokenizer train`: learns a byte-level BPE vocabulary from JSONL text and writes it
// as GPT-2's vocab.json + merges.txt, ready for --tokenizer gpt2-bpe.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "cli/limits.hpp"
#include "core/output_dir.hpp"
#include "core/progress_line.hpp"
#include "data/bpe_trainer.hpp"
#include "data/bpe_word_counts.hpp"
#include "data/gpt2_bpe_writer.hpp"

namespace megatron::cli {
namespace {

void add_train(CLI::App& group, Actions& actions) {
  struct Args {
    data::WordCountOptions counting;
    data::BpeTrainOptions training;
    std::string output_dir;
    bool force = false;
    bool quiet = false;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = group.add_subcommand(
      "train",
      "Train a byte-level BPE tokenizer on JSONL text; writes GPT-2's vocab.json and "
      "merges.txt (256 byte tokens, the merges, then <|endoftext|>)");
  cmd->add_option("--input", args->counting.inputs,
                  "Corpus: .jsonl, .jsonl.gz or .jsonl.zst (repeat for several files)")
      ->required();
  cmd->add_option("--json-key", args->counting.json_key, "Key holding the text (default: text)");
  cmd->add_option("--vocab-size", args->training.vocab_size,
                  "Tokens in all, with the 256 bytes and <|endoftext|> (at least 257)")
      ->required();
  cmd->add_option("--output-dir", args->output_dir, "Directory for vocab.json and merges.txt")
      ->required();
  cmd->add_option("--min-frequency", args->training.min_frequency,
                  "Merge only pairs seen at least this often (default: 2)");
  cmd->add_option("--workers", args->counting.workers,
                  "Threads that read and pre-tokenize the input; the result is the same for any")
      ->check(whole_number(1 << 30));  // the ceiling: data/worker_limit.hpp
  cmd->add_flag("--force", args->force, "Replace vocab.json and merges.txt if they exist");
  cmd->add_flag("--quiet", args->quiet, "No progress line");
  actions.emplace_back(cmd, [args] {
    // Refuse what can be refused before reading a possibly large corpus.
    data::check_bpe_train_options(args->training);
    data::check_gpt2_bpe_destination(args->output_dir, args->force);
    const std::vector<std::filesystem::path> created =
        prepare_output_dir("--output-dir", args->output_dir);
    const auto start = std::chrono::steady_clock::now();
    auto since = [](auto t) {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    };
    ProgressLine line;
    auto show_count = [&line](const data::WordCountProgress& p, bool last) {
      const double fraction = p.input_size ? double(p.input_bytes) / double(p.input_size) : 0;
      line(
          fmt::format("tokenizer train: counting words {:5.1f}%, {} documents, {:.1f} MB/s",
                      100 * fraction, p.documents, p.input_bytes / 1e6 / std::max(p.seconds, 1e-9)),
          p.seconds, last);
    };
    auto show_merges = [&line](const data::BpeTrainProgress& p, bool last) {
      line(fmt::format("tokenizer train: {} merges, {}/{} tokens, {:.0f} merges/s", p.merges,
                       p.tokens, p.target_tokens, p.merges / std::max(p.seconds, 1e-9)),
           p.seconds, last);
    };
    std::function<void(const data::WordCountProgress&)> on_count;
    std::function<void(const data::BpeTrainProgress&)> on_merge;
    if (!args->quiet) {
      on_count = [&](const data::WordCountProgress& p) { show_count(p, false); };
      on_merge = [&](const data::BpeTrainProgress& p) { show_merges(p, false); };
    }
    data::WordCountSummary counts;
    data::BpeVocabulary vocabulary;
    data::Gpt2BpeFiles files;
    try {
      counts = data::count_words(args->counting, on_count);
      if (!args->quiet) show_count(counts, true);
      const auto training_start = std::chrono::steady_clock::now();
      vocabulary = data::train_bpe(counts.words, args->training, on_merge);
      if (!args->quiet) {
        show_merges({.merges = static_cast<int64_t>(vocabulary.merges.size()),
                     .tokens = static_cast<int64_t>(vocabulary.tokens.size()),
                     .target_tokens = args->training.vocab_size - 1,
                     .seconds = since(training_start)},
                    true);
      }
      files = data::write_gpt2_bpe(vocabulary, args->output_dir, args->force);
    } catch (...) {
      remove_created(created);  // a failed run leaves no new empty directories
      throw;
    }
    const double seconds = since(start);
    std::cout << fmt::format(
        "trained a vocabulary of {} tokens ({} merges) from {} distinct words ({} in all, {} "
        "documents) in {:.2f} s\n",
        files.vocab_size, vocabulary.merges.size(), counts.words.size(), counts.total_words,
        counts.documents, seconds);
    if (files.vocab_size < args->training.vocab_size) {
      std::cout << fmt::format(
          "stopped short of {} tokens: no pair left that occurs at least {} times\n",
          args->training.vocab_size, args->training.min_frequency);
    }
    std::cout << "wrote " << files.vocab_json << " and " << files.merges_txt << "\n";
  });
}

}  // namespace

void add_tokenizer_command(CLI::App& app, Actions& actions) {
  auto* group = app.add_subcommand("tokenizer", "Train tokenizers");
  group->require_subcommand(0, 1);
  add_train(*group, actions);
}

}  // namespace megatron::cli
