// `megatron eval`'s job: a checkpoint (of any layout, or a Hugging Face import) loaded into this
// job's tensor-, pipeline- and data-parallel layout and scored on tasks; a table on stdout,
// lm-evaluation-harness's JSON layout and the samples in files.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "eval/task_run.hpp"
#include "generate/sampling.hpp"
#include "train/checkpoint_job.hpp"

namespace megatron::eval {

struct EvalJob {
  std::string checkpoint;          // a save directory (its latest) or an iter_NNNNNNN directory
  std::optional<TaskSpec> task;    // none: the checkpoint recipe's eval.tasks
  int world = 1;                   // the job's ranks
  int64_t batch_size = 0;          // sequences per forward pass and replica; 0: 1
  generate::Sampling sampling{.top_k = 1};  // generation tasks (greedy by default)
  uint64_t seed = 1234;            // generation, sampling: prompt i draws from seed + i
  // The sampling flags the user gave (--temperature, --top-k, --top-p, --seed): refused when no
  // task of the job generates, rather than ignored.
  std::vector<std::string> sampling_flags;
  int threads = 0;                 // CPU threads; 0: every core
  std::string device;              // empty: the recipe's
  train::TokenizerChoice tokenizer;  // empty: the checkpoint recipe's
  std::vector<std::string> overrides;  // recipe overrides, applied last
  std::string json;                // lm-evaluation-harness-style results, when given
  std::string log_samples;         // each sample's log-likelihoods (jsonl), when given
  // Called after every input is read and checked, before the model is built: where the command
  // starts its local job of N ranks (so bad input is refused once, by one process).
  std::function<void()> before_model;
};

// Runs the job; UserError for bad input (before the model is built; an output that is an input's
// file before anything is read), RuntimeFailure when a
// results file cannot be written (the directories it created are removed).
void run(const EvalJob& job);

}  // namespace megatron::eval
