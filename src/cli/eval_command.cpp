// `megatron eval CHECKPOINT --task perplexity|cloze|multiple-choice --data FILE [--json OUT]
// [--nproc N] [overrides]`: loads a checkpoint (any layout that wrote it, or a Hugging Face
// import) into this job's tensor- and data-parallel layout and scores a task; a table on stdout,
// lm-evaluation-harness's JSON layout in --json.
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <map>

#include "ckpt/checkpoint_reader.hpp"
#include "ckpt/directory.hpp"
#include "cli/checkpoint_job.hpp"
#include "cli/commands.hpp"
#include "cli/limits.hpp"
#include "cli/local_job.hpp"
#include "cli/progress_line.hpp"
#include "cli/sampling_flags.hpp"
#include "cli/tokenizer_args.hpp"
#include "core/build_info.hpp"
#include "core/error.hpp"
#include "core/output_dir.hpp"
#include "dist/launcher.hpp"
#include "eval/results.hpp"
#include "eval/classify.hpp"
#include "eval/greedy_decode.hpp"
#include "eval/tuned_prompt.hpp"
#include "data/wordpiece_extras.hpp"
#include "eval/task_run.hpp"
#include "plan/engine_support.hpp"
#include "recipe/compile.hpp"
#include "train/model_context.hpp"
#include "train/model_weights.hpp"
#include "train/pipeline_step.hpp"

namespace megatron::cli {
namespace {

namespace fs = std::filesystem;

struct EvalArgs {
  std::string checkpoint;
  std::string task;
  std::string data;
  std::string json;
  std::string log_samples;
  std::string field = "text";
  eval::ChoiceFields choice_fields;
  int64_t stride = 32;
  std::string windows = "both";
  int64_t batch_size = 0;
  int64_t num_fewshot = 0;
  std::string fewshot_data;
  std::string prompt_field = "prompt";
  std::string answer_field = "answer";
  std::string metrics = "exact_match,f1";
  int64_t max_tokens = 32;
  double temperature = 0.0;  // generation: 0 is greedy
  int64_t top_k = 0;
  double top_p = 0.0;
  uint64_t seed = 1234;
  int threads = 0;
  int nproc = 0;
  std::string device;
  TokenizerArgs tokenizer;
  std::vector<std::string> overrides;
  std::vector<CLI::Option*> task_flags;  // what describes --task (refused without it)
};

// The tasks to run: --task and its flags, else the recipe's eval.tasks.
std::vector<eval::TaskSpec> task_specs(const EvalArgs& a, const recipe::Recipe& r) {
  if (a.task.empty()) {
    for (const CLI::Option* o : a.task_flags) {
      if (o->count() > 0) {
        throw UserError(fmt::format("{} describes --task; without --task the recipe's eval.tasks "
                                    "run, each entry with its own keys",
                                    o->get_name()));
      }
    }
    if (r.eval.tasks.empty()) {
      throw UserError("no task: give --task and --data, or list tasks in the recipe's eval.tasks "
                      "(add an override such as 'eval.tasks=[{task: perplexity, data: test.jsonl}]')");
    }
    std::vector<eval::TaskSpec> out;
    for (const recipe::EvalTask& t : r.eval.tasks) out.push_back(eval::task_spec(t));
    return out;
  }
  if (a.data.empty()) throw UserError("--task " + a.task + " needs --data (the task's file)");
  return {{.task = a.task,
           .data = a.data,
           .field = a.field,
           .choice_fields = a.choice_fields,
           .stride = a.stride,
           .windows = eval::windows_named(a.windows),
           .num_fewshot = a.num_fewshot,
           .fewshot_data = a.fewshot_data,
           .prompt_field = a.prompt_field,
           .answer_field = a.answer_field,
           .metrics = eval::metrics_named(a.metrics),
           .max_tokens = a.max_tokens}};
}

// Generation tasks decode greedily unless --temperature asks for draws (megatron generate's
// rules for the three settings).
generate::Sampling sampling_of(const EvalArgs& a) {
  check_sampling_flags(a.temperature, a.top_k, a.top_p);
  if (a.temperature == 0.0 && (a.top_k > 0 || a.top_p > 0.0)) {
    throw UserError("--top-k and --top-p shape draws: give --temperature too (0, the default, is greedy)");
  }
  if (a.temperature == 0.0) return {.top_k = 1};
  return {.temperature = a.temperature, .top_k = a.top_k, .top_p = a.top_p};
}

// Refused before the model is built: a GPT needs a prompt token beside the outputs in its
// positions; a T5's decoder holds [BOS] and all but the last output.
void check_output_room(int64_t max_tokens, const recipe::CompiledRecipe& compiled) {
  if (compiled.recipe.model.arch == recipe::Arch::T5) {
    const int64_t decoder = compiled.derived.decoder_seq_length;
    if (max_tokens > decoder) {
      throw UserError(fmt::format("--max-tokens {} is more than the decoder's {} positions "
                                  "(data.decoder_seq_length)", max_tokens, decoder));
    }
    return;
  }
  const int64_t positions = compiled.derived.max_position_embeddings;
  if (max_tokens >= positions) {
    throw UserError(fmt::format("--max-tokens {} leaves no room for a prompt in the model's {} "
                                "positions (model.max_position_embeddings)", max_tokens, positions));
  }
}

// Generated text as the metrics read it: without the whitespace around it.
std::string trimmed(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\n\r");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\n\r") - first + 1);
}

