// `megatron convert`: rewrites a checkpoint for another layout or dtype (or to and from Hugging
// Face); `megatron ckpt inspect` and `ckpt verify`: what a checkpoint holds, and whether it is whole.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>

#include "ckpt/checkpoint_reader.hpp"
#include "ckpt/describe.hpp"
#include "ckpt/directory.hpp"
#include "ckpt/hf_tokenizer.hpp"
#include "ckpt/hugging_face.hpp"
#include "ckpt/rewrite.hpp"
#include "cli/commands.hpp"
#include "cli/limits.hpp"
#include "core/error.hpp"
#include "core/output_dir.hpp"
#include "core/printable.hpp"
#include "core/progress_line.hpp"
#include "plan/engine_support.hpp"
#include "plan/model_config.hpp"
#include "recipe/enum_names.hpp"
#include "tensor/tensor.hpp"
#include "train/checkpoint_job.hpp"

namespace megatron::cli {
namespace {
namespace fs = std::filesystem;

std::optional<tensor::DType> parse_dtype(const std::string& text) {
  if (text.empty()) return std::nullopt;
  if (text == "f32" || text == "fp32") return tensor::DType::F32;
  if (text == "bf16") return tensor::DType::Bf16;
  if (text == "f16" || text == "fp16") return tensor::DType::F16;
  throw UserError("--dtype " + text + ": expected f32, bf16 or f16");
}

// The checkpoint a --load names (a checkpoint directory, or a save directory with `latest`).
fs::path checkpoint_at(const std::string& path) {
  const std::optional<fs::path> dir = ckpt::resolve_checkpoint(path);
  if (!dir) {
    throw UserError(path + ": not a checkpoint (no " + ckpt::kIndexFile + ", no latest); pass an "
                           "iter_NNNNNNN directory or a save directory");
  }
  return *dir;
}

struct ConvertArgs {
  std::string load, save, dtype;
  std::string to, from;  // "hf" or empty
  int64_t tp = 0, pp = 0;  // 0: as the source
  bool quiet = false;
};

// The tokenizer files the checkpoint's recipe names, beside an exported model, so that
// AutoTokenizer loads the directory. False (and a warning) when this machine lacks them.
bool export_hf_tokenizer(const ckpt::CheckpointMeta& meta, const fs::path& dir) {
  const ckpt::HfTokenizerFiles files = ckpt::tokenizer_of_recipe(meta.recipe);
  std::error_code ec;
  for (const std::string& f : {files.vocab_file, files.merge_file, files.tokenizer_model}) {
    if (!f.empty() && !fs::is_regular_file(f, ec)) {
      spdlog::warn("the tokenizer file {} is not on this machine: no tokenizer files written; "
                   "AutoTokenizer will not load {}",
                   printable(f), dir.string());
      return false;
    }
  }
  if (files.kind == recipe::Tokenizer::Null ||
      (files.vocab_file.empty() && files.tokenizer_model.empty())) {
    spdlog::warn("the checkpoint's recipe names no tokenizer files (data.vocab_file, merge_file or "
                 "tokenizer_model): no tokenizer files written; AutoTokenizer will not load {}",
                 dir.string());
    return false;
  }
  // model_max_length: the model's positions, as the checkpoint recorded them.
  int64_t positions = 0;
  if (const auto field = ckpt::model_field(meta, "model.max_position_embeddings")) {
    std::from_chars(field->data(), field->data() + field->size(), positions);
  }
  ckpt::write_hf_tokenizer(files, dir, positions);
  return true;
}

// --to hf: the checkpoint's weights as a Hugging Face model directory.
void export_hf(const ConvertArgs& a, std::optional<tensor::DType> dtype) {
  if (a.tp > 0 || a.pp > 0) throw UserError("--to hf writes one whole model: drop --tp and --pp");
  const fs::path dir = checkpoint_at(a.load);
  std::error_code ec;
  if (fs::exists(fs::path(a.save) / "config.json", ec) ||
      fs::exists(fs::path(a.save) / "model.safetensors", ec)) {
    throw UserError(a.save + " holds a Hugging Face model already; choose another --save");
  }
  const auto start = std::chrono::steady_clock::now();
  ckpt::CheckpointReader reader(dir);
  // The model the checkpoint's recipe describes, as every job reads it (plan::model_config).
  const recipe::CompiledRecipe compiled = train::compile_for_checkpoint(reader.meta(), dir, {});
  const model::ModelConfig config = plan::model_config(compiled.recipe, compiled.derived);
  const std::vector<fs::path> created = prepare_output_dir("--save", a.save);
  bool tokenizer = false;
  try {
    ckpt::export_hugging_face(reader, config, a.save, dtype);
    tokenizer = export_hf_tokenizer(reader.meta(), a.save);
  } catch (...) {
    remove_created(created);
    throw;
  }
  std::cout << fmt::format("wrote {} (config.json, model.safetensors{}) from {} in {:.1f} s\n", a.save,
                           tokenizer ? ", tokenizer files" : "",
                           dir.string(),
                           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

void convert(const ConvertArgs& a) {
  const std::optional<tensor::DType> dtype = parse_dtype(a.dtype);
  if ((!a.to.empty() && a.to != "hf") || (!a.from.empty() && a.from != "hf")) {
    throw UserError("--to and --from take hf (Hugging Face) only");
  }
  if (!a.to.empty() && !a.from.empty()) throw UserError("--to hf and --from hf: choose one");
  if (a.to == "hf") return export_hf(a, dtype);
  // The source: a checkpoint, or a Hugging Face directory (weights only, iteration 0).
  std::unique_ptr<ckpt::TensorSource> source;
  ckpt::CheckpointMeta meta;
  fs::path dir;
  if (a.from == "hf") {
    auto hf = std::make_unique<ckpt::HuggingFaceSource>(a.load, std::max<int64_t>(a.tp, 1));
    meta = hf->meta();
    source = std::move(hf);
    dir = a.load;
  } else {
    dir = checkpoint_at(a.load);
    auto reader = std::make_unique<ckpt::CheckpointReader>(dir);
    meta = reader->meta();
    source = std::move(reader);
  }
  ckpt::RewriteTarget target{.tensor = a.tp > 0 ? a.tp : meta.layout.tensor,
                             .pipeline = a.pp > 0 ? a.pp : meta.layout.pipeline,
                             .dtype = dtype};
  const auto position = recipe::parse_enum<recipe::PositionEmbedding>(
      ckpt::model_field(meta, "model.position_embedding").value_or("learned"));
  if (const std::string why = plan::pipeline_refusal(
          position.value_or(recipe::PositionEmbedding::Learned), target.pipeline);
      !why.empty()) {
    throw UserError(fmt::format("--pp {}: {}, so their checkpoints stay on one; drop --pp",
                                target.pipeline, why));
  }
  for (const char* key : {"model.num_attention_heads", "model.num_query_groups"}) {
    const std::string v = ckpt::model_field(meta, key).value_or("");
    int64_t n = 0;
    if (!v.empty() && (std::from_chars(v.data(), v.data() + v.size(), n).ec != std::errc() || n < 1)) {
      throw UserError(fmt::format("{}: the checkpoint's {} is '{}', not a positive integer (damaged "
                                  "checkpoint?)",
                                  dir.string(), key, printable(v)));
    }
    if (!v.empty() && n % target.tensor != 0) {
      throw UserError(fmt::format("--tp {}: the model's {} ({}) is not divisible by it", target.tensor,
                                  key, v));
    }
  }
  // Never write over a checkpoint: the output's iteration must be new there.
  const fs::path out = fs::path(a.save) / ckpt::iteration_dir_name(meta.state.iteration);
  std::error_code ec;
  if (fs::exists(out, ec)) {
    throw UserError(out.string() + " exists already; choose another --save");
  }
  if (fs::weakly_canonical(dir, ec) == fs::weakly_canonical(out, ec)) {
    throw UserError("--save " + a.save + " would overwrite the checkpoint being read");
  }
  const std::vector<fs::path> created = prepare_output_dir("--save", a.save);

  const auto start = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  ProgressLine line;
  ckpt::RewriteProgress progress;
  if (!a.quiet) {
    progress = [&](int64_t done, int64_t total) {
      line.count("convert", done, total, "tensor shards", seconds());
    };
  }
  fs::path written;
  try {
    written = ckpt::rewrite_checkpoint(*source, meta, target, a.save, progress);
  } catch (...) {
    remove_created(created);  // rewrite_checkpoint removed its staging directory
    throw;
  }
  if (a.from == "hf") {
    // A recipe for the imported model, to train or fine-tune it from the checkpoint.
    const fs::path recipe = fs::path(a.save) / "recipe.yaml";
    if (!(std::ofstream(recipe) << meta.recipe)) {
      throw RuntimeFailure("cannot write " + recipe.string() + " (the checkpoint " +
                           written.string() + " is complete)");
    }
    std::cout << fmt::format("recipe for this model: {}; train it with megatron run {} "
                             "checkpoint.load={}\n",
                             (fs::path(a.save) / "recipe.yaml").string(),
                             (fs::path(a.save) / "recipe.yaml").string(), a.save);
  }
  std::cout << fmt::format("wrote {}: tensor {} x pipeline {}, {} ({} rank files) in {:.1f} s\n",
                           written.string(), target.tensor, target.pipeline,
                           dtype ? std::string(tensor::name(*dtype)) : meta.dtype,
                           target.tensor * target.pipeline, seconds());
}

void inspect(const std::string& path, bool show_recipe) {
  const ckpt::CheckpointReader reader(checkpoint_at(path));
  std::cout << (show_recipe ? reader.meta().recipe : ckpt::describe(reader));
}

}  // namespace

void add_checkpoint_commands(CLI::App& app, Actions& actions) {
  auto args = std::make_shared<ConvertArgs>();
  auto* cmd = app.add_subcommand(
      "convert", "Rewrite a checkpoint for another layout or dtype, offline and tensor by tensor, "
                 "or to and from Hugging Face (GPT-2, Llama, Megatron-BERT, T5)");
  cmd->add_option("--load", args->load, "Checkpoint to read: an iter_NNNNNNN directory, or a save "
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
  cmd->add_option("--dtype", args->dtype, "Model weights' dtype: f32, bf16 or f16 (default: the "
                                          "source's); 16-bit weights keep f32 masters");
  cmd->add_option("--to", args->to, "hf: write a Hugging Face model directory (config.json, "
                                    "model.safetensors) to --save")
      ->check(CLI::IsMember({"hf"}));
  cmd->add_option("--from", args->from, "hf: read a Hugging Face model directory (--load) into a "
                                        "checkpoint (weights only, iteration 0)")
      ->check(CLI::IsMember({"hf"}));
  cmd->add_flag("--quiet", args->quiet, "No progress line");
  actions.emplace_back(cmd, [args] { convert(*args); });

  auto* group = app.add_subcommand("ckpt", "Checkpoint tools");
  group->require_subcommand(1);
  auto path = std::make_shared<std::string>();
  auto recipe = std::make_shared<bool>(false);
  auto* show = group->add_subcommand("inspect", "Iteration, layout, model, recipe and tensors of "
                                                "a checkpoint");
  show->add_option("checkpoint", *path, "An iter_NNNNNNN directory, or a save directory")->required();
  show->add_flag("--recipe", *recipe, "Print the resolved recipe it was trained with");
  actions.emplace_back(show, [path, recipe] { inspect(*path, *recipe); });
  auto check_path = std::make_shared<std::string>();
  auto* check = group->add_subcommand("verify", "Check every piece's CRC-32 (and that every rank "
                                                "file is there) without loading the checkpoint");
  check->add_option("checkpoint", *check_path, "An iter_NNNNNNN directory, or a save directory")->required();
  actions.emplace_back(check, [check_path] {
    const fs::path dir = checkpoint_at(*check_path);
    ckpt::CheckpointReader reader(dir);
    if (const std::string problem = reader.verify(0, 1); !problem.empty()) throw UserError(problem);
    std::cout << fmt::format("{}: {} rank files, every piece's checksum matches\n", dir.string(),
                             reader.meta().layout.world);
  });
}

}  // namespace megatron::cli
