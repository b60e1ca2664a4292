#include "train/convert_job.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>

#include "ckpt/checkpoint_reader.hpp"
#include "ckpt/directory.hpp"
#include "ckpt/hf_generation_config.hpp"
#include "ckpt/hf_tokenizer.hpp"
#include "ckpt/hugging_face.hpp"
#include "ckpt/rewrite.hpp"
#include "core/error.hpp"
#include "core/output_dir.hpp"
#include "core/printable.hpp"
#include "core/progress_line.hpp"
#include "data/hf_tokenizer_export.hpp"
#include "plan/engine_support.hpp"
#include "plan/model_config.hpp"
#include "recipe/enum_names.hpp"
#include "tensor/tensor.hpp"
#include "train/checkpoint_job.hpp"

namespace megatron::train {
namespace {
namespace fs = std::filesystem;

std::optional<tensor::DType> parse_dtype(const std::string& text) {
  if (text.empty()) return std::nullopt;
  if (text == "f32" || text == "fp32") return tensor::DType::F32;
  if (text == "bf16") return tensor::DType::Bf16;
  if (text == "f16" || text == "fp16") return tensor::DType::F16;
  throw UserError("--dtype " + text + ": expected f32, bf16 or f16");
}

double elapsed_s(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// What --to hf writes beside the model about its tokenizer, read and checked before anything is
// written: the files the checkpoint's recipe names (when this machine has them), so that
// AutoTokenizer loads the directory; tokenizer.json for the kinds megatron writes it for; the end
// of document that generation_config.json names.
struct HfTokenizerExport {
  std::optional<ckpt::HfTokenizerFiles> files;  // none (and a warning) when this machine lacks them
  int64_t positions = 0;                         // model_max_length
  std::optional<nlohmann::ordered_json> json;    // tokenizer.json
  std::optional<int64_t> eod;
};

HfTokenizerExport hf_tokenizer_export(const ckpt::CheckpointMeta& meta, const fs::path& dir) {
  HfTokenizerExport out;
  const ckpt::HfTokenizerFiles files = ckpt::tokenizer_of_recipe(meta.recipe);
  std::error_code ec;
  for (const std::string& f : {files.vocab_file, files.merge_file, files.tokenizer_model}) {
    if (!f.empty() && !fs::is_regular_file(f, ec)) {
      spdlog::warn(
          "the tokenizer file {} is not on this machine: no tokenizer files written; "
          "AutoTokenizer will not load {}",
          printable(f), dir.string());
      return out;
    }
  }
  if (files.kind == recipe::Tokenizer::Null ||
      (files.vocab_file.empty() && files.tokenizer_model.empty())) {
    spdlog::warn(
        "the checkpoint's recipe names no tokenizer files (data.vocab_file, merge_file or "
        "tokenizer_model): no tokenizer files written; AutoTokenizer will not load {}",
        dir.string());
    return out;
  }
  // Loaded as every job loads them: a damaged file is refused here, before the export writes.
  const auto tokenizer = load_tokenizer({.type = std::string(recipe::name_of(files.kind)),
                                         .files = {.vocab_file = files.vocab_file,
                                                   .merge_file = files.merge_file,
                                                   .tokenizer_model = files.tokenizer_model}});
  if (const auto id = tokenizer->special_tokens().eod) out.eod = *id;
  // tokenizer.json too, as transformers writes it when it converts these files: the format
  // transformers 5 saves and tools that read it alone (a tokenizers-only pipeline) need.
  if (files.kind == recipe::Tokenizer::Gpt2Bpe) {
    out.json = data::gpt2_tokenizer_json(*tokenizer, files.merge_file);
  } else if (files.kind == recipe::Tokenizer::BertWordPieceLowerCase ||
             files.kind == recipe::Tokenizer::BertWordPieceCased) {
    out.json = data::wordpiece_tokenizer_json(*tokenizer,
                                              files.kind == recipe::Tokenizer::BertWordPieceLowerCase);
  }
  // model_max_length: the model's positions, as the checkpoint recorded them.
  if (const auto field = ckpt::model_field(meta, "model.max_position_embeddings")) {
    std::from_chars(field->data(), field->data() + field->size(), out.positions);
  }
  out.files = files;
  return out;
}

void write_json_file(const fs::path& file, const std::string& text) {
  std::ofstream out(file, std::ios::binary);
  out << text << "\n";
  if (!out.flush()) throw RuntimeFailure("cannot write " + file.string());
}

// --to hf: the checkpoint's weights as a Hugging Face model directory.
void export_hf(const ConvertJob& a, std::optional<tensor::DType> dtype) {
  if (a.tp > 0 || a.pp > 0) throw UserError("--to hf writes one whole model: drop --tp and --pp");
  const fs::path dir = ckpt::existing_checkpoint(a.load);
  std::error_code ec;
  if (fs::exists(fs::path(a.save) / "config.json", ec) ||
      fs::exists(fs::path(a.save) / "model.safetensors", ec)) {
    throw UserError(a.save + " holds a Hugging Face model already; choose another --save");
  }
  const auto start = std::chrono::steady_clock::now();
  ckpt::CheckpointReader reader(dir);
  // The model the checkpoint's recipe describes, as every job reads it (plan::model_config).
  const recipe::CompiledRecipe compiled = compile_for_checkpoint(reader.meta(), dir, {});
  const model::ModelConfig config = plan::model_config(compiled.recipe, compiled.derived);
  const HfTokenizerExport tokenizer = hf_tokenizer_export(reader.meta(), a.save);
  // generation_config.json, so that transformers' generate() stops and samples where `megatron
  // generate` does: only a causal language model generates (BERT does not; T5's config.json has
  // its eos). Null when there is nothing to say.
  const bool generates = compiled.recipe.model.arch == recipe::Arch::Gpt && compiled.derived.classes == 0;
  const nlohmann::json generation =
      generates ? ckpt::hf_generation_config(compiled.recipe.generation, tokenizer.eod) : nlohmann::json();
  const std::vector<fs::path> created = prepare_output_dir("--save", a.save);
  try {
    ckpt::export_hugging_face(reader, config, a.save, dtype);
    if (tokenizer.files) {
      ckpt::write_hf_tokenizer(*tokenizer.files, a.save, tokenizer.positions);
      if (tokenizer.json) write_json_file(fs::path(a.save) / "tokenizer.json", tokenizer.json->dump(2));
    }
    if (!generation.is_null()) write_json_file(fs::path(a.save) / "generation_config.json", generation.dump(2));
  } catch (...) {
    remove_created(created);
    throw;
  }
  std::cout << fmt::format("wrote {} (config.json, model.safetensors{}{}) from {} in {:.1f} s\n",
                           a.save, tokenizer.files ? ", tokenizer files" : "",
                           generation.is_null() ? "" : ", generation_config.json", dir.string(),
                           elapsed_s(start));
}

// The tokenizer files beside a Hugging Face model, which the import's recipe names: loaded as
// every job would load them, so that a damaged file (not JSON, not an object of token ids, ids
// not 0..n-1) or one with more tokens than the model's vocabulary is refused now, by name.
void check_hf_tokenizer(const fs::path& dir, recipe::Arch arch, int64_t vocab) {
  const std::optional<ckpt::HfTokenizerFiles> files = ckpt::find_hf_tokenizer(dir, arch);
  if (!files) return;
  const std::string& named = files->vocab_file.empty() ? files->tokenizer_model : files->vocab_file;
  std::unique_ptr<data::Tokenizer> tokenizer;
  try {
    tokenizer = load_tokenizer({.type = std::string(recipe::name_of(files->kind)),
                                .files = {.vocab_file = files->vocab_file,
                                          .merge_file = files->merge_file,
                                          .tokenizer_model = files->tokenizer_model}});
  } catch (const UserError& e) {
    throw UserError(fmt::format("{} (the tokenizer of the model being imported: repair it, or "
                                "remove its files to import the weights alone)",
                                e.what()));
  }
  if (tokenizer->vocab_size() > vocab) {
    throw UserError(fmt::format("{}: the tokenizer has {} tokens (ids 0..{}) but the model's "
                                "vocabulary (config.json vocab_size) {}: ids past it have no "
                                "embedding row; it is another model's tokenizer",
                                named, tokenizer->vocab_size(), tokenizer->vocab_size() - 1,
                                vocab));
  }
}

// The layout's refusals, before anything is written: a pipeline the model's positions cannot be
// split over, heads or query groups that the tensor split does not divide.
void check_target(const ckpt::CheckpointMeta& meta, const ckpt::RewriteTarget& target,
                  const fs::path& dir) {
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
    if (!v.empty() &&
        (std::from_chars(v.data(), v.data() + v.size(), n).ec != std::errc() || n < 1)) {
      throw UserError(
          fmt::format("{}: the checkpoint's {} is '{}', not a positive integer (damaged "
                      "checkpoint?)",
                      dir.string(), key, printable(v)));
    }
    if (!v.empty() && n % target.tensor != 0) {
      throw UserError(fmt::format("--tp {}: the model's {} ({}) is not divisible by it",
                                  target.tensor, key, v));
    }
  }
}

}  // namespace

void convert(const ConvertJob& a) {
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
    check_hf_tokenizer(a.load, hf->config().arch, hf->config().vocab);
    meta = hf->meta();
    source = std::move(hf);
    dir = a.load;
  } else {
    dir = ckpt::existing_checkpoint(a.load);
    auto reader = std::make_unique<ckpt::CheckpointReader>(dir);
    meta = reader->meta();
    source = std::move(reader);
  }
  const ckpt::RewriteTarget target{.tensor = a.tp > 0 ? a.tp : meta.layout.tensor,
                                   .pipeline = a.pp > 0 ? a.pp : meta.layout.pipeline,
                                   .dtype = dtype};
  check_target(meta, target, dir);
  // Never write over a checkpoint: the output's iteration must be new there.
  const fs::path out = fs::path(a.save) / ckpt::iteration_dir_name(meta.state.iteration);
  std::error_code ec;
  if (fs::exists(out, ec)) {
    throw UserError(out.string() + " exists already; choose another --save");
  }
  if (fs::weakly_canonical(dir, ec) == fs::weakly_canonical(out, ec)) {
    throw UserError("--save " + a.save + " would overwrite the checkpoint being read");
  }
  // `latest` will name the converted checkpoint: a run resuming from --save would go back to it.
  const std::optional<int64_t> newer = ckpt::latest_iteration(a.save);
  const std::vector<fs::path> created = prepare_output_dir("--save", a.save);