// Tasks of one kind are told apart by their data file's name.
void name_apart(std::vector<eval::TaskResult>& results) {
  std::map<std::string, int> kinds;
  for (const eval::TaskResult& r : results) ++kinds[r.task];
  for (eval::TaskResult& r : results) {
    if (kinds[r.task] > 1) r.task += ":" + fs::path(r.data).stem().string();
  }
}

// `text` into `path` whole or not at all (through a temporary beside it); on failure the
// directories this run created are removed too.
void write_whole(const std::string& path, const std::string& text, const std::vector<fs::path>& created) {
  const std::string tmp = path + ".tmp";
  std::ofstream out(tmp);
  out << text;
  out.close();
  std::error_code ec;
  if (!out || (fs::rename(tmp, path, ec), ec)) {
    fs::remove(tmp, ec);
    remove_created(created);
    throw RuntimeFailure("cannot write " + path);
  }
}

void run_eval(const EvalArgs& a) {
  const auto started = std::chrono::steady_clock::now();
  const std::optional<fs::path> dir = ckpt::resolve_checkpoint(a.checkpoint);
  if (!dir) throw UserError(a.checkpoint + ": no checkpoint there (a save directory with `latest`, or an iter_NNNNNNN directory)");
  const int world = job_world_size(a.nproc);
  const dist::LaunchInfo launch = dist::launch_info();
  const bool rank0 = launch.rank == 0;
  if (!rank0) spdlog::set_level(spdlog::level::warn);
  const ckpt::CheckpointReader reader(*dir);
  const recipe::CompiledRecipe compiled = compile_for_checkpoint(
      reader.meta(), *dir,
      {.world = world, .batch = std::max<int64_t>(a.batch_size, 1), .device = a.device, .overrides = a.overrides});
  plan::check_engine_support(compiled, plan::Job::Eval);
  const auto tokenizer = checkpoint_tokenizer(a.tokenizer, compiled.recipe);
  // A token id past the model's vocabulary would index past its embedding.
  if (tokenizer->vocab_size() > compiled.recipe.model.vocab_size) {
    throw UserError(fmt::format("{}: the tokenizer has {} tokens but the model {}: give the "
                                "tokenizer the checkpoint was trained with",
                                dir->string(), tokenizer->vocab_size(),
                                compiled.recipe.model.vocab_size));
  }
  const generate::Sampling sampling = sampling_of(a);
  // Read every task file before the model is built: bad input costs nothing.
  std::vector<eval::TaskInput> inputs;
  const int64_t classes = compiled.derived.classes;
  for (const eval::TaskSpec& spec : task_specs(a, compiled.recipe)) {
    if (spec.task == "classification" && classes == 0) {
      throw UserError(fmt::format("{}: the checkpoint has no classifier: fine-tune it first "
                                  "(finetune.train_data, docs/finetune.md)",
                                  dir->string()));
    }
    if (spec.task != "classification" && classes > 0) {
      throw UserError(fmt::format("{}: the checkpoint is a fine-tuned classifier: score it with "
                                  "--task classification",
                                  dir->string()));
    }
    const recipe::Arch arch = compiled.recipe.model.arch;
    if (spec.task != "classification" && arch != recipe::Arch::Gpt &&
        !(spec.task == "generation" && arch == recipe::Arch::T5)) {
      throw UserError(fmt::format("{}: {} scores causal language models (arch gpt){}; this "
                                  "checkpoint is {}: fine-tune it and use --task classification",
                                  dir->string(), spec.task,
                                  spec.task == "generation" ? " and t5" : "", recipe::name_of(arch)));
    }
    if (spec.task == "generation" && arch == recipe::Arch::T5 && !tokenizer->special_tokens().cls) {
      throw UserError(dir->string() + ": generation from t5 needs its WordPiece vocabulary "
                                      "(data.vocab_file) for [BOS] and [EOS]");
    }
    if (spec.task == "generation") check_output_room(spec.max_tokens, compiled);
    inputs.push_back(eval::read_task_input(spec, *tokenizer, compiled.recipe.finetune));
  }
  exec_local_job_if_asked(a.nproc, a.threads);
  std::vector<fs::path> created;
  // Every rank checks (a collective follows: one rank's refusal must not leave the others
  // waiting); rank 0 alone writes, and removes what it made if writing fails.
  for (const auto& [flag, file] : {std::pair{"--json", a.json}, std::pair{"--log-samples", a.log_samples}}) {
    if (!file.empty() && fs::path(file).has_parent_path()) {
      const std::vector<fs::path> made = prepare_output_dir(flag, fs::path(file).parent_path().string());
      if (rank0) created.insert(created.end(), made.begin(), made.end());
    }
  }
  train::ModelContext ctx(compiled, a.threads);
  train::load_model_weights(reader, *ctx.model, *ctx.backend);
  const model::ModelConfig& c = ctx.config;
  const eval::ScorerOptions options{
      .max_length = c.max_positions,
      .batch_size = std::max<int64_t>(a.batch_size, 1),
      .pad_token = tokenizer->special_tokens().eod.value_or(0),
      .vocab_size = std::min<int64_t>(c.vocab, c.padded_vocab)};
  const parallel::ProcessGroups& g = ctx.groups;
  spdlog::info("megatron eval {}: {} task{}, max length {}, batch {}, {} rank{} (tensor {} x "
               "pipeline {} x data {}), {}",
               dir->string(), inputs.size(), inputs.size() == 1 ? "" : "s", options.max_length,
               options.batch_size, world, world == 1 ? "" : "s", g.tp_size, g.pp_size, g.dp_size,
               ctx.backend->description());
  const eval::ScoreGroups groups{.tp = g.tp_size > 1 ? g.tp.get() : nullptr,
                                 .dp = g.dp_size > 1 ? g.dp.get() : nullptr,
                                 .world = world > 1 ? g.world.get() : nullptr,
                                 .replica = g.tp_size * g.pp_size > 1 ? g.model_parallel.get() : nullptr,
                                 .reports = g.last_stage() && g.coord.tp == 0};
  // One process or one stage: the whole model here. Pipeline stages pass each batch along.
  const eval::ForwardFn forward = [&](const model::Batch& batch, model::HeadOutputs& outputs) {
    if (g.pp_size == 1) {
      ctx.model->forward({.backend = *ctx.backend, .training = false}, batch, nullptr, &outputs);
      return true;
    }
    train::forward_only(*ctx.backend, *ctx.model, g, 1, 0, [&](int64_t) { return batch; },
                        [&](int64_t) { return &outputs; });
    return g.last_stage();
  };
  ProgressLine line;
  int64_t forwarded = 0;  // tokens through the model, for the rate
  double scoring_s = 0.0;
  const eval::TaskSetup setup{
      .tokenizer = *tokenizer,
      .prefix_token = options.pad_token,
      .max_length = options.max_length,
      .score = [&](const std::vector<eval::Request>& requests, bool greedy) {
        const auto begin = std::chrono::steady_clock::now();
        for (const eval::Request& r : requests) {
          forwarded += std::min<int64_t>(int64_t(r.context.size() + r.continuation.size()) - 1,
                                         options.max_length);
        }
        const eval::ScoreProgress progress = [&](int64_t done, int64_t all) {
          const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
          const double rate = double(done) / std::max(s, 1e-9);
          line(fmt::format("scored {}/{} requests, {:.1f} requests/s, ETA {:.0f} s", done, all, rate,
                           double(all - done) / std::max(rate, 1e-9)),
               s, done == all);
        };
        eval::ScorerOptions scoring = options;
        scoring.greedy = greedy;
        auto scores = eval::score(forward, *ctx.backend, requests, scoring,
                                  rank0 ? progress : eval::ScoreProgress{}, groups);
        scoring_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
        return scores;
      },
      .classify = [&](const data::ClassificationSet& set) {
        const auto begin = std::chrono::steady_clock::now();
        // The tokenizer outlives the source: a non-owning handle.
        const std::shared_ptr<const data::Tokenizer> tok(tokenizer.get(), [](const data::Tokenizer*) {});
        const data::ClassificationSource rows(
            std::make_shared<const data::ClassificationSet>(set), tok, compiled.recipe.data.seq_length,
            compiled.recipe.model.arch == recipe::Arch::Bert, 0, int64_t(set.rows.size()), false);
        forwarded += int64_t(set.rows.size()) * compiled.recipe.data.seq_length;
        const eval::ScoreProgress progress = [&](int64_t done, int64_t all) {
          const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
          const double rate = double(done) / std::max(s, 1e-9);
          line(fmt::format("classified {}/{} rows, {:.1f} rows/s, ETA {:.0f} s", done, all, rate,
                           double(all - done) / std::max(rate, 1e-9)),
               s, done == all);
        };
        auto answers = eval::classify(forward, *ctx.backend, rows, train::batch_spec(ctx.config),
                                      options.batch_size, classes, groups,
                                      rank0 ? progress : eval::ScoreProgress{});
        scoring_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
        return answers;
      },
      .generate = [&](const std::vector<std::string>& prompts, int64_t max_tokens) {
        const auto begin = std::chrono::steady_clock::now();
        const bool t5 = c.encoder_decoder;
        eval::DecodeOptions decoding{.max_tokens = max_tokens,
                                     .max_length = t5 ? c.decoder_seq_length : c.max_positions,
                                     .encoder_length = t5 ? c.seq_length : 0,
                                     .encoder_decoder = t5,
                                     .pad = options.pad_token,
                                     .batch_size = options.batch_size,
                                     .vocab_size = options.vocab_size,
                                     .sampling = sampling,
                                     .seed = a.seed};
        if (t5) {
          const data::WordPieceExtras extras =
              data::wordpiece_extras(*tokenizer, compiled.derived.vocab_extra_ids);
          decoding.bos = extras.bos;
          decoding.pad = tokenizer->special_tokens().pad.value_or(0);
          decoding.stop_tokens = {extras.eos};
        } else if (const auto eod = tokenizer->special_tokens().eod) {
          decoding.stop_tokens = {*eod};
        }
        std::vector<std::vector<int32_t>> ids;
        for (const std::string& p : prompts) {
          std::vector<int32_t> encoded = tokenizer->encode(eval::tuned_prompt(compiled.recipe.finetune, p));
          if (t5) encoded.push_back(decoding.stop_tokens[0]);  // a source ends in [EOS]
          if (encoded.empty() && decoding.stop_tokens.size() == 1) encoded.push_back(decoding.stop_tokens[0]);
          forwarded += int64_t(encoded.size());
          ids.push_back(std::move(encoded));
        }
        const eval::ScoreProgress progress = [&](int64_t done, int64_t all) {
          const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
          const double rate = double(done) / std::max(s, 1e-9);
          line(fmt::format("generated for {}/{} prompts, {:.2f} prompts/s, ETA {:.0f} s", done, all,
                           rate, double(all - done) / std::max(rate, 1e-9)),
               s, done == all);
        };
        const auto outputs = eval::greedy_decode(forward, *ctx.backend, ids, decoding,
                                                 rank0 ? progress : eval::ScoreProgress{}, groups);
        std::vector<std::string> texts;
        for (const auto& out : outputs) {
          forwarded += int64_t(out.size());
          texts.push_back(trimmed(eval::tuned_answer(compiled.recipe.finetune, tokenizer->decode(out))));
        }
        scoring_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
        return texts;
      }};
  std::vector<eval::TaskResult> results;
  for (eval::TaskInput& input : inputs) {
    spdlog::info("task {} on {} ({} {}{})", input.spec.task, input.spec.data, input.samples(),
                 input.spec.task == "multiple-choice" ? "questions"
                 : input.spec.task == "generation"    ? "prompts"
                                                      : "documents",
                 input.spec.num_fewshot > 0 ? fmt::format(", {}-shot", input.spec.num_fewshot) : "");
    results.push_back(eval::run_task(std::move(input), setup));
  }
  name_apart(results);
  if (!rank0) return;
  std::cout << eval::results_table(results);
  if (!a.json.empty()) {
    const eval::RunInfo info{.checkpoint = dir->string(),
                             .batch_size = options.batch_size,
                             .max_length = options.max_length,
                             .version = std::string(build_info::version())};
    write_whole(a.json, eval::results_json(results, info).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n", created);
  }
  if (!a.log_samples.empty()) {
    std::string lines;
    for (const eval::TaskResult& r : results) lines += eval::samples_jsonl(r);
    write_whole(a.log_samples, lines, created);
  }
  spdlog::info("scored {} tokens in {:.1f} s ({:.0f} tokens/s); done in {:.1f} s{}", forwarded,
               scoring_s, double(forwarded) / std::max(scoring_s, 1e-9),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(),
               a.json.empty() ? "" : "; results in " + a.json);
}

}  // namespace

