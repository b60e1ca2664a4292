// The model behind `megatron generate` and `megatron serve`: a checkpoint (any layout that wrote
// it, or a Hugging Face import) loaded onto this job's ranks as one tensor-parallel group, with
// its tokenizer and the generation engine over them.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <vector>

#include "cli/tokenizer_args.hpp"
#include "data/chat_template.hpp"
#include "generate/generator.hpp"
#include "train/checkpoint_model.hpp"

namespace megatron::cli {

struct ModelArgs {
  std::string checkpoint;
  std::vector<std::string> overrides;
  int nproc = 0;
  int threads = 0;
  std::string device;
  TokenizerArgs tokenizer;

  void add_to(CLI::App* cmd);
};

// The recipe's generation section as the engine takes it; UserError for a stop token past the
// tokenizer's `vocab` ids (`where` names the checkpoint).
generate::GenerationDefaults generation_defaults(const recipe::GenerationSection& g, int64_t vocab,
                                                 const std::string& where);

class GenerationModel {
 public:
  // Checks the checkpoint and its tokenizer (UserError), then, with --nproc N, replaces this
  // process with an mpirun job of N ranks running the same command; else builds this rank's
  // model and loads its weights. `before_start` runs after the checks and before that (input
  // that is bad should fail before a job starts).
  GenerationModel(const ModelArgs& args, const std::function<void()>& before_start = {});
  GenerationModel(const GenerationModel&) = delete;
  GenerationModel& operator=(const GenerationModel&) = delete;

  generate::Engine engine() const;
  const data::Tokenizer& tokenizer() const { return opened_.tokenizer(); }
  bool rank0() const { return opened_.context().rank0(); }
  int world_size() const { return world_; }
  // Every rank; null for one process.
  dist::Communicator* world() const {
    return world_ > 1 ? opened_.context().groups.world.get() : nullptr;
  }
  std::string checkpoint() const { return opened_.dir().string(); }
  std::string description() const;
  // The chat template `name` names, or for "auto" the one the checkpoint's tokenizer carries
  // (UserError when it has none megatron renders).
  data::ChatTemplate chat_template(const std::string& name) const;

 private:
  int world_ = 1;
  train::CheckpointModel opened_;
  generate::GenerationDefaults defaults_;
};

}  // namespace megatron::cli
