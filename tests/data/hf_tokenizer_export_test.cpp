// tokenizer.json for `convert --to hf`: GPT-2's and BERT's vocabularies written as transformers
// 5.25 writes them when it converts those files (the fixtures in
// tests/data/hf_tokenizer_exports/, made by scripts/fixtures/make_exported_tokenizers.py), and
// read back by the tokenizer.json loader they give the ids the native tokenizers give on every
// held-out text.
#include "data/hf_tokenizer_export.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "data/gpt2_bpe.hpp"
#include "data/hf_tokenizer.hpp"
#include "data/wordpiece.hpp"
#include "support/temp_dir.hpp"

namespace megatron::data {
namespace hf_tokenizer_export_test {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kSource = MEGATRON_SOURCE_DIR;
const std::string kGpt2Vocab = (kSource / "data/tokenizers/gpt2/vocab.json").string();
const std::string kGpt2Merges = (kSource / "data/tokenizers/gpt2/merges.txt").string();
const std::string kBertVocab = (kSource / "data/tokenizers/bert-base-uncased/vocab.txt").string();

std::string slurp(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return std::move(s).str();
}

// The fixture: transformers' file with its vocabulary and merges left out.
json expected(const char* name) {
  json j = json::parse(slurp(kSource / "tests/data/hf_tokenizer_exports" / (std::string(name) + ".json")));
  j.erase("_made_by");
  return j;
}

// Ours with the vocabulary and merges replaced by the fixture's placeholders.
json skeleton(const nlohmann::ordered_json& ours, const json& fixture) {
  json j = json::parse(ours.dump());
  j["model"]["vocab"] = fixture["model"]["vocab"];
  if (fixture["model"].contains("merges")) j["model"]["merges"] = fixture["model"]["merges"];
  return j;
}

// The held-out texts but those that spell one of `specials`: in text, tokenizer.json (and
// transformers' GPT2Tokenizer and BertTokenizer) match a special token's spelling as the token,
// where the native tokenizers (Megatron's, encoder.py's, Google BERT's) see plain characters.
std::vector<std::string> held_out_texts(const std::vector<std::string>& specials) {
  std::vector<std::string> texts;
  std::ifstream in(kSource / "tests/data/hf_tokenizers/texts.jsonl");
  for (std::string line; std::getline(in, line);) {
    const std::string text = json::parse(line)["text"];
    bool spells = false;
    for (const std::string& s : specials) spells = spells || text.find(s) != std::string::npos;
    if (!spells) texts.push_back(text);
  }
  return texts;
}

std::unique_ptr<HfTokenizer> reload(const nlohmann::ordered_json& j, const test_support::TempDir& dir) {
  const fs::path file = dir.path() / "tokenizer.json";
  std::ofstream(file, std::ios::binary) << j.dump(2);
  return load_hf_tokenizer(file.string());
}

TEST(HfTokenizerExport, Gpt2IsWrittenAsTransformersWritesIt) {
  const nlohmann::ordered_json ours = gpt2_tokenizer_json(*load_gpt2_bpe(kGpt2Vocab, kGpt2Merges), kGpt2Merges);
  const json fixture = expected("gpt2");
  EXPECT_EQ(skeleton(ours, fixture), fixture);
  EXPECT_EQ(json::parse(ours["model"]["vocab"].dump()), json::parse(slurp(kGpt2Vocab)));
  // The vocabulary by id, as the library writes it.
  EXPECT_EQ(ours["model"]["vocab"].begin().key(), "!");
  ASSERT_EQ(ours["model"]["merges"].size(), 50000u);
  EXPECT_EQ(ours["model"]["merges"][0], nlohmann::ordered_json({"Ġ", "t"}));
  EXPECT_EQ(ours["model"]["merges"][49999], nlohmann::ordered_json({"Ġg", "azed"}));
}

TEST(HfTokenizerExport, Gpt2ReadBackGivesTheNativeIdsOnEveryHeldOutText) {
  test_support::TempDir dir;
  const auto exported = reload(gpt2_tokenizer_json(*load_gpt2_bpe(kGpt2Vocab, kGpt2Merges), kGpt2Merges), dir);
  const auto native = load_gpt2_bpe(kGpt2Vocab, kGpt2Merges);
  const std::vector<std::string> texts = held_out_texts({"<|endoftext|>"});
  ASSERT_GE(texts.size(), 60u);
  for (const std::string& text : texts) {
    EXPECT_EQ(exported->encode(text), native->encode(text)) << text;
  }
  EXPECT_EQ(exported->encode("Hello<|endoftext|>"), (std::vector<int32_t>{15496, 50256}));
  EXPECT_TRUE(exported->prompt_start().empty());
}

TEST(HfTokenizerExport, WordPieceIsWrittenAsTransformersWritesItLowercasedAndCased) {
  for (const bool lower : {true, false}) {
    const nlohmann::ordered_json ours = wordpiece_tokenizer_json(*load_wordpiece(kBertVocab, lower), lower);
    const json fixture = expected(lower ? "bert_uncased" : "bert_cased");
    EXPECT_EQ(skeleton(ours, fixture), fixture) << lower;
    ASSERT_EQ(ours["model"]["vocab"].size(), 30522u);
    EXPECT_EQ(ours["model"]["vocab"]["[CLS]"], 101);
  }
}

TEST(HfTokenizerExport, WordPieceReadBackGivesTheNativeIdsOnEveryHeldOutText) {
  for (const bool lower : {true, false}) {
    test_support::TempDir dir;
    const auto exported = reload(wordpiece_tokenizer_json(*load_wordpiece(kBertVocab, lower), lower), dir);
    const auto native = load_wordpiece(kBertVocab, lower);
    const std::vector<std::string> texts = held_out_texts({"[CLS]", "[SEP]", "[MASK]", "[PAD]", "[UNK]"});
    ASSERT_GE(texts.size(), 60u);
    for (const std::string& text : texts) {
      EXPECT_EQ(exported->encode(text), native->encode(text)) << lower << " " << text;
    }
    EXPECT_EQ(exported->encode("x [SEP] y"), (std::vector<int32_t>{1060, 102, 1061}));
    EXPECT_EQ(exported->prompt_start(), std::vector<int32_t>{101}) << "[CLS] starts a text";
  }
}

}  // namespace hf_tokenizer_export_test
}  // namespace megatron::data
