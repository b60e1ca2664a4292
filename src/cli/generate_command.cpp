// `megatron generate CHECKPOINT --prompt TEXT | --prompts FILE.jsonl [--max-tokens N]
// [--temperature T] [--top-k K] [--top-p P] [--seed S] [--stop STR]... [--nproc N]`: the flags,
// the checkpoint's model, and generate::generate_text (src/generate/generate_job.hpp).
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/generation_model.hpp"
#include "cli/limits.hpp"
#include "cli/sampling_flags.hpp"
#include "generate/generate_job.hpp"

namespace megatron::cli {
namespace {

struct GenerateArgs {
  ModelArgs model;
  SamplingArgs sampling;
  std::vector<const CLI::Option*> sampling_flags;  // given: the recipe's defaults step aside
  generate::GenerateJob job;
  std::string chat_template;  // a name, or auto
};

void run_generate(const GenerateArgs& a) {
  std::vector<std::string> texts;
  // The prompts are read on the launching process, before a job starts; the tokenizer is the
  // model's.
  const GenerationModel model(a.model, [&] {
    texts = generate::read_prompts(a.job);
    // A template by name is checked before a job starts; auto needs the checkpoint's tokenizer.
    if (!a.chat_template.empty() && a.chat_template != "auto") data::chat_template_for(a.chat_template, "");
  });
  generate::GenerateJob job = a.job;
  job.sampling = a.sampling.sampling();
  if (!a.chat_template.empty()) job.chat_template = model.chat_template(a.chat_template);
  const generate::Engine engine = model.engine();
  const bool flagged = std::any_of(a.sampling_flags.begin(), a.sampling_flags.end(),
                                   [](const CLI::Option* o) { return o->count() > 0; });
  if (!flagged && engine.defaults.sampling) job.sampling = *engine.defaults.sampling;
  generate::generate_text(job, texts, engine, model.rank0(), model.description());
}

}  // namespace

void add_generate_command(CLI::App& app, Actions& actions) {
  auto args = std::make_shared<GenerateArgs>();
  generate::GenerateJob& job = args->job;
  CLI::App* cmd = app.add_subcommand("generate", "Generate text from a checkpoint");
  args->model.add_to(cmd);
  cmd->add_option("--prompt", job.prompt, "The text to continue (streamed to the terminal)");
  cmd->add_option("--prompts", job.prompts, "A jsonl file of prompts, one object per line");
  cmd->add_option("--field", job.field,
                  "--prompts: the field holding each prompt (default prompt)");
  cmd->add_option("--output", job.output,
                  "--prompts: write the jsonl results here (default stdout)");
  cmd->add_option("--max-tokens,--tokens-to-generate", job.max_tokens,
                  "Tokens to generate per prompt at most (default 64)")
      ->check(whole_number(int64_t{1} << 20));
  args->sampling_flags = {
      cmd->add_option("--temperature", args->sampling.temperature,
                      "Divides the logits before sampling (default: the recipe's "
                      "generation.temperature, else 1; 0: greedy)"),
      cmd->add_option("--top-k", args->sampling.top_k,
                      "Sample from the k most likely tokens (0: all; 1: greedy)")
          ->check(CLI::Range(int64_t{0}, int64_t{1000})),
      cmd->add_option("--top-p", args->sampling.top_p,
                      "Sample from the smallest set of tokens with this much probability (0: off)")
          ->check(CLI::Range(0.0, 1.0)),
      cmd->add_flag("--greedy", args->sampling.greedy,
                    "Always the most likely token (as --top-k 1)")};
  cmd->add_option("--seed", job.seed,
                  "Seeds the sampling: the same seed, the same text (default 1234)")
      ->check(whole_number_from_zero());
  cmd->add_option("--stop", job.stop, "Stop a sequence when its text contains this (repeatable)");
  cmd->add_flag("--ignore-eod", job.ignore_eod, "Keep generating past the end-of-document token");
  cmd->add_flag("--add-bos", job.add_bos,
                "Start each prompt with the end-of-document token (Megatron's add_BOS)");
  cmd->add_flag("--logprobs", job.logprobs,
                "Report log-probabilities (jsonl; the continuation's sum for --prompt)");
  cmd->add_option("--chat-template", args->chat_template,
                  "Each prompt as a user turn of this chat template, then the assistant's header: " +
                      data::chat_template_names() + ", or auto (the checkpoint tokenizer's own)");
  cmd->add_option("--batch-size", job.batch_size,
                  "--prompts: prompts generated together (default 8)")
      ->check(whole_number(1024));
  actions.emplace_back(cmd, [args] { run_generate(*args); });
}

}  // namespace megatron::cli
