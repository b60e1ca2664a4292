// `megatron eval CHECKPOINT --task perplexity|cloze|multiple-choice|classification|generation
// --data FILE [--json OUT] [--nproc N] [overrides]`: the flags, checked and turned into an
// eval::EvalJob (src/eval/eval_job.hpp), which scores the checkpoint.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include <optional>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/limits.hpp"
#include "cli/machine_flags.hpp"
#include "cli/sampling_flags.hpp"
#include "cli/tokenizer_args.hpp"
#include "core/error.hpp"
#include "eval/eval_job.hpp"
#include "eval/task_run.hpp"
#include "recipe/eval_tasks.hpp"
#include "generate/sampling.hpp"
#include "launch/local_job.hpp"

namespace megatron::cli {
namespace {

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
  SamplingArgs sampling{.temperature = 0.0};  // generation: 0 is greedy
  uint64_t seed = 1234;
  int threads = 0;
  int nproc = 0;
  std::string device;
  TokenizerArgs tokenizer;
  std::vector<std::string> overrides;
  std::vector<CLI::Option*> task_flags;  // what describes --task (refused without it)
  std::vector<CLI::Option*> sampling_flags;  // what only generation reads
};

// Generation tasks decode greedily unless --temperature asks for draws (megatron generate's
// rules for the three settings).
generate::Sampling sampling_of(const SamplingArgs& a) {
  const generate::Sampling sampling = a.sampling();
  if (a.temperature == 0.0 && (a.top_k > 0 || a.top_p > 0.0)) {
    throw UserError("--top-k and --top-p shape draws: give --temperature too (0, the default, is greedy)");
  }
  return sampling;
}

// --task and its flags; none without --task (the recipe's eval.tasks run, each with its own keys).
std::optional<eval::TaskSpec> task_of(const EvalArgs& a) {
  if (a.task.empty()) {
    for (const CLI::Option* o : a.task_flags) {
      if (o->count() > 0) {
        throw UserError(fmt::format("{} describes --task; without --task the recipe's eval.tasks "
                                    "run, each entry with its own keys",
                                    o->get_name()));
      }
    }
    return std::nullopt;
  }
  if (a.data.empty()) throw UserError("--task " + a.task + " needs --data (the task's file)");
  // A flag another task reads would be ignored here: refused as eval.tasks refuses its key.
  for (const CLI::Option* o : a.task_flags) {
    if (o->count() == 0) continue;
    std::string key = o->get_name().substr(o->get_name().find_first_not_of('-'));
    std::replace(key.begin(), key.end(), '-', '_');
    const std::vector<std::string> takers = recipe::tasks_taking(key);
    if (!takers.empty() && std::find(takers.begin(), takers.end(), a.task) == takers.end()) {
      throw UserError(fmt::format("{}: only {} takes it, and --task is {}: drop it", o->get_name(),
                                  fmt::join(takers, " and "), a.task));
    }
  }
  return eval::TaskSpec{.task = a.task,
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
                        .max_tokens = a.max_tokens};
}

std::vector<std::string> given(const std::vector<CLI::Option*>& options) {
  std::vector<std::string> names;
  for (const CLI::Option* o : options) {
    if (o->count() > 0) names.push_back(o->get_name());
  }
  return names;
}

void run_eval(const EvalArgs& a) {
  eval::EvalJob job{.checkpoint = a.checkpoint,
                    .task = task_of(a),
                    .world = launch::job_world_size(a.nproc),
                    .batch_size = a.batch_size,
                    .sampling = sampling_of(a.sampling),
                    .seed = a.seed,
                    .sampling_flags = given(a.sampling_flags),
                    .threads = a.threads,
                    .device = a.device,
                    .tokenizer = a.tokenizer,
                    .overrides = a.overrides,
                    .json = a.json,
                    .log_samples = a.log_samples};
  job.before_model = [&a] { launch::exec_local_job_if_asked(a.nproc, a.threads); };
  eval::run(job);
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
  auto& sampling = args->sampling_flags;
  sampling.push_back(cmd->add_option("--temperature", args->sampling.temperature,
                                     "generation: sample with this temperature (default 0: greedy)"));
  sampling.push_back(cmd->add_option("--top-k", args->sampling.top_k,
                                     "generation, sampling: from the k most likely tokens (0: all)")
                         ->check(CLI::Range(int64_t{0}, int64_t{1} << 30)));
  sampling.push_back(cmd->add_option(
      "--top-p", args->sampling.top_p,
      "generation, sampling: from the smallest set of tokens with this much probability (0: off)"));
  sampling.push_back(cmd->add_option("--seed", args->seed,
                                     "generation, sampling: prompt i draws from seed + i (default 1234)")
                         ->check(whole_number_from_zero()));
  flags.push_back(cmd->add_option("--fewshot-data", args->fewshot_data,
                  "multiple choice: the examples' file (default: the task's own, less the question)"));
  cmd->add_option("--json", args->json, "Write lm-evaluation-harness-style results JSON here");
  cmd->add_option("--log-samples", args->log_samples,
                  "Write each sample's log-likelihoods here (jsonl, as lm-evaluation-harness's "
                  "--log_samples)");
  add_machine_flags(cmd, args->threads, args->device);
  cmd->add_option("--nproc", args->nproc,
                  "Start a local job of this many ranks (mpirun -np N); each a data-parallel "
                  "replica unless parallel.tensor=T says otherwise")
      ->check(parallelism("processes"));
  args->tokenizer.add_to(cmd, false);
  actions.emplace_back(cmd, [args] { run_eval(*args); });
}

}  // namespace megatron::cli
