// What the commands that run a saved model (eval, generate, serve) share: the checkpoint's own
// recipe compiled for this job's ranks and layout, and the tokenizer it was trained with.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/checkpoint_reader.hpp"
#include "cli/tokenizer_args.hpp"
#include "recipe/compile.hpp"

namespace megatron::cli {

struct CheckpointJob {
  int world = 1;
  int64_t tensor = 1;      // tensor-parallel ranks; the rest are data-parallel replicas
  int64_t batch = 1;       // sequences per forward pass and replica
  std::string device;      // empty: the recipe's
  std::vector<std::string> overrides;  // the user's, applied last
};

// The checkpoint's recipe for the job: its model, this machine, no pipeline, context or
// sequence parallelism (unless overridden). Its file is the checkpoint's recipe, for messages.
recipe::CompiledRecipe compile_for_checkpoint(const ckpt::CheckpointMeta& meta,
                                              const std::filesystem::path& dir,
                                              const CheckpointJob& job);

// The tokenizer the flags name, else the recipe's own files; UserError when this machine has
// none of them.
std::unique_ptr<data::Tokenizer> checkpoint_tokenizer(const TokenizerArgs& args,
                                                      const recipe::Recipe& recipe);

}  // namespace megatron::cli
