// tokenizer.json (Hugging Face `tokenizers`): ids, ids with special tokens and decoded text
// equal to what `tokenizers` gives on held-out texts for every fixture (trained ones covering
// each component, and real ones of popular models); thread safety; one-line errors for
// damaged or hostile files. Fixtures and the script that makes them: tests/data/hf_tokenizers/.
#include "data/hf_tokenizer.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zstd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "support/temp_dir.hpp"
#include "support/user_error.hpp"

namespace megatron::data {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using test_support::TempDir;
using test_support::user_error_of;

const fs::path kFixtures = fs::path(MEGATRON_SOURCE_DIR) / "tests/data/hf_tokenizers";

std::string read_fixture_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return std::move(s).str();
}

// Streaming, since `zstd` writes no content size when it reads a pipe.
std::string unzstd(const std::string& packed) {
  std::unique_ptr<ZSTD_DStream, decltype(&ZSTD_freeDStream)> stream(ZSTD_createDStream(), &ZSTD_freeDStream);
  ZSTD_inBuffer in{packed.data(), packed.size(), 0};
  std::string out;
  std::vector<char> chunk(ZSTD_DStreamOutSize());
  while (in.pos < in.size) {
    ZSTD_outBuffer o{chunk.data(), chunk.size(), 0};
    const std::size_t rc = ZSTD_decompressStream(stream.get(), &o, &in);
    if (ZSTD_isError(rc)) return {};
    out.append(chunk.data(), o.pos);
  }
  return out;
}

// Each fixture's directory as the loader reads it: real tokenizers are committed compressed,
// so they are unpacked (with their tokenizer_config.json) into a scratch directory first.
class Fixtures {
 public:
  const HfTokenizer& get(const std::string& name) {
    auto it = loaded_.find(name);
    if (it != loaded_.end()) return *it->second;
    fs::path dir = kFixtures / name;
    if (fs::exists(dir / "tokenizer.json.zst")) {
      const fs::path unpacked = scratch_.path() / name;
      fs::create_directories(unpacked);
      std::ofstream(unpacked / "tokenizer.json", std::ios::binary) << unzstd(read_fixture_file(dir / "tokenizer.json.zst"));
      if (fs::exists(dir / "tokenizer_config.json")) {
        fs::copy_file(dir / "tokenizer_config.json", unpacked / "tokenizer_config.json");
      }
      dir = unpacked;
    }
    return *loaded_.emplace(name, load_hf_tokenizer(dir.string())).first->second;
  }

 private:
  TempDir scratch_;
  std::map<std::string, std::unique_ptr<HfTokenizer>> loaded_;
};

struct Expected {
  std::string tokenizer;
  std::size_t text;
  std::vector<int32_t> ids;
  std::vector<int32_t> ids_special;
  std::string decoded;
  std::string decoded_skip;
};

std::vector<std::string> texts() {
  std::vector<std::string> out;
  std::ifstream in(kFixtures / "texts.jsonl");
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line)["text"]);
  return out;
}

std::vector<Expected> expectations() {
  std::vector<Expected> out;
  std::ifstream in(kFixtures / "expected.jsonl");
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    out.push_back({j["tokenizer"], j["text"], j["ids"], j["ids_special"], j["decoded"], j["decoded_skip"]});
  }
  return out;
}

// Compares one field for every (tokenizer, text) and reports the first few differences.
template <typename Get, typename Want>
void expect_all(Get get, Want want) {
  Fixtures fixtures;
  const auto all_texts = texts();
  const auto all = expectations();
  ASSERT_GE(all.size(), 500u) << "tests/data/hf_tokenizers/expected.jsonl is missing or short";
  int failures = 0;
  for (const Expected& e : all) {
    ASSERT_LT(e.text, all_texts.size());
    const auto got = get(fixtures.get(e.tokenizer), all_texts[e.text]);
    if (got != want(e)) {
      ADD_FAILURE() << e.tokenizer << ", text " << e.text << ": '" << all_texts[e.text].substr(0, 80) << "'\n  got  "
                    << ::testing::PrintToString(got) << "\n  want " << ::testing::PrintToString(want(e));
      if (++failures == 10) return;
    }
  }
}

