// `megatron preprocess`, `megatron tokenize`, `megatron data inspect` and `megatron data merge`:
// their flags, and one call each into data/'s jobs.
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "cli/limits.hpp"
#include "cli/tokenizer_args.hpp"
#include "data/dataset_inspect_job.hpp"
#include "data/dataset_merge_job.hpp"
#include "data/preprocess_job.hpp"
#include "data/tokenize_job.hpp"

namespace megatron::cli {
namespace {

void add_preprocess(CLI::App& app, Actions& actions) {
  struct Args {
    data::PreprocessJob job;
    TokenizerArgs tokenizer;
  };
  auto args = std::make_shared<Args>();
  data::PreprocessOptions& options = args->job.options;
  auto* cmd =
      app.add_subcommand("preprocess",
                         "Tokenize a JSONL corpus into Megatron-LM's indexed dataset format "
                         "({prefix}_{key}_document.bin/.idx)");
  cmd->footer("Progress goes to standard error; a summary line to standard output.");
  cmd->add_option("--input", options.input, "Corpus: .jsonl, .jsonl.gz or .jsonl.zst")->required();
  cmd->add_option("--output-prefix", options.output_prefix, "Output path prefix")->required();
  args->tokenizer.add_to(cmd, true);
  cmd->add_option("--json-keys", options.json_keys, "JSON keys to tokenize (default: text)");
  cmd->add_flag("--append-eod", options.append_eod, "Append the end-of-document token");
  cmd->add_flag("--split-sentences", options.split_sentences,
                "One sequence per sentence; writes {prefix}_{key}_sentence.bin/.idx");
  cmd->add_flag("--keep-newlines", options.keep_newlines,
                "With --split-sentences: a newline also ends a sentence");
  cmd->add_option("--workers", options.workers, "Tokenizing threads")
      ->check(whole_number(1 << 30));  // the ceiling: data/worker_limit.hpp
  cmd->add_flag("--skip-bad-lines", options.skip_bad_lines,
                "Skip and count lines that are not JSON or lack a key, instead of stopping");
  cmd->add_flag("--quiet", args->job.quiet, "No progress line");
  actions.emplace_back(cmd, [args] { data::run_preprocess(args->job, *args->tokenizer.load()); });
}

void add_tokenize(CLI::App& app, Actions& actions) {
  struct Args {
    data::TokenizeJob job;
    TokenizerArgs tokenizer;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("tokenize",
                                 "Tokenize JSONL text and print the ids, one JSON object per line");
  args->tokenizer.add_to(cmd, true);
  cmd->add_option("--input", args->job.input, "JSONL input")->required();
  cmd->add_option("--json-key", args->job.key, "Key holding the text (default: text)");
  cmd->add_option("--output", args->job.output, "JSONL output (default: standard output)");
  cmd->add_flag("--show-tokens", args->job.show_tokens, "Also print each token's text");
  actions.emplace_back(cmd, [args] { data::tokenize_jsonl(args->job, *args->tokenizer.load()); });
}

void add_data_commands(CLI::App& app, Actions& actions) {
  auto* group = app.add_subcommand("data", "Inspect and merge indexed datasets");
  group->require_subcommand(0, 1);

  struct InspectArgs {
    std::string prefix;
    TokenizerArgs tokenizer;
  };
  auto inspect_args = std::make_shared<InspectArgs>();
  auto* inspect = group->add_subcommand(
      "inspect", "Counts, token type, token statistics, and the first document");
  inspect->add_option("prefix", inspect_args->prefix, "Dataset prefix (without .bin/.idx)")
      ->required();
  inspect_args->tokenizer.add_to(inspect, false);
  actions.emplace_back(inspect, [a = inspect_args] {
    data::DatasetInspectJob job{.prefix = a->prefix};
    if (!a->tokenizer.type.empty()) job.tokenizer = [a] { return a->tokenizer.load(); };
    data::inspect_dataset(job, std::cout);
  });

  auto merge_args = std::make_shared<data::DatasetMergeJob>();
  auto* merge = group->add_subcommand(
      "merge", "Concatenate datasets into one (as Megatron's merge_datasets)");
  merge->add_option("output", merge_args->output, "Output prefix")->required();
  merge->add_option("inputs", merge_args->inputs, "Input prefixes, in order")->required();
  merge->add_flag("--force", merge_args->force, "Replace the output dataset if it exists");
  actions.emplace_back(merge, [merge_args] { data::merge_datasets(*merge_args, std::cout); });
}

}  // namespace

void add_data_pipeline_commands(CLI::App& app, Actions& actions) {
  add_preprocess(app, actions);
  add_tokenize(app, actions);
  add_data_commands(app, actions);
}

}  // namespace megatron::cli
