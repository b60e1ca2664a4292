// `megatron eval CHECKPOINT --task perplexity|cloze|multiple-choice --data FILE [--json OUT]
// [overrides]`: loads a checkpoint (any layout that wrote it, or a Hugging Face import) into one
// process and scores a task; a table on stdout, lm-evaluation-harness's JSON layout in --json.
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iostream>

#include "ckpt/checkpoint_reader.hpp"
#include "ckpt/directory.hpp"
#include "cli/commands.hpp"
#include "cli/limits.hpp"
#include "cli/progress_line.hpp"
#include "cli/tokenizer_args.hpp"
#include "core/build_info.hpp"
#include "core/error.hpp"
#include "core/output_dir.hpp"
#include "eval/model_weights.hpp"
#include "eval/results.hpp"
#include "recipe/compile.hpp"
#include "train/model_context.hpp"

namespace megatron::cli {
namespace {

namespace fs = std::filesystem;

struct EvalArgs {
  std::string checkpoint;
  std::string task;
  std::string data;
  std::string json;
  std::string field = "text";
  eval::ChoiceFields choice_fields;
  int64_t stride = 32;
  int64_t batch_size = 0;
  int threads = 0;
  std::string device;
  TokenizerArgs tokenizer;
  std::vector<std::string> overrides;
};

// The checkpoint's own recipe, for one process: its model, this machine.
recipe::CompiledRecipe compile_for_eval(const ckpt::CheckpointMeta& meta, const fs::path& dir,
                                        const EvalArgs& a) {
  const fs::path file = fs::temp_directory_path() / fmt::format("megatron-eval-{}.yaml", ::getpid());
  {
    std::ofstream out(file);
    out << meta.recipe;
  }
  std::vector<std::string> o{"parallel.tensor=1",        "parallel.pipeline=1",
                             "parallel.virtual_pipeline=1", "parallel.context=1",
                             "parallel.sequence_parallel=false", "cluster.nodes=1",
                             "cluster.gpus_per_node=1",  "training.global_batch_size=" +
                                 std::to_string(std::max<int64_t>(a.batch_size, 1)),
                             "training.micro_batch_size=" + std::to_string(std::max<int64_t>(a.batch_size, 1))};
  if (!a.device.empty()) o.push_back("cluster.device=" + a.device);
  o.insert(o.end(), a.overrides.begin(), a.overrides.end());
  try {
    recipe::CompiledRecipe c = recipe::compile(file, {.overrides = o});
    fs::remove(file);
    c.file = (dir / "recipe").string();
    return c;
  } catch (...) {
    fs::remove(file);
    throw;
  }
}

std::unique_ptr<data::Tokenizer> tokenizer_for(const EvalArgs& a, const recipe::Recipe& r) {
  TokenizerArgs t = a.tokenizer;
  if (t.type.empty()) t.type = std::string(recipe::name_of(r.data.tokenizer));
  if (t.files.vocab_file.empty() && r.data.vocab_file && fs::exists(*r.data.vocab_file)) {
    t.files.vocab_file = *r.data.vocab_file;
  }
  if (t.files.merge_file.empty() && r.data.merge_file && fs::exists(*r.data.merge_file)) {
    t.files.merge_file = *r.data.merge_file;
  }
  if (t.files.tokenizer_model.empty() && r.data.tokenizer_model && fs::exists(*r.data.tokenizer_model)) {
    t.files.tokenizer_model = *r.data.tokenizer_model;
  }
  if (t.files.vocab_file.empty() && t.files.tokenizer_model.empty()) {
    throw UserError(fmt::format(
        "the checkpoint's recipe names no tokenizer files this machine has: give --vocab-file "
        "(and --merge-file for {}), e.g. data/tokenizers/gpt2/vocab.json and merges.txt",
        t.type));
  }
  return t.load();
}

void run_eval(const EvalArgs& a) {
  const auto started = std::chrono::steady_clock::now();
  const std::optional<fs::path> dir = ckpt::resolve_checkpoint(a.checkpoint);
  if (!dir) throw UserError(a.checkpoint + ": no checkpoint there (a save directory with `latest`, or an iter_NNNNNNN directory)");
  const ckpt::CheckpointReader reader(*dir);
  const recipe::CompiledRecipe compiled = compile_for_eval(reader.meta(), *dir, a);
  if (compiled.recipe.model.arch != recipe::Arch::Gpt) {
    throw UserError(fmt::format("{}: eval scores causal language models (arch gpt); this checkpoint "
                                "is {}: fine-tune it instead",
                                dir->string(), recipe::name_of(compiled.recipe.model.arch)));
  }
  // Read every task file before the model is built: bad input costs nothing.
  std::vector<std::string> documents;
  std::vector<eval::Choice> questions;
  if (a.task == "multiple-choice") {
    questions = eval::read_choices(a.data, a.choice_fields);
  } else {
    documents = eval::read_documents(a.data, a.field);
  }
  std::vector<fs::path> created;
  if (!a.json.empty() && fs::path(a.json).has_parent_path()) {
    created = prepare_output_dir("--json", fs::path(a.json).parent_path().string());
  }
  const auto tokenizer = tokenizer_for(a, compiled.recipe);
  // A token id past the model's vocabulary would index past its embedding.
  if (tokenizer->vocab_size() > compiled.recipe.model.vocab_size) {
    throw UserError(fmt::format("{}: the tokenizer has {} tokens but the model {}: give the "
                                "tokenizer the checkpoint was trained with",
                                dir->string(), tokenizer->vocab_size(),
                                compiled.recipe.model.vocab_size));
  }
  train::ModelContext ctx(compiled, a.threads);
  eval::load_model_weights(reader, *ctx.model, *ctx.backend);
  const model::ModelConfig& c = ctx.config;
  const eval::ScorerOptions options{
      .max_length = c.max_positions,
      .batch_size = std::max<int64_t>(a.batch_size, 1),
      .pad_token = tokenizer->special_tokens().eod.value_or(0),
      .vocab_size = std::min<int64_t>(tokenizer->vocab_size(), c.padded_vocab)};
  spdlog::info("megatron eval {}: task {} on {} ({} {}), max length {}, batch {}, {}",
               dir->string(), a.task, a.data,
               a.task == "multiple-choice" ? questions.size() : documents.size(),
               a.task == "multiple-choice" ? "questions" : "documents", options.max_length,
               options.batch_size, ctx.backend->description());
  ProgressLine line;
  const eval::TaskSetup setup{
      .tokenizer = *tokenizer,
      .prefix_token = options.pad_token,
      .max_length = options.max_length,
      .score = [&](const std::vector<eval::Request>& requests) {
        const auto begin = std::chrono::steady_clock::now();
        return eval::score(*ctx.model, *ctx.backend, requests, options, [&](int64_t done, int64_t all) {
          const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
          const double rate = double(done) / std::max(s, 1e-9);
          line(fmt::format("scored {}/{} requests, {:.1f} requests/s, ETA {:.0f} s", done, all, rate,
                           double(all - done) / std::max(rate, 1e-9)),
               s, done == all);
        });
      }};
  std::vector<eval::TaskResult> results;
  if (a.task == "perplexity") {
    results.push_back(eval::perplexity_task(documents, setup, a.stride));
  } else if (a.task == "cloze") {
    results.push_back(eval::cloze_task(documents, setup));
  } else {
    results.push_back(eval::multiple_choice_task(questions, setup));
  }
  std::cout << eval::results_table(results);
  if (!a.json.empty()) {
    const eval::RunInfo info{.checkpoint = dir->string(),
                             .data = a.data,
                             .batch_size = options.batch_size,
                             .max_length = options.max_length,
                             .version = std::string(build_info::version())};
    const std::string tmp = a.json + ".tmp";
    std::ofstream out(tmp);
    out << eval::results_json(results, info).dump(2) << "\n";
    if (!out.flush()) {
      fs::remove(tmp);
      remove_created(created);
      throw RuntimeFailure("cannot write " + a.json);
    }
    out.close();
    fs::rename(tmp, a.json);
  }
  spdlog::info("done in {:.1f} s{}", std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(),
               a.json.empty() ? "" : "; results in " + a.json);
}

}  // namespace

void add_eval_command(CLI::App& app, Actions& actions) {
  auto args = std::make_shared<EvalArgs>();
  CLI::App* cmd = app.add_subcommand(
      "eval", "Score a checkpoint on a task: perplexity, cloze (LAMBADA) or multiple choice");
  cmd->add_option("checkpoint", args->checkpoint, "Checkpoint (save directory or iter_NNNNNNN)")->required();
  cmd->add_option("overrides", args->overrides, "section.key=value recipe overrides");
  cmd->add_option("--task", args->task, "perplexity, cloze or multiple-choice")
      ->required()
      ->check(CLI::IsMember({"perplexity", "cloze", "multiple-choice"}));
  cmd->add_option("--data", args->data, "Task file: .jsonl (or plain text for perplexity)")->required();
  cmd->add_option("--field", args->field, "jsonl field holding each document's text (default text)");
  cmd->add_option("--context-field", args->choice_fields.context, "multiple choice: the question (default context)");
  cmd->add_option("--choices-field", args->choice_fields.choices, "multiple choice: the list of answers (default choices)");
  cmd->add_option("--gold-field", args->choice_fields.gold, "multiple choice: the right answer, index or text (default gold)");
  cmd->add_option("--stride", args->stride, "perplexity: Megatron's overlapping-window stride (default 32)")
      ->check(whole_number(int64_t{1} << 30));
  cmd->add_option("--batch-size", args->batch_size, "Sequences per forward pass (default 1)")
      ->check(whole_number(int64_t{1} << 16));
  cmd->add_option("--json", args->json, "Write lm-evaluation-harness-style results JSON here");
  cmd->add_option("--threads", args->threads, "CPU threads (default: every core)")->check(parallelism("threads"));
  cmd->add_option("--device", args->device, "cpu, cuda or auto (default: the recipe's)");
  args->tokenizer.add_to(cmd, false);
  actions.emplace_back(cmd, [args] { run_eval(*args); });
}

}  // namespace megatron::cli
