// `megatron convert`: rewrites a checkpoint for another layout or dtype (or to and from Hugging
// Face); `megatron ckpt inspect` and `ckpt verify`: what a checkpoint holds, and whether it is
// whole.
#include <iostream>
#include <memory>

#include "ckpt/inspect_job.hpp"
#include "cli/commands.hpp"
#include "cli/limits.hpp"
#include "train/convert_job.hpp"

namespace megatron::cli {

void add_checkpoint_commands(CLI::App& app, Actions& actions) {
  auto args = std::make_shared<train::ConvertJob>();
  auto* cmd = app.add_subcommand(
      "convert",
      "Rewrite a checkpoint for another layout or dtype, offline and tensor by tensor, "
      "or to and from Hugging Face (GPT-2, Llama, Megatron-BERT, T5)");
  cmd->add_option("--load", args->load,
                  "Checkpoint to read: an iter_NNNNNNN directory, or a save "
                  "directory (its latest); with --from hf, a Hugging Face "
                  "model directory")
      ->required();
  cmd->add_option("--save", args->save,
                  "Save directory to write into (gets iter_NNNNNNN and latest); with --to hf, the "
                  "Hugging Face model directory")
      ->required();
  cmd->add_option("--tp", args->tp, "Tensor-parallel size to write for (default: the source's)")
      ->check(like_key("parallel.tensor"));
  cmd->add_option("--pp", args->pp, "Pipeline-parallel size to write for (default: the source's)")
      ->check(like_key("parallel.pipeline"));
  cmd->add_option("--dtype", args->dtype,
                  "Model weights' dtype: f32, bf16 or f16 (default: the "
                  "source's); 16-bit weights keep f32 masters");
  cmd->add_option("--to", args->to,
                  "hf: write a Hugging Face model directory (config.json, "
                  "model.safetensors) to --save")
      ->check(CLI::IsMember({"hf"}));
  cmd->add_option("--from", args->from,
                  "hf: read a Hugging Face model directory (--load) into a "
                  "checkpoint (weights only, iteration 0)")
      ->check(CLI::IsMember({"hf"}));
  cmd->add_flag("--quiet", args->quiet, "No progress line");
  actions.emplace_back(cmd, [args] { train::convert(*args); });

  auto* group = app.add_subcommand("ckpt", "Checkpoint tools");
  group->require_subcommand(1);
  auto path = std::make_shared<std::string>();
  auto recipe = std::make_shared<bool>(false);
  auto* show = group->add_subcommand("inspect",
                                     "Iteration, layout, model, recipe and tensors of "
                                     "a checkpoint");
  show->add_option("checkpoint", *path, "An iter_NNNNNNN directory, or a save directory")
      ->required();
  show->add_flag("--recipe", *recipe, "Print the resolved recipe it was trained with");
  actions.emplace_back(show,
                       [path, recipe] { ckpt::inspect_checkpoint(*path, *recipe, std::cout); });
  auto check_path = std::make_shared<std::string>();
  auto* check = group->add_subcommand("verify",
                                      "Check every piece's CRC-32 (and that every rank "
                                      "file is there) without loading the checkpoint");
  check->add_option("checkpoint", *check_path, "An iter_NNNNNNN directory, or a save directory")
      ->required();
  actions.emplace_back(check, [check_path] { ckpt::verify_checkpoint(*check_path, std::cout); });
}

}  // namespace megatron::cli
