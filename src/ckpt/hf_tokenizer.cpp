#include "ckpt/hf_tokenizer.hpp"

#include <fstream>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "core/error.hpp"
#include "recipe/enum_names.hpp"

namespace megatron::ckpt {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

void copy_as(const std::string& from, const fs::path& to) {
  std::error_code ec;
  fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
  if (ec) throw RuntimeFailure("cannot copy " + from + " to " + to.string() + ": " + ec.message());
}

void write_json(const fs::path& file, const json& j) {
  std::ofstream out(file);
  out << j.dump(2) << "\n";
  if (!out.flush()) throw RuntimeFailure("cannot write " + file.string());
}

}  // namespace

void write_hf_tokenizer(const HfTokenizerFiles& f, const fs::path& dir, int64_t max_length) {
  json config{{"clean_up_tokenization_spaces", false}};
  if (max_length > 0) config["model_max_length"] = max_length;
  json special;
  switch (f.kind) {
    case recipe::Tokenizer::Gpt2Bpe:
      if (f.vocab_file.empty() || f.merge_file.empty()) {
        throw UserError("the GPT-2 tokenizer needs its vocab.json and merges.txt");
      }
      copy_as(f.vocab_file, dir / "vocab.json");
      copy_as(f.merge_file, dir / "merges.txt");
      config["tokenizer_class"] = "GPT2Tokenizer";
      config["add_prefix_space"] = false;
      special = {{"bos_token", "<|endoftext|>"}, {"eos_token", "<|endoftext|>"},
                 {"unk_token", "<|endoftext|>"}};
      break;
    case recipe::Tokenizer::BertWordPieceLowerCase:
    case recipe::Tokenizer::BertWordPieceCased:
      if (f.vocab_file.empty()) throw UserError("the WordPiece tokenizer needs its vocab.txt");
      copy_as(f.vocab_file, dir / "vocab.txt");
      config["tokenizer_class"] = "BertTokenizer";
      config["do_lower_case"] = f.kind == recipe::Tokenizer::BertWordPieceLowerCase;
      special = {{"cls_token", "[CLS]"}, {"sep_token", "[SEP]"}, {"mask_token", "[MASK]"},
                 {"pad_token", "[PAD]"}, {"unk_token", "[UNK]"}};
      break;
    case recipe::Tokenizer::SentencePiece:
      if (f.tokenizer_model.empty()) throw UserError("the SentencePiece tokenizer needs its .model file");
      copy_as(f.tokenizer_model, dir / "tokenizer.model");
      // Llama's conventions; our SentencePiece tokenizer adds no BOS of its own.
      config["tokenizer_class"] = "LlamaTokenizer";
      config["add_bos_token"] = false;
      config["add_eos_token"] = false;
      config["legacy"] = true;
      special = {{"bos_token", "<s>"}, {"eos_token", "</s>"}, {"unk_token", "<unk>"}};
      break;
    case recipe::Tokenizer::HuggingFace: {
      if (f.tokenizer_model.empty()) throw UserError("the Hugging Face tokenizer needs its tokenizer.json");
      std::error_code ec;
      const fs::path file = fs::is_directory(f.tokenizer_model, ec) ? fs::path(f.tokenizer_model) / "tokenizer.json"
                                                                    : fs::path(f.tokenizer_model);
      copy_as(file.string(), dir / "tokenizer.json");
      // The tokenizer's own settings (special tokens, chat template: transformers 5 keeps it in
      // chat_template.jinja) travel with it.
      if (const fs::path jinja = file.parent_path() / "chat_template.jinja"; fs::is_regular_file(jinja, ec)) {
        copy_as(jinja.string(), dir / "chat_template.jinja");
      }
      const fs::path own_config = file.parent_path() / "tokenizer_config.json";
      if (fs::is_regular_file(own_config, ec)) {
        copy_as(own_config.string(), dir / "tokenizer_config.json");
        return;
      }
      config["tokenizer_class"] = "PreTrainedTokenizerFast";
      break;
    }
    case recipe::Tokenizer::Null:
      throw UserError("the model has no tokenizer to export");
  }
  for (const auto& [key, value] : special.items()) config[key] = value;
  write_json(dir / "tokenizer_config.json", config);
  write_json(dir / "special_tokens_map.json", special);
}

HfTokenizerFiles tokenizer_of_recipe(const std::string& recipe_yaml) {
  HfTokenizerFiles files{.kind = recipe::Tokenizer::Null};
  try {
    const YAML::Node root = YAML::Load(recipe_yaml);
    if (!root.IsMap() || !root["data"] || !root["data"].IsMap()) return files;
    const YAML::Node data = root["data"];
    const auto text = [&](const char* key) {
      return data[key] && data[key].IsScalar() ? data[key].Scalar() : std::string();
    };
    files.kind = recipe::parse_enum<recipe::Tokenizer>(text("tokenizer")).value_or(recipe::Tokenizer::Null);
    files.vocab_file = text("vocab_file");
    files.merge_file = text("merge_file");
    files.tokenizer_model = text("tokenizer_model");
  } catch (const YAML::Exception&) {
    return {.kind = recipe::Tokenizer::Null};
  }
  return files;
}

std::optional<HfTokenizerFiles> find_hf_tokenizer(const fs::path& dir, recipe::Arch arch) {
  std::error_code ec;
  const fs::path root = fs::absolute(dir, ec);
  const auto has = [&](const char* name) { return fs::is_regular_file(root / name, ec); };
  const auto wordpiece = [&] {
    bool lower = true;
    std::ifstream in(root / "tokenizer_config.json");
    if (in) {
      try {
        const json c = json::parse(in);
        if (c.contains("do_lower_case") && c["do_lower_case"].is_boolean()) lower = c["do_lower_case"].get<bool>();
      } catch (const json::exception&) {
      }
    }
    return HfTokenizerFiles{.kind = lower ? recipe::Tokenizer::BertWordPieceLowerCase
                                          : recipe::Tokenizer::BertWordPieceCased,
                            .vocab_file = (root / "vocab.txt").string()};
  };
  if ((arch == recipe::Arch::Bert || arch == recipe::Arch::T5) && has("vocab.txt")) return wordpiece();
  // What AutoTokenizer loads first: the fast tokenizer's own file.
  if (has("tokenizer.json")) {
    return HfTokenizerFiles{.kind = recipe::Tokenizer::HuggingFace,
                            .tokenizer_model = (root / "tokenizer.json").string()};
  }
  if (has("vocab.json") && has("merges.txt")) {
    return HfTokenizerFiles{.kind = recipe::Tokenizer::Gpt2Bpe,
                            .vocab_file = (root / "vocab.json").string(),
                            .merge_file = (root / "merges.txt").string()};
  }
  if (has("tokenizer.model")) {
    return HfTokenizerFiles{.kind = recipe::Tokenizer::SentencePiece,
                            .tokenizer_model = (root / "tokenizer.model").string()};
  }
  if (has("vocab.txt")) return wordpiece();
  return std::nullopt;
}

}  // namespace megatron::ckpt
