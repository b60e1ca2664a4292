// A Hugging Face directory's tokenizer files: what a checkpoint's recipe names (an untrusted
// recipe never throws), written under Hugging Face's names with the configs AutoTokenizer
// reads, and found again on import for every kind.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "ckpt/hf_tokenizer.hpp"
#include "core/error.hpp"
#include "support/temp_dir.hpp"

namespace megatron::ckpt {
namespace {

namespace fs = std::filesystem;

const std::string kData = std::string(MEGATRON_SOURCE_DIR) + "/data/tokenizers/";

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(HfTokenizer, TheRecipeNamesItsTokenizerAndFiles) {
  const HfTokenizerFiles f = tokenizer_of_recipe(
      "model: {num_layers: 2}\ndata:\n  tokenizer: gpt2-bpe\n  vocab_file: /a/vocab.json\n  merge_file: /a/merges.txt\n");
  EXPECT_EQ(f.kind, recipe::Tokenizer::Gpt2Bpe);
  EXPECT_EQ(f.vocab_file, "/a/vocab.json");
  EXPECT_EQ(f.merge_file, "/a/merges.txt");
  EXPECT_EQ(f.tokenizer_model, "");
}

TEST(HfTokenizer, AnUnreadableRecipeNamesNothing) {
  for (const char* yaml : {"", "just a string", "[1, 2]", "data: 3", "data: {tokenizer: [x]}",
                           "data: {tokenizer: nonsense}", "{unclosed: [", "data:\n  vocab_file: {a: 1}\n"}) {
    const HfTokenizerFiles f = tokenizer_of_recipe(yaml);
    EXPECT_EQ(f.kind, recipe::Tokenizer::Null) << yaml;
    EXPECT_EQ(f.vocab_file, "") << yaml;
  }
}

TEST(HfTokenizer, EachKindIsWrittenAndFoundAgain) {
  test_support::TempDir dir;
  const fs::path model = dir.path() / "spm.model";
  std::ofstream(model) << "not parsed: copied byte for byte";
  const std::vector<HfTokenizerFiles> kinds = {
      {.kind = recipe::Tokenizer::Gpt2Bpe, .vocab_file = kData + "gpt2/vocab.json", .merge_file = kData + "gpt2/merges.txt"},
      {.kind = recipe::Tokenizer::BertWordPieceCased, .vocab_file = kData + "bert-base-uncased/vocab.txt"},
      {.kind = recipe::Tokenizer::BertWordPieceLowerCase, .vocab_file = kData + "bert-base-uncased/vocab.txt"},
      {.kind = recipe::Tokenizer::SentencePiece, .tokenizer_model = model.string()}};
  for (size_t i = 0; i < kinds.size(); ++i) {
    const fs::path out = dir.path() / std::to_string(i);
    fs::create_directories(out);
    write_hf_tokenizer(kinds[i], out, 1024);
    const auto config = nlohmann::json::parse(slurp(out / "tokenizer_config.json"));
    EXPECT_EQ(config["model_max_length"], 1024);
    EXPECT_TRUE(fs::exists(out / "special_tokens_map.json"));
    const auto found = find_hf_tokenizer(out, recipe::Arch::Gpt);
    ASSERT_TRUE(found) << i;
    EXPECT_EQ(found->kind, kinds[i].kind) << i;
    const std::string original = kinds[i].tokenizer_model.empty() ? kinds[i].vocab_file : kinds[i].tokenizer_model;
    const std::string copy = found->tokenizer_model.empty() ? found->vocab_file : found->tokenizer_model;
    EXPECT_EQ(slurp(copy), slurp(original)) << i;
    EXPECT_TRUE(fs::path(copy).is_absolute());
  }
}

// tokenizer.json (what transformers 5 saves) is copied with its own tokenizer_config.json, or
// given one naming the fast tokenizer; found again first, before the slow tokenizers' files
// (but BERT's and T5's vocab.txt).
TEST(HfTokenizer, ATokenizerJsonIsWrittenWithItsConfigAndFoundFirst) {
  test_support::TempDir dir;
  const fs::path source = dir.path() / "source";
  fs::create_directories(source);
  std::ofstream(source / "tokenizer.json") << R"({"model": {"type": "BPE"}})";
  std::ofstream(source / "tokenizer_config.json") << R"({"eos_token": "<|im_end|>", "chat_template": "x"})";
  std::ofstream(source / "chat_template.jinja") << "{{ messages }}";  // transformers 5 keeps it here
  const fs::path out = dir.path() / "out";
  fs::create_directories(out);
  write_hf_tokenizer({.kind = recipe::Tokenizer::HuggingFace, .tokenizer_model = source.string()}, out, 1024);
  EXPECT_EQ(slurp(out / "tokenizer.json"), slurp(source / "tokenizer.json"));
  EXPECT_EQ(slurp(out / "tokenizer_config.json"), slurp(source / "tokenizer_config.json"));
  EXPECT_EQ(slurp(out / "chat_template.jinja"), "{{ messages }}");
  // A directory with both kinds of files: AutoTokenizer loads the fast one, and so does the import.
  std::ofstream(out / "vocab.json") << "{}";
  std::ofstream(out / "merges.txt") << "";
  const auto found = find_hf_tokenizer(out, recipe::Arch::Gpt);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->kind, recipe::Tokenizer::HuggingFace);
  EXPECT_EQ(found->tokenizer_model, (out / "tokenizer.json").string());
  // BERT's and T5's data are made with a WordPiece vocab.txt: theirs first where there is one.
  std::ofstream(out / "vocab.txt") << "[UNK]\n";
  for (const recipe::Arch arch : {recipe::Arch::Bert, recipe::Arch::T5}) {
    const auto wordpiece = find_hf_tokenizer(out, arch);
    ASSERT_TRUE(wordpiece);
    EXPECT_EQ(wordpiece->kind, recipe::Tokenizer::BertWordPieceLowerCase);
    EXPECT_EQ(wordpiece->vocab_file, (out / "vocab.txt").string());
  }
  EXPECT_EQ(find_hf_tokenizer(out, recipe::Arch::Gpt)->kind, recipe::Tokenizer::HuggingFace);

  const fs::path bare = dir.path() / "bare";
  fs::create_directories(bare);
  fs::remove(source / "tokenizer_config.json");
  write_hf_tokenizer({.kind = recipe::Tokenizer::HuggingFace, .tokenizer_model = (source / "tokenizer.json").string()},
                     bare, 1024);
  const auto config = nlohmann::json::parse(slurp(bare / "tokenizer_config.json"));
  EXPECT_EQ(config["tokenizer_class"], "PreTrainedTokenizerFast");
  EXPECT_EQ(config["model_max_length"], 1024);
}

TEST(HfTokenizer, AKindWithoutItsFilesIsAUserError) {
  test_support::TempDir dir;
  EXPECT_THROW(write_hf_tokenizer({.kind = recipe::Tokenizer::Gpt2Bpe, .vocab_file = kData + "gpt2/vocab.json"},
                                  dir.path(), 0),
               UserError);
  EXPECT_THROW(write_hf_tokenizer({.kind = recipe::Tokenizer::Null}, dir.path(), 0), UserError);
  EXPECT_THROW(write_hf_tokenizer({.kind = recipe::Tokenizer::SentencePiece, .tokenizer_model = "/no/such"},
                                  dir.path(), 0),
               RuntimeFailure);
  EXPECT_FALSE(find_hf_tokenizer(dir.path(), recipe::Arch::Gpt));
}

}  // namespace
}  // namespace megatron::ckpt
