// `megatron preprocess`, `megatron tokenize`, `megatron data inspect` and `megatron data merge`.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/tokenizer_args.hpp"
#include "cli/limits.hpp"
#include "core/error.hpp"
#include "data/indexed_dataset.hpp"
#include "data/line_reader.hpp"
#include "data/preprocess.hpp"
#include "data/tokenizer.hpp"
#include "recipe/enum_names.hpp"
#include "recipe/suggest.hpp"

namespace megatron::cli {
namespace {

std::string duration(double seconds) {
  const auto s = static_cast<int64_t>(seconds + 0.5);
  return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
}

// One progress line: a live line on a terminal, a periodic line (every 10 s) in logs.
void show_progress(const data::PreprocessProgress& p, double& last_printed) {
  const bool tty = ::isatty(STDERR_FILENO);
  if (!tty && p.seconds - last_printed < 10) return;
  last_printed = p.seconds;
  const double rate = p.seconds > 0 ? p.input_bytes / p.seconds : 0;
  const double fraction = p.input_size ? double(p.input_bytes) / double(p.input_size) : 0;
  const double eta = rate > 0 ? (double(p.input_size) - double(p.input_bytes)) / rate : 0;
  std::cerr << (tty ? "\r" : "")
            << fmt::format("preprocess: {:5.1f}% {} documents, {:.0f} docs/s, {:.1f} MB/s, "
                           "{:.2f}M tokens/s, ETA {}",
                           100 * fraction, p.documents, p.documents / std::max(p.seconds, 1e-9),
                           rate / 1e6, p.tokens / std::max(p.seconds, 1e-9) / 1e6, duration(eta))
            << (tty ? "" : "\n") << std::flush;
}

void add_preprocess(CLI::App& app, Actions& actions) {
  struct Args {
    data::PreprocessOptions options;
    TokenizerArgs tokenizer;
    bool quiet = false;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "preprocess", "Tokenize a JSONL corpus into Megatron-LM's indexed dataset format "
                    "({prefix}_{key}_document.bin/.idx)");
  cmd->footer("Progress goes to standard error; a summary line to standard output.");
  cmd->add_option("--input", args->options.input, "Corpus: .jsonl, .jsonl.gz or .jsonl.zst")->required();
  cmd->add_option("--output-prefix", args->options.output_prefix, "Output path prefix")->required();
  args->tokenizer.add_to(cmd, true);
  cmd->add_option("--json-keys", args->options.json_keys, "JSON keys to tokenize (default: text)");
  cmd->add_flag("--append-eod", args->options.append_eod, "Append the end-of-document token");
  cmd->add_flag("--split-sentences", args->options.split_sentences,
                "One sequence per sentence; writes {prefix}_{key}_sentence.bin/.idx");
  cmd->add_flag("--keep-newlines", args->options.keep_newlines,
                "With --split-sentences: a newline also ends a sentence");
  cmd->add_option("--workers", args->options.workers, "Tokenizing threads")->check(whole_number(1 << 30));  // the ceiling: data/worker_limit.hpp
  cmd->add_flag("--skip-bad-lines", args->options.skip_bad_lines,
                "Skip and count lines that are not JSON or lack a key, instead of stopping");
  cmd->add_flag("--quiet", args->quiet, "No progress line");
  actions.emplace_back(cmd, [args] {
    const auto tokenizer = args->tokenizer.load();
    std::function<void(const data::PreprocessProgress&)> progress;
    if (!args->quiet)
      progress = [last_printed = -10.0](const data::PreprocessProgress& p) mutable {
        show_progress(p, last_printed);
      };
    const auto s = data::preprocess(args->options, *tokenizer, progress);
    if (!args->quiet && ::isatty(STDERR_FILENO)) std::cerr << "\n";
    std::cout << fmt::format(
        "preprocessed {} documents ({} skipped), {} tokens, {:.1f} MB in {:.2f} s: {:.1f} MB/s, "
        "{:.2f}M tokens/s with {} worker{}\n",
        s.documents, s.skipped, s.tokens, s.input_size / 1e6, s.seconds,
        s.input_size / 1e6 / std::max(s.seconds, 1e-9), s.tokens / 1e6 / std::max(s.seconds, 1e-9),
        args->options.workers, args->options.workers == 1 ? "" : "s");
    for (const auto& out : s.outputs) std::cout << "wrote " << out << ".bin and " << out << ".idx\n";
  });
}

void add_tokenize(CLI::App& app, Actions& actions) {
  struct Args {
    TokenizerArgs tokenizer;
    std::string input, output, key = "text";
    bool show_tokens = false;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("tokenize", "Tokenize JSONL text and print the ids, one JSON object per line");
  args->tokenizer.add_to(cmd, true);
  cmd->add_option("--input", args->input, "JSONL input")->required();
  cmd->add_option("--json-key", args->key, "Key holding the text (default: text)");
  cmd->add_option("--output", args->output, "JSONL output (default: standard output)");
  cmd->add_flag("--show-tokens", args->show_tokens, "Also print each token's text");
  actions.emplace_back(cmd, [args] {
    const auto tokenizer = args->tokenizer.load();
    data::LineReader reader(args->input);
    std::ofstream file;
    if (!args->output.empty()) {
      file.open(args->output);
      if (!file) throw UserError("cannot write '" + args->output + "'");
    }
    std::ostream& out = args->output.empty() ? std::cout : file;
    std::string_view line;
    while (reader.next(line)) {
      if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
      nlohmann::json in;
      try {
        in = nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception&) {
        throw UserError(fmt::format("{}:{}: not valid JSON", args->input, reader.line_number()));
      }
      if (!in.is_object() || !in.contains(args->key) || !in[args->key].is_string())
        throw UserError(fmt::format("{}:{}: no string under key '{}'", args->input,
                                    reader.line_number(), args->key));
      const auto ids = tokenizer->encode(in[args->key].get<std::string>());
      nlohmann::json row = {{"ids", ids}};
      if (args->show_tokens) {
        std::vector<std::string> tokens;
        for (auto id : ids) tokens.push_back(tokenizer->token_text(id));
        row["tokens"] = tokens;
      }
      out << row.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    }
  });
}

void add_data_commands(CLI::App& app, Actions& actions) {
  auto* group = app.add_subcommand("data", "Inspect and merge indexed datasets");
  group->require_subcommand(0, 1);

  struct InspectArgs {
    std::string prefix;
    TokenizerArgs tokenizer;
  };
  auto inspect_args = std::make_shared<InspectArgs>();
  auto* inspect = group->add_subcommand("inspect", "Counts, token type, token statistics, and the first document");
  inspect->add_option("prefix", inspect_args->prefix, "Dataset prefix (without .bin/.idx)")->required();
  inspect_args->tokenizer.add_to(inspect, false);
  actions.emplace_back(inspect, [inspect_args] {
    const data::IndexedDataset ds(inspect_args->prefix);
    const auto lengths = ds.sequence_lengths();
    int64_t total = 0, shortest = lengths.empty() ? 0 : lengths[0], longest = 0;
    for (auto n : lengths) {
      total += n;
      shortest = std::min<int64_t>(shortest, n);
      longest = std::max<int64_t>(longest, n);
    }
    // One flat count per id: a std::map insertion per token made this minutes on large data.
    // Ids past any real vocabulary (a corrupt or foreign dataset) are counted, not given a
    // slot each, so one id of 2^31 cannot cost 16 GB.
    constexpr int32_t kCountedIds = 1 << 22;
    std::vector<int64_t> counts;
    int64_t negative = 0, huge = 0;
    int32_t min_id = std::numeric_limits<int32_t>::max(), max_id = std::numeric_limits<int32_t>::min();
    for (int64_t i = 0; i < ds.sequences(); ++i)
      for (auto id : ds.tokens(i)) {
        min_id = std::min(min_id, id);
        max_id = std::max(max_id, id);
        if (id < 0) {
          ++negative;
          continue;
        }
        if (id >= kCountedIds) {
          ++huge;
          continue;
        }
        if (static_cast<std::size_t>(id) >= counts.size()) counts.resize(static_cast<std::size_t>(id) + 1);
        ++counts[static_cast<std::size_t>(id)];
      }
    int64_t distinct = 0;
    for (std::size_t id = 0; id < counts.size(); ++id) distinct += counts[id] != 0;
    std::cout << fmt::format("dataset     {}\n", inspect_args->prefix)
              << fmt::format("token type  {} ({} bytes)\n", data::token_type_name(ds.token_type()),
                             data::token_size(ds.token_type()))
              << fmt::format("documents   {}\nsequences   {}\ntokens      {}\n", ds.documents(),
                             ds.sequences(), total)
              << fmt::format("sequence length  min {}, mean {:.1f}, max {}\n", shortest,
                             ds.sequences() ? double(total) / ds.sequences() : 0.0, longest);
    if (total > 0) {
      std::vector<std::pair<int64_t, int64_t>> by_count;
      for (std::size_t id = 0; id < counts.size(); ++id)
        if (counts[id]) by_count.emplace_back(-counts[id], static_cast<int64_t>(id));
      std::sort(by_count.begin(), by_count.end());
      std::cout << fmt::format("token ids   min {}, max {}, {} distinct{}{}\nmost frequent", min_id,
                               max_id, distinct,
                               negative ? fmt::format(" ({} negative ids)", negative) : "",
                               huge ? fmt::format(" ({} ids >= {}, not counted)", huge, kCountedIds) : "");
      for (std::size_t i = 0; i < std::min<std::size_t>(10, by_count.size()); ++i)
        std::cout << fmt::format(" {}:{}", by_count[i].second, -by_count[i].first);
      std::cout << "\n";
    }
    if (!inspect_args->tokenizer.type.empty() && ds.documents() > 0) {
      const auto tokenizer = inspect_args->tokenizer.load();
      const auto docs = ds.document_indices();
      std::vector<int32_t> ids;
      for (int64_t i = docs[0]; i < docs[1]; ++i) {
        auto t = ds.tokens(i);
        ids.insert(ids.end(), t.begin(), t.end());
      }
      std::cout << "first document:\n" << tokenizer->decode(ids) << "\n";
    }
  });

  struct MergeArgs {
    std::string output;
    std::vector<std::string> inputs;
    bool force = false;
  };
  auto merge_args = std::make_shared<MergeArgs>();
  auto* merge = group->add_subcommand("merge", "Concatenate datasets into one (as Megatron's merge_datasets)");
  merge->add_option("output", merge_args->output, "Output prefix")->required();
  merge->add_option("inputs", merge_args->inputs, "Input prefixes, in order")->required();
  merge->add_flag("--force", merge_args->force, "Replace the output dataset if it exists");
  actions.emplace_back(merge, [merge_args] {
    if (!merge_args->force)
      for (const auto& path : {data::bin_path(merge_args->output), data::idx_path(merge_args->output)}) {
        std::error_code ignored;
        if (std::filesystem::exists(path, ignored))
          throw UserError(fmt::format("'{}' already exists; pass --force to replace it", path.string()));
      }
    std::vector<std::unique_ptr<data::IndexedDataset>> inputs;
    for (const auto& p : merge_args->inputs) inputs.push_back(std::make_unique<data::IndexedDataset>(p));
    data::IndexedDatasetWriter writer(merge_args->output, inputs.front()->token_type());
    for (const auto& in : inputs) writer.add_dataset(*in);
    writer.finish();
    std::cout << fmt::format("merged {} datasets: {} documents, {} sequences, {} tokens into {}\n",
                             inputs.size(), writer.documents(), writer.sequences(), writer.tokens(),
                             merge_args->output);
  });
}

}  // namespace

void add_data_pipeline_commands(CLI::App& app, Actions& actions) {
  add_preprocess(app, actions);
  add_tokenize(app, actions);
  add_data_commands(app, actions);
}

}  // namespace megatron::cli
