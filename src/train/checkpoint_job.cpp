#include "train/checkpoint_job.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <fstream>

#include "core/error.hpp"
#include "recipe/enum_names.hpp"
#include "recipe/suggest.hpp"

namespace megatron::train {

namespace fs = std::filesystem;

recipe::CompiledRecipe compile_for_checkpoint(const ckpt::CheckpointMeta& meta, const fs::path& dir,
                                              const CheckpointJob& job) {
  const fs::path file = fs::temp_directory_path() / fmt::format("megatron-ckpt-{}.yaml", ::getpid());
  {
    std::ofstream out(file);
    out << meta.recipe;
  }
  const int64_t replicas = std::max<int64_t>(1, job.world / std::max<int64_t>(job.tensor, 1));
  std::vector<std::string> o{"parallel.tensor=" + std::to_string(job.tensor),
                             "parallel.pipeline=1",
                             "parallel.virtual_pipeline=1",
                             "parallel.context=1",
                             "parallel.sequence_parallel=false",
                             "cluster.nodes=1",
                             "cluster.gpus_per_node=" + std::to_string(job.world),
                             "training.global_batch_size=" + std::to_string(job.batch * replicas),
                             "training.micro_batch_size=" + std::to_string(job.batch)};
  if (!job.device.empty()) o.push_back("cluster.device=" + job.device);
  o.insert(o.end(), job.overrides.begin(), job.overrides.end());
  try {
    recipe::CompiledRecipe c = recipe::compile(file, {.overrides = o, .world_size = job.world});
    fs::remove(file);
    c.file = (dir / "recipe").string();
    return c;
  } catch (...) {
    fs::remove(file);
    throw;
  }
}

std::unique_ptr<data::Tokenizer> load_tokenizer(const TokenizerChoice& choice) {
  const auto kind = recipe::parse_enum<recipe::Tokenizer>(choice.type);
  if (!kind) {
    auto names = recipe::canonical_names<recipe::Tokenizer>();
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    throw UserError("unknown tokenizer '" + choice.type + "'" +
                    recipe::did_you_mean(choice.type, names) + "; choose one of " + list);
  }
  return data::make_tokenizer(*kind, choice.files);
}

std::unique_ptr<data::Tokenizer> checkpoint_tokenizer(const TokenizerChoice& choice,
                                                      const recipe::Recipe& r) {
  TokenizerChoice t = choice;
  if (t.type.empty()) t.type = std::string(recipe::name_of(r.data.tokenizer));
  if (t.files.vocab_file.empty() && r.data.vocab_file && fs::exists(*r.data.vocab_file)) {
    t.files.vocab_file = *r.data.vocab_file;
  }
  if (t.files.merge_file.empty() && r.data.merge_file && fs::exists(*r.data.merge_file)) {
    t.files.merge_file = *r.data.merge_file;
  }
  if (t.files.tokenizer_model.empty() && r.data.tokenizer_model &&
      fs::exists(*r.data.tokenizer_model)) {
    t.files.tokenizer_model = *r.data.tokenizer_model;
  }
  if (t.files.vocab_file.empty() && t.files.tokenizer_model.empty()) {
    const bool gpt2 = r.data.tokenizer == recipe::Tokenizer::Gpt2Bpe;
    throw UserError(fmt::format(
        "the checkpoint's recipe names no tokenizer files this machine has: give {}",
        gpt2 ? "--vocab-file and --merge-file (e.g. data/tokenizers/gpt2/vocab.json and merges.txt)"
        : r.data.tokenizer == recipe::Tokenizer::SentencePiece
            ? "--tokenizer-model (the SentencePiece model it was trained with)"
        : r.data.tokenizer == recipe::Tokenizer::HuggingFace
            ? "--tokenizer-model (its tokenizer.json or the directory that holds it)"
            : "--vocab-file (e.g. data/tokenizers/bert-base-uncased/vocab.txt)"));
  }
  return load_tokenizer(t);
}

}  // namespace megatron::train