TEST(HfTokenizerJson, IdsEqualTokenizersOnEveryHeldOutText) {
  expect_all([](const HfTokenizer& t, const std::string& text) { return t.encode(text); },
             [](const Expected& e) { return e.ids; });
}

TEST(HfTokenizerJson, PostProcessorAddsTheSpecialTokensTokenizersAdds) {
  expect_all([](const HfTokenizer& t, const std::string& text) { return t.encode_with_special_tokens(text); },
             [](const Expected& e) { return e.ids_special; });
}

TEST(HfTokenizerJson, DecodeEqualsTokenizers) {
  expect_all([](const HfTokenizer& t, const std::string& text) { return t.decode(t.encode(text)); },
             [](const Expected& e) { return e.decoded; });
}

TEST(HfTokenizerJson, DecodeSkippingSpecialTokensEqualsTokenizers) {
  expect_all(
      [](const HfTokenizer& t, const std::string& text) {
        return t.decode_skipping_special(t.encode_with_special_tokens(text));
      },
      [](const Expected& e) { return e.decoded_skip; });
}

TEST(HfTokenizerJson, EveryFixtureDirectoryIsCompared) {
  std::set<std::string> compared;
  for (const Expected& e : expectations()) compared.insert(e.tokenizer);
  for (const auto& entry : fs::directory_iterator(kFixtures)) {
    if (entry.is_directory()) EXPECT_TRUE(compared.contains(entry.path().filename().string())) << entry.path();
  }
  EXPECT_GE(compared.size(), 10u);
}

TEST(HfTokenizerJson, EncodesTheSameFromManyThreads) {
  Fixtures fixtures;
  const HfTokenizer& t = fixtures.get("bpe_llama3");
  const auto all_texts = texts();
  std::vector<std::vector<int32_t>> serial;
  for (const auto& text : all_texts) serial.push_back(t.encode(text));
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      for (int round = 0; round < 3; ++round) {
        for (std::size_t i = 0; i < all_texts.size(); ++i) mismatches[k] += t.encode(all_texts[i]) != serial[i];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const int m : mismatches) EXPECT_EQ(m, 0);
}

TEST(HfTokenizerJson, InvalidUtf8BecomesReplacementCharacters) {
  Fixtures fixtures;
  const HfTokenizer& t = fixtures.get("bpe_bytelevel");
  EXPECT_EQ(t.encode("a\xFF" "b"), t.encode("a\xEF\xBF\xBD" "b"));
}

TEST(HfTokenizerJson, ReadsSpecialTokenRolesFromTokenizerConfig) {
  Fixtures fixtures;
  const HfTokenizer& bert = fixtures.get("wordpiece_bert");
  EXPECT_EQ(bert.special_tokens().cls, bert.id_of("[CLS]"));
  EXPECT_EQ(bert.special_tokens().sep, bert.id_of("[SEP]"));
  EXPECT_EQ(bert.special_tokens().mask, bert.id_of("[MASK]"));
  const HfTokenizer& llama = fixtures.get("bpe_llama3");
  EXPECT_EQ(llama.special_tokens().eod, llama.id_of("<|end_of_text|>"));
  EXPECT_EQ(llama.special_tokens().cls, llama.id_of("<|begin_of_text|>"));
}

TEST(HfTokenizerJson, PromptsStartWithWhatThePostProcessorPutsFirst) {
  Fixtures fixtures;
  const HfTokenizer& llama = fixtures.get("bpe_llama3");
  EXPECT_EQ(llama.prompt_start(), (std::vector<int32_t>{*llama.id_of("<|begin_of_text|>")}));
  // [CLS] goes first for BERT; [SEP] at the end is no part of a prompt.
  const HfTokenizer& bert = fixtures.get("wordpiece_bert");
  EXPECT_EQ(bert.prompt_start(), (std::vector<int32_t>{*bert.id_of("[CLS]")}));
  EXPECT_TRUE(fixtures.get("real_qwen2_5").prompt_start().empty());
}

// Damaged and hostile files: one line naming the file and the key.

