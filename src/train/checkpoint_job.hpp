// What the jobs that run a saved model (eval, generate, serve) share: the checkpoint's own
// recipe compiled for this job's ranks and layout, and the tokenizer it was trained with.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/checkpoint_reader.hpp"
#include "data/tokenizer.hpp"
#include "recipe/compile.hpp"

namespace megatron::train {

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

// A tokenizer as a user names it (--tokenizer and its files): the type by any of its recipe
// names (Megatron-LM's too); empty type and files: the recipe's.
struct TokenizerChoice {
  std::string type;
  data::TokenizerFiles files;
};

// The tokenizer `choice` names; UserError for an unknown type, saying which exist.
std::unique_ptr<data::Tokenizer> load_tokenizer(const TokenizerChoice& choice);

// The tokenizer the user named, else the recipe's own files; UserError when this machine has
// none of them.
std::unique_ptr<data::Tokenizer> checkpoint_tokenizer(const TokenizerChoice& choice,
                                                      const recipe::Recipe& recipe);

}  // namespace megatron::train
