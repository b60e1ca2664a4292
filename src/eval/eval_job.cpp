#include "eval/eval_job.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>

#include "core/build_info.hpp"
#include "core/error.hpp"
#include "core/output_dir.hpp"
#include "core/output_file.hpp"
#include "core/progress_line.hpp"
#include "data/wordpiece_extras.hpp"
#include "dist/launcher.hpp"
#include "eval/classify.hpp"
#include "eval/greedy_decode.hpp"
#include "eval/results.hpp"
#include "eval/task_run.hpp"
#include "eval/tuned_prompt.hpp"
#include "recipe/compile.hpp"
#include "recipe/enum_names.hpp"
#include "train/checkpoint_model.hpp"
#include "train/pipeline_step.hpp"

namespace megatron::eval {
namespace {

namespace fs = std::filesystem;

double seconds_since(std::chrono::steady_clock::time_point begin) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
}

// The tasks to run: the job's, else the recipe's eval.tasks.
std::vector<TaskSpec> task_specs(const EvalJob& job, const recipe::Recipe& r) {
  if (job.task) return {*job.task};
  if (r.eval.tasks.empty()) {
    throw UserError("no task: give --task and --data, or list tasks in the recipe's eval.tasks "
                    "(add an override such as 'eval.tasks=[{task: perplexity, data: test.jsonl}]')");
  }
  std::vector<TaskSpec> out;
  for (const recipe::EvalTask& t : r.eval.tasks) out.push_back(task_spec(t));
  return out;
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
void name_apart(std::vector<TaskResult>& results) {
  std::map<std::string, int> kinds;
  for (const TaskResult& r : results) ++kinds[r.task];
  for (TaskResult& r : results) {
    if (kinds[r.task] > 1) {
      r.task += ':';  // piecewise: `":" + string` trips GCC 12's false -Wrestrict warning
      r.task += fs::path(r.data).stem().string();
    }
  }
}

// `text` into the user's `path` (core/output_file.hpp); on failure the directories this run
// created are removed too.
void write_whole(const std::string& path, const std::string& text, const std::vector<fs::path>& created) {
  try {
    write_output_file(path, text);
  } catch (const RuntimeFailure&) {
    remove_created(created);
    throw;
  }
}

// Refused before any work: an output that would overwrite an input (a task's data, its
// examples' file) or the other output.
void refuse_outputs_over_inputs(const EvalJob& job, const std::vector<TaskSpec>& specs) {
  for (const auto& [flag, file] : {std::pair{"--json", job.json}, std::pair{"--log-samples", job.log_samples}}) {
    for (const TaskSpec& spec : specs) {
      const char* data_flag = job.task ? "--data" : "eval.tasks' data";
      const char* fewshot_flag = job.task ? "--fewshot-data" : "eval.tasks' fewshot_data";
      refuse_same_file(flag, file, data_flag, spec.data);
      refuse_same_file(flag, file, fewshot_flag, spec.fewshot_data);
    }
  }
  refuse_same_file("--json", job.json, "--log-samples", job.log_samples);
}

}  // namespace

void run(const EvalJob& job) {
  const auto started = std::chrono::steady_clock::now();
  const int world = job.world;
  const dist::LaunchInfo launch = dist::launch_info();
  const bool rank0 = launch.rank == 0;
  if (!rank0) spdlog::set_level(spdlog::level::warn);
  if (job.task) refuse_outputs_over_inputs(job, {*job.task});
  train::CheckpointModel opened(job.checkpoint,
                                {.world = world, .batch = std::max<int64_t>(job.batch_size, 1),
                                 .device = job.device, .overrides = job.overrides},
                                job.tokenizer, plan::Job::Eval);
  const fs::path& dir = opened.dir();
  const recipe::CompiledRecipe& compiled = opened.compiled();
  const data::Tokenizer& tokenizer = opened.tokenizer();
  // Read every task file before the model is built: bad input costs nothing.
  std::vector<TaskInput> inputs;
  const int64_t classes = compiled.derived.classes;
  const std::vector<TaskSpec> specs = task_specs(job, compiled.recipe);
  if (!job.task) refuse_outputs_over_inputs(job, specs);
  if (!job.sampling_flags.empty() &&
      std::none_of(specs.begin(), specs.end(), [](const TaskSpec& s) { return s.task == "generation"; })) {
    throw UserError(fmt::format("{}: only generation samples, and {}: drop {}",
                                fmt::join(job.sampling_flags, ", "),
                                job.task ? "--task is " + job.task->task
                                         : std::string("the recipe's eval.tasks hold no generation task"),
                                job.sampling_flags.size() == 1 ? "it" : "them"));
  }
  for (const TaskSpec& spec : specs) {
    if (spec.task == "classification" && classes == 0) {
      throw UserError(fmt::format("{}: the checkpoint has no classifier: fine-tune it first "
                                  "(finetune.train_data, docs/finetune.md)",
                                  dir.string()));
    }
    if (spec.task != "classification" && classes > 0) {
      throw UserError(fmt::format("{}: the checkpoint is a fine-tuned classifier: score it with "
                                  "--task classification",
                                  dir.string()));
    }
    const recipe::Arch arch = compiled.recipe.model.arch;
    if (spec.task != "classification" && arch != recipe::Arch::Gpt &&
        !(spec.task == "generation" && arch == recipe::Arch::T5)) {
      throw UserError(fmt::format("{}: {} scores causal language models (arch gpt){}; this "
                                  "checkpoint is {}: fine-tune it and use --task classification",
                                  dir.string(), spec.task,
                                  spec.task == "generation" ? " and t5" : "", recipe::name_of(arch)));
    }
    if (spec.task == "generation" && arch == recipe::Arch::T5 && !tokenizer.special_tokens().cls) {
      throw UserError(dir.string() + ": generation from t5 needs its WordPiece vocabulary "
                                      "(data.vocab_file) for [BOS] and [EOS]");
    }
    if (spec.task == "generation") check_output_room(spec.max_tokens, compiled);
    inputs.push_back(read_task_input(spec, tokenizer, compiled.recipe.finetune));
  }
  if (job.before_model) job.before_model();
  std::vector<fs::path> created;
  // Every rank checks (a collective follows: one rank's refusal must not leave the others
  // waiting); rank 0 alone writes, and removes what it made if writing fails.
  for (const auto& [flag, file] : {std::pair{"--json", job.json}, std::pair{"--log-samples", job.log_samples}}) {
    if (!file.empty() && fs::path(file).has_parent_path()) {
      const std::vector<fs::path> made = prepare_output_dir(flag, fs::path(file).parent_path().string());
      if (rank0) created.insert(created.end(), made.begin(), made.end());
    }
  }
  train::ModelContext& ctx = opened.load(job.threads);
  const model::ModelConfig& c = ctx.config;
  const ScorerOptions options{
      .max_length = c.max_positions,
      .batch_size = std::max<int64_t>(job.batch_size, 1),
      .pad_token = tokenizer.special_tokens().eod.value_or(0),
      .vocab_size = std::min<int64_t>(c.vocab, c.padded_vocab)};
  const parallel::ProcessGroups& g = ctx.groups;
  spdlog::info("megatron eval {}: {} task{}, max length {}, batch {}, {} rank{} (tensor {} x "
               "pipeline {} x data {}), {}",
               dir.string(), inputs.size(), inputs.size() == 1 ? "" : "s", options.max_length,
               options.batch_size, world, world == 1 ? "" : "s", g.tp_size, g.pp_size, g.dp_size,
               ctx.backend->description());
  const ScoreGroups groups{.tp = g.tp_size > 1 ? g.tp.get() : nullptr,
                                 .dp = g.dp_size > 1 ? g.dp.get() : nullptr,
                                 .world = world > 1 ? g.world.get() : nullptr,
                                 .replica = g.tp_size * g.pp_size > 1 ? g.model_parallel.get() : nullptr,
                                 .reports = g.last_stage() && g.coord.tp == 0};
  // One process or one stage: the whole model here. Pipeline stages pass each batch along.
  const ForwardFn forward = [&](const model::Batch& batch, model::HeadOutputs& outputs) {
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
  const TaskSetup setup{
      .tokenizer = tokenizer,
      .prefix_token = options.pad_token,
      .max_length = options.max_length,
      .score = [&](const std::vector<Request>& requests, bool greedy) {
        const auto begin = std::chrono::steady_clock::now();
        for (const Request& r : requests) {
          forwarded += std::min<int64_t>(int64_t(r.context.size() + r.continuation.size()) - 1,
                                         options.max_length);
        }
        const ScoreProgress progress = [&](int64_t done, int64_t all) {
          line.count("scored", done, all, "requests", seconds_since(begin));
        };
        ScorerOptions scoring = options;
        scoring.greedy = greedy;
        auto scores = score(forward, *ctx.backend, requests, scoring,
                                  rank0 ? progress : ScoreProgress{}, groups);
        scoring_s += seconds_since(begin);
        return scores;
      },
      .classify = [&](const data::ClassificationSet& set) {
        const auto begin = std::chrono::steady_clock::now();
        // The tokenizer outlives the source: a non-owning handle.
        const std::shared_ptr<const data::Tokenizer> tok(&tokenizer, [](const data::Tokenizer*) {});
        const data::ClassificationSource rows(
            std::make_shared<const data::ClassificationSet>(set), tok, compiled.recipe.data.seq_length,
            compiled.recipe.model.arch == recipe::Arch::Bert, 0, int64_t(set.rows.size()), false);
        forwarded += int64_t(set.rows.size()) * compiled.recipe.data.seq_length;
        const ScoreProgress progress = [&](int64_t done, int64_t all) {
          line.count("classified", done, all, "rows", seconds_since(begin));
        };
        auto answers = classify(forward, *ctx.backend, rows, train::batch_spec(ctx.config),
                                      options.batch_size, classes, groups,
                                      rank0 ? progress : ScoreProgress{});
        scoring_s += seconds_since(begin);
        return answers;
      },
      .generate = [&](const std::vector<std::string>& prompts, int64_t max_tokens) {
        const auto begin = std::chrono::steady_clock::now();
        const bool t5 = c.encoder_decoder;
        DecodeOptions decoding{.max_tokens = max_tokens,
                                     .max_length = t5 ? c.decoder_seq_length : c.max_positions,
                                     .encoder_length = t5 ? c.seq_length : 0,
                                     .encoder_decoder = t5,
                                     .pad = options.pad_token,
                                     .batch_size = options.batch_size,
                                     .vocab_size = options.vocab_size,
                                     .sampling = job.sampling,
                                     .seed = job.seed};
        if (t5) {
          const data::WordPieceExtras extras =
              data::wordpiece_extras(tokenizer, compiled.derived.vocab_extra_ids);
          decoding.bos = extras.bos;
          decoding.pad = tokenizer.special_tokens().pad.value_or(0);
          decoding.stop_tokens = {extras.eos};
        } else if (const auto eod = tokenizer.special_tokens().eod) {
          decoding.stop_tokens = {*eod};
        }
        const std::optional<data::ChatTemplate> chat = tuned_chat_template(compiled);
        std::vector<std::vector<int32_t>> ids;
        for (const std::string& p : prompts) {
          std::vector<int32_t> encoded = tokenizer.encode(tuned_prompt(chat, p));
          if (t5) encoded.push_back(decoding.stop_tokens[0]);  // a source ends in [EOS]
          if (encoded.empty() && decoding.stop_tokens.size() == 1) encoded.push_back(decoding.stop_tokens[0]);
          forwarded += int64_t(encoded.size());
          ids.push_back(std::move(encoded));
        }
        const ScoreProgress progress = [&](int64_t done, int64_t all) {
          line.count("generated for", done, all, "prompts", seconds_since(begin));
        };
        const auto outputs = greedy_decode(forward, *ctx.backend, ids, decoding,
                                           rank0 ? progress : ScoreProgress{}, groups);
        std::vector<std::string> texts;
        for (const auto& out : outputs) {
          forwarded += int64_t(out.size());
          texts.push_back(trimmed(tuned_answer(chat, tokenizer.decode(out))));
        }
        scoring_s += seconds_since(begin);
        return texts;
      }};
  std::vector<TaskResult> results;
  for (TaskInput& input : inputs) {
    spdlog::info("task {} on {} ({} {}{})", input.spec.task, input.spec.data, input.samples(),
                 input.spec.task == "multiple-choice" ? "questions"
                 : input.spec.task == "generation"    ? "prompts"
                                                      : "documents",
                 input.spec.num_fewshot > 0 ? fmt::format(", {}-shot", input.spec.num_fewshot) : "");
    results.push_back(run_task(std::move(input), setup));
  }
  name_apart(results);
  if (!rank0) return;
  std::cout << results_table(results);
  if (!job.json.empty()) {
    const RunInfo info{.checkpoint = dir.string(),
                             .batch_size = options.batch_size,
                             .max_length = options.max_length,
                             .version = std::string(build_info::version())};
    write_whole(job.json, results_json(results, info).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n", created);
  }
  if (!job.log_samples.empty()) {
    std::string lines;
    for (const TaskResult& r : results) lines += samples_jsonl(r);
    write_whole(job.log_samples, lines, created);
  }
  spdlog::info("scored {} tokens in {:.1f} s ({:.0f} tokens/s); done in {:.1f} s{}", forwarded,
               scoring_s, double(forwarded) / std::max(scoring_s, 1e-9),
               seconds_since(started),
               job.json.empty() ? "" : "; results in " + job.json);
}

}  // namespace megatron::eval