const char* kSmallBpe = R"({
  "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
  "normalizer": null, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false,
  "trim_offsets": true, "use_regex": true}, "post_processor": null,
  "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
  "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
            "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
            "vocab": {"a": 0, "b": 1, "ab": 2, "Ġ": 3}, "merges": [["a", "b"]]}})";

std::string refusal(const std::string& json) {
  TempDir dir;
  const fs::path file = dir.write("tokenizer.json", json);
  return user_error_of([&] { load_hf_tokenizer(file.string()); });
}

std::string with(std::string json, const std::string& from, const std::string& to) {
  const auto at = json.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return json.replace(at, from.size(), to);
}

TEST(HfTokenizerJson, SmallBpeLoadsAndMerges) {
  TempDir dir;
  const auto t = load_hf_tokenizer(dir.write("tokenizer.json", kSmallBpe).string());
  EXPECT_EQ(t->encode("abba"), (std::vector<int32_t>{2, 1, 0}));
  EXPECT_EQ(t->decode(std::vector<int32_t>{2, 1, 0}), "abba");
}

TEST(HfTokenizerJson, RefusesAFileThatIsNotJson) {
  EXPECT_THAT(refusal("{\"model\": "), HasSubstr("is not valid JSON"));
}

TEST(HfTokenizerJson, RefusesAnUnknownComponentNamingItsKey) {
  const auto e = refusal(with(kSmallBpe, R"("normalizer": null)", R"("normalizer": {"type": "Frobnicate"})"));
  EXPECT_THAT(e, HasSubstr("tokenizer.json: normalizer.type: unknown normalizer 'Frobnicate'"));
}

TEST(HfTokenizerJson, RefusesASettingItDoesNotKnow) {
  const auto e = refusal(with(kSmallBpe, R"("fuse_unk": false)", R"("fuse_unk": false, "merge_everything": true)"));
  EXPECT_THAT(e, HasSubstr("model: has the setting 'merge_everything'"));
}

TEST(HfTokenizerJson, RefusesAMergeOfTokensNotInTheVocabulary) {
  const auto e = refusal(with(kSmallBpe, R"([["a", "b"]])", R"([["a", "z"]])"));
  EXPECT_THAT(e, HasSubstr("model.merges[0]: 'z' is not in the vocabulary"));
}

TEST(HfTokenizerJson, RefusesAHugeId) {
  const auto e = refusal(with(kSmallBpe, R"("ab": 2)", R"("ab": 1000000000)"));
  EXPECT_THAT(e, HasSubstr("has id 1000000000"));
}

TEST(HfTokenizerJson, RefusesAnIdGivenTwice) {
  const auto e = refusal(with(kSmallBpe, R"("ab": 2)", R"("ab": 1)"));
  EXPECT_THAT(e, HasSubstr("is given to two tokens"));
}

TEST(HfTokenizerJson, RefusesARegexThatDoesNotCompile) {
  const auto e = refusal(with(kSmallBpe, R"("pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false,
  "trim_offsets": true, "use_regex": true})",
                              R"("pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(unclosed"},
  "behavior": "Isolated", "invert": false})"));
  EXPECT_THAT(e, HasSubstr("pre_tokenizer.pattern.Regex: the regular expression '(unclosed' does not compile"));
}

TEST(HfTokenizerJson, RefusesDropoutWhichMakesIdsRandom) {
  EXPECT_THAT(refusal(with(kSmallBpe, R"("dropout": null)", R"("dropout": 0.1)")), HasSubstr("model.dropout"));
}

TEST(HfTokenizerJson, RefusesWrongTypes) {
  EXPECT_THAT(refusal(with(kSmallBpe, R"("merges": [["a", "b"]])", R"("merges": 7)")),
              HasSubstr("model.merges: must be an array"));
  EXPECT_THAT(refusal(with(kSmallBpe, R"("fuse_unk": false)", R"("fuse_unk": "no")")),
              HasSubstr("model.fuse_unk: must be true or false"));
}

TEST(HfTokenizerJson, RefusesATemplateNamingAnUnknownSpecialToken) {
  const auto e = refusal(with(kSmallBpe, R"("post_processor": null)",
                              R"("post_processor": {"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
      "pair": [], "special_tokens": {}})"));
  EXPECT_THAT(e, HasSubstr("'<s>' is not in special_tokens"));
}