void add_eval_command(CLI::App& app, Actions& actions) {
  auto args = std::make_shared<EvalArgs>();
  CLI::App* cmd = app.add_subcommand(
      "eval", "Score a checkpoint on a task: perplexity, cloze (LAMBADA), multiple choice, "
              "classification or generation (BLEU, chrF, exact match, F1)");
  cmd->add_option("checkpoint", args->checkpoint, "Checkpoint (save directory or iter_NNNNNNN)")->required();
  cmd->add_option("overrides", args->overrides, "section.key=value recipe overrides");
  cmd->add_option("--task", args->task,
                  "perplexity, cloze, multiple-choice, classification for a fine-tuned classifier, "
                  "or generation (greedy outputs scored against references; gpt and t5) "
                  "(default: the recipe's eval.tasks)")
      ->check(CLI::IsMember({"perplexity", "cloze", "multiple-choice", "classification", "generation"}));
  auto& flags = args->task_flags;
  flags.push_back(cmd->add_option(
      "--data", args->data, "Task file: .jsonl; for perplexity also plain text or an indexed dataset's prefix"));
  flags.push_back(cmd->add_option("--field", args->field, "jsonl field holding each document's text (default text)"));
  flags.push_back(cmd->add_option("--context-field", args->choice_fields.context,
                                  "multiple choice: the question (default context)"));
  flags.push_back(cmd->add_option("--choices-field", args->choice_fields.choices,
                                  "multiple choice: the list of answers (default choices)"));
  flags.push_back(cmd->add_option("--gold-field", args->choice_fields.gold,
                                  "multiple choice: the right answer, index or text (default gold)"));
  flags.push_back(cmd->add_option("--stride", args->stride, "perplexity: Megatron's overlapping-window stride (default 32)")
      ->check(whole_number(int64_t{1} << 30)));
  flags.push_back(cmd->add_option("--windows", args->windows,
                  "perplexity: rolling (lm-evaluation-harness), megatron (overlapping) or both "
                  "(default)")
      ->check(CLI::IsMember({"rolling", "megatron", "both"})));
  cmd->add_option("--batch-size", args->batch_size, "Sequences per forward pass (default 1)")
      ->check(whole_number(int64_t{1} << 16));
  flags.push_back(cmd->add_option("--num-fewshot", args->num_fewshot,
                  "multiple choice: examples before each question (lm-evaluation-harness's first_n)")
      ->check(whole_number(int64_t{1} << 10)));
  flags.push_back(cmd->add_option("--prompt-field", args->prompt_field,
                                  "generation: jsonl field holding each prompt (T5: the source; default prompt)"));
  flags.push_back(cmd->add_option("--answer-field", args->answer_field,
                                  "generation: jsonl field holding the reference answer, or a list of them (default answer)"));
  flags.push_back(cmd->add_option("--metrics", args->metrics,
                                  "generation: comma-separated exact_match, f1, bleu, chrf (default exact_match,f1)"));
  flags.push_back(cmd->add_option("--max-tokens", args->max_tokens,
                                  "generation: most tokens generated per prompt (default 32)")
                      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20)));
  cmd->add_option("--temperature", args->temperature,
                  "generation: sample with this temperature (default 0: greedy)");
  cmd->add_option("--top-k", args->top_k, "generation, sampling: from the k most likely tokens (0: all)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  cmd->add_option("--top-p", args->top_p,
                  "generation, sampling: from the smallest set of tokens with this much probability (0: off)");
  cmd->add_option("--seed", args->seed,
                  "generation, sampling: prompt i draws from seed + i (default 1234)")
      ->check(whole_number_from_zero());
  flags.push_back(cmd->add_option("--fewshot-data", args->fewshot_data,
                  "multiple choice: the examples' file (default: the task's own, less the question)"));
  cmd->add_option("--json", args->json, "Write lm-evaluation-harness-style results JSON here");
  cmd->add_option("--log-samples", args->log_samples,
                  "Write each sample's log-likelihoods here (jsonl, as lm-evaluation-harness's "
                  "--log_samples)");
  cmd->add_option("--threads", args->threads, "CPU threads (default: every core)")->check(parallelism("threads"));
  cmd->add_option("--device", args->device, "cpu, cuda or auto (default: the recipe's)");
  cmd->add_option("--nproc", args->nproc,
                  "Start a local job of this many ranks (mpirun -np N); each a data-parallel "
                  "replica unless parallel.tensor=T says otherwise")
      ->check(parallelism("processes"));
  args->tokenizer.add_to(cmd, false);
  actions.emplace_back(cmd, [args] { run_eval(*args); });
}

}  // namespace megatron::cli