  const auto start = std::chrono::steady_clock::now();
  ProgressLine line;
  ckpt::RewriteProgress progress;
  if (!a.quiet) {
    progress = [&](int64_t done, int64_t total) {
      line.count("convert", done, total, "tensor shards", elapsed_s(start));
    };
  }
  fs::path written;
  try {
    written = ckpt::rewrite_checkpoint(*source, meta, target, a.save, progress);
  } catch (...) {
    remove_created(created);  // rewrite_checkpoint removed its staging directory
    throw;
  }
  if (newer && *newer > meta.state.iteration) {
    spdlog::warn("{}: latest named {} and now names {}, an older iteration: a run resuming from "
                 "it goes back to iteration {}",
                 a.save, ckpt::iteration_dir_name(*newer),
                 ckpt::iteration_dir_name(meta.state.iteration), meta.state.iteration);
  }
  if (a.from == "hf") {
    // A recipe for the imported model, to train or fine-tune it from the checkpoint.
    const fs::path recipe = fs::path(a.save) / "recipe.yaml";
    if (!(std::ofstream(recipe) << meta.recipe)) {
      throw RuntimeFailure("cannot write " + recipe.string() + " (the checkpoint " +
                           written.string() + " is complete)");
    }
    std::cout << fmt::format(
        "recipe for this model: {}; train it with megatron run {} "
        "checkpoint.load={}\n",
        recipe.string(), recipe.string(), a.save);
  }
  std::cout << fmt::format("wrote {}: tensor {} x pipeline {}, {} ({} rank files) in {:.1f} s\n",
                           written.string(), target.tensor, target.pipeline,
                           dtype ? std::string(tensor::name(*dtype)) : meta.dtype,
                           target.tensor * target.pipeline, elapsed_s(start));
}

}  // namespace megatron::train