TEST(HfTokenizerJson, RefusesSequencesNestedDeeperThanAnyRealFile) {
  std::string nested = R"({"type": "Lowercase"})";
  for (int i = 0; i < 2000; ++i) nested = R"({"type": "Sequence", "normalizers": [)" + nested + "]}";
  EXPECT_THAT(refusal(with(kSmallBpe, R"("normalizer": null)", R"("normalizer": )" + nested)),
              HasSubstr("nests components more than 64 deep"));
}

// Hostile sizes cost what real ones do per token: 20,000 added tokens (a trie, not a scan of
// them at each position) and a 100,000-character WordPiece word (no candidate longer than the
// longest token is looked up). The results are the ordinary ones.
TEST(HfTokenizerJson, ManyAddedTokensAndLongWordsStayLinear) {
  std::string added;
  for (int i = 0; i < 20000; ++i) {
    added += (i ? "," : "") + std::string(R"({"id": )") + std::to_string(4 + i) + R"(, "content": "<t)" +
             std::to_string(i) + R"(>", "single_word": false, "lstrip": true, "rstrip": true, "normalized": false, "special": true})";
  }
  const std::string json = with(kSmallBpe, R"("added_tokens": [])", R"("added_tokens": [)" + added + "]");
  TempDir dir;
  const auto t = load_hf_tokenizer(dir.write("tokenizer.json", json).string());
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "ab  <t19999>  <t4";  // "<t4" is no token's whole text
  const auto ids = t->encode(text);
  ASSERT_EQ(ids.size(), 40000u);
  EXPECT_EQ(ids[0], 2);          // "ab"; lstrip takes the spaces before the token,
  EXPECT_EQ(ids[1], 4 + 19999);  // rstrip those after it; "<t4" has no ids in this vocabulary

  const std::string wordpiece = R"({"model": {"type": "WordPiece", "unk_token": "[UNK]",
      "continuing_subword_prefix": "##", "max_input_chars_per_word": 1000000,
      "vocab": {"[UNK]": 0, "a": 1, "##a": 2, "##aa": 3}}})";
  const auto w = load_hf_tokenizer(dir.write("wp/tokenizer.json", wordpiece).string());
  const auto pieces = w->encode(std::string(100001, 'a'));
  ASSERT_EQ(pieces.size(), 1u + 50000u);
  EXPECT_EQ(pieces[0], 1);
  EXPECT_EQ(pieces[1], 3);
  EXPECT_EQ(pieces.back(), 3);
}

TEST(HfTokenizerJson, AVocabularyWithHolesCountsUpToItsLargestId) {
  const auto t = [&] {
    TempDir dir;
    return load_hf_tokenizer(dir.write("tokenizer.json", with(kSmallBpe, R"("ab": 2)", R"("ab": 9)")).string());
  }();
  EXPECT_EQ(t->vocab_size(), 10);
  EXPECT_EQ(t->token_text(9), "ab");
  EXPECT_EQ(t->encode("ab"), (std::vector<int32_t>{9}));
}

TEST(HfTokenizerJson, AnIdPastAnyIntegerIsRefusedAsItIsWritten) {
  EXPECT_THAT(refusal(with(kSmallBpe, R"("ab": 2)", R"("ab": 18446744073709551615)")),
              HasSubstr("has id 18446744073709551615"));
}

TEST(HfTokenizerJson, DecodeRefusesAnIdOutsideTheVocabulary) {
  TempDir dir;
  const auto t = load_hf_tokenizer(dir.write("tokenizer.json", kSmallBpe).string());
  EXPECT_THAT(user_error_of([&] { t->decode(std::vector<int32_t>{99}); }), HasSubstr("token id 99 is not in"));
}

TEST(HfTokenizerJson, AMissingFileSaysWhatIsExpected) {
  EXPECT_THAT(user_error_of([] { load_hf_tokenizer("/nonexistent/dir"); }),
              HasSubstr("a Hugging Face tokenizer is a tokenizer.json file or the directory that holds one"));
}

}  // namespace
}  // namespace megatron::data
