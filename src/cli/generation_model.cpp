#include "cli/generation_model.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "cli/limits.hpp"
#include "cli/machine_flags.hpp"
#include "core/error.hpp"
#include "dist/launcher.hpp"
#include "launch/local_job.hpp"
#include "recipe/enum_names.hpp"
#include "train/train_data.hpp"

namespace megatron::cli {

void ModelArgs::add_to(CLI::App* cmd) {
  cmd->add_option("checkpoint", checkpoint, "Checkpoint (save directory or iter_NNNNNNN)")->required();
  cmd->add_option("overrides", overrides, "section.key=value recipe overrides");
  add_machine_flags(cmd, threads, device);
  cmd->add_option("--nproc", nproc,
                  "Start a local job of this many ranks (mpirun -np N), the model split over them "
                  "by tensor parallelism")
      ->check(parallelism("processes"));
  tokenizer.add_to(cmd, false);
}

namespace {

// The job's ranks; ranks but the first log warnings only, from the recipe's compilation on.
int quiet_job_world(int nproc) {
  if (dist::launch_info().rank != 0) spdlog::set_level(spdlog::level::warn);
  return launch::job_world_size(nproc);
}

}  // namespace

generate::GenerationDefaults generation_defaults(const recipe::GenerationSection& g, int64_t vocab,
                                                 const std::string& where) {
  generate::GenerationDefaults d;
  for (const int64_t id : g.stop_token_ids) {
    if (id >= vocab) {
      throw UserError(fmt::format("{}: generation.stop_token_ids holds {}, past the tokenizer's "
                                  "{} tokens; remove it or give the model's own tokenizer",
                                  where, id, vocab));
    }
    d.end_tokens.push_back(int32_t(id));
  }
  if (g.sampling_set()) {
    // Sampling with temperature 0 is greedy (generate::sampling_for), and so is do_sample false.
    const bool sample = g.do_sample.value_or(true);
    d.sampling = generate::sampling_for(sample ? g.temperature.value_or(1.0) : 0.0,
                                        g.top_k.value_or(0), g.top_p.value_or(0.0));
  }
  return d;
}

GenerationModel::GenerationModel(const ModelArgs& a, const std::function<void()>& before_start)
    : world_(quiet_job_world(a.nproc)),
      opened_(a.checkpoint,
              {.world = world_, .tensor = world_, .batch = 1, .device = a.device,
               .overrides = a.overrides},
              a.tokenizer, plan::Job::Generate) {
  const recipe::CompiledRecipe& c = opened_.compiled();
  if (c.recipe.model.arch != recipe::Arch::Gpt || c.derived.classes > 0) {
    throw UserError(fmt::format("{}: generation needs a causal language model (arch gpt); this "
                                "checkpoint is {}",
                                checkpoint(), c.derived.classes > 0
                                                  ? "a fine-tuned classifier"
                                                  : recipe::name_of(c.recipe.model.arch)));
  }
  defaults_ = generation_defaults(c.recipe.generation, opened_.tokenizer().vocab_size(),
                                  checkpoint());
  if (before_start) before_start();
  launch::exec_local_job_if_asked(a.nproc, a.threads);
  opened_.load(a.threads);
}

generate::Engine GenerationModel::engine() const {
  const train::ModelContext& ctx = opened_.context();
  const model::ModelConfig& c = ctx.config;
  return {.backend = *ctx.backend,
          .model = *ctx.model,
          .tokenizer = opened_.tokenizer(),
          .max_positions = c.longest_sequence(),
          .vocab = std::min(c.vocab, c.padded_vocab),
          .defaults = defaults_};
}

data::ChatTemplate GenerationModel::chat_template(const std::string& name) const {
  const recipe::CompiledRecipe& c = opened_.compiled();
  const auto& model = c.recipe.data.tokenizer_model;
  return data::chat_template_for(name, model ? train::relative_to(c, *model) : std::string());
}

std::string GenerationModel::description() const {
  const train::ModelContext& ctx = opened_.context();
  const model::ModelConfig& c = ctx.config;
  return fmt::format("{}: {} layers, hidden {}, {} heads, {} positions, vocabulary {}; {} rank{} "
                     "(tensor parallel), {}",
                     checkpoint(), c.num_layers, c.hidden, c.heads, c.max_positions, c.vocab,
                     world_, world_ == 1 ? "" : "s", ctx.backend->description());
}

}  // namespace megatron::cli
