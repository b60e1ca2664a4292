// Labelled text for classification fine-tuning: jsonl and Megatron's GLUE layouts read as its
// tasks/ read them (and checked where they enter), and BERT's [CLS] A [SEP] B [SEP] inputs
// built, trimmed and padded as tasks/data_utils builds them.
#include "data/classification_data.hpp"

#include <gtest/gtest.h>

#include "core/error.hpp"
#include "support/temp_dir.hpp"
#include "support/user_error.hpp"

namespace megatron::data {
namespace classification_data_test {

const Tokenizer& bert() {
  static const std::unique_ptr<Tokenizer> t = make_tokenizer(
      data::TokenizerKind::BertWordPieceLowerCase,
      {.vocab_file = std::string(MEGATRON_SOURCE_DIR) + "/data/tokenizers/bert-base-uncased/vocab.txt"});
  return *t;
}

std::string error_of(const std::function<void()>& f) { return test_support::user_error_of(f); }

TEST(CleanText, NewlinesAndRunsOfSpaceBecomeOneSpaceAndLooseFullStopsCloseUp) {
  EXPECT_EQ(clean_text("It was\n\ncold .  Very   cold . . The end"), "It was cold. Very cold.. The end");
  EXPECT_EQ(clean_text("a\tb"), "a b");
}

TEST(LabelledJsonl, ClassNamesAreTheFilesSortedLabelsUnlessGiven) {
  test_support::TempDir dir;
  const std::string path = dir.write("s.jsonl", "{\"text\": \"good\", \"label\": \"pos\"}\n"
                                                "{\"text\": \"bad\", \"label\": \"neg\"}\n").string();
  const ClassificationSet set = read_labelled_jsonl(path, {});
  EXPECT_EQ(set.labels, (std::vector<std::string>{"neg", "pos"}));
  ASSERT_EQ(set.rows.size(), 2u);
  EXPECT_EQ(set.rows[0].label, 1);
  EXPECT_EQ(set.rows[1].label, 0);
  const ClassificationSet given = read_labelled_jsonl(path, {}, {"pos", "neg"});
  EXPECT_EQ(given.rows[0].label, 0);
}

TEST(LabelledJsonl, IdsNeedNamedClassesAndUnknownNamesAreRefusedWithTheirLine) {
  test_support::TempDir dir;
  const std::string ids = dir.write("i.jsonl", "{\"text\": \"good\", \"label\": 1}\n").string();
  EXPECT_EQ(read_labelled_jsonl(ids, {}, {"neg", "pos"}).rows[0].label, 1);
  EXPECT_NE(error_of([&] { read_labelled_jsonl(ids, {}); }).find(ids + ":1: field \"label\" = 1 is not a class"),
            std::string::npos);
  const std::string bad = dir.write("b.jsonl", "{\"text\": \"a\", \"label\": \"pos\"}\n"
                                               "{\"text\": \"b\", \"label\": \"meh\"}\n").string();
  EXPECT_EQ(error_of([&] { read_labelled_jsonl(bad, {}, {"neg", "pos"}); }),
            bad + ":2: field \"label\" = \"meh\" is not one of the classes neg, pos");
  const std::string missing = dir.write("m.jsonl", "{\"review\": \"a\", \"label\": \"pos\"}\n").string();
  EXPECT_NE(error_of([&] { read_labelled_jsonl(missing, {}); }).find(missing + ":1: no field \"text\""),
            std::string::npos);
}

TEST(LabelledJsonl, TheBundledSentimentSetHasTwoClassesAndItsCounts) {
  const ClassificationSet train =
      read_labelled_jsonl(std::string(MEGATRON_SOURCE_DIR) + "/data/eval/fine_foods_train.jsonl", {});
  EXPECT_EQ(train.labels, (std::vector<std::string>{"great", "other"}));
  EXPECT_EQ(train.rows.size(), 4000u);
  EXPECT_EQ(std::count_if(train.rows.begin(), train.rows.end(), [](const auto& r) { return r.label == 0; }), 2600);
}

const std::string kMnliHeader =
    "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
    "sentence1_parse\tsentence2_parse\tsentence1\tsentence2\tlabel1\tgold_label\n";

std::string mnli_row(const std::string& a, const std::string& b, const std::string& label) {
  return "0\t1\t2\tfiction\tx\tx\tx\tx\t" + a + "\t" + b + "\tneutral\t" + label + "\n";
}

TEST(Glue, MnliReadsColumnsEightAndNineAndTheLastLabel) {
  test_support::TempDir dir;
  const std::string path =
      dir.write("dev.tsv", kMnliHeader + mnli_row("A man   sleeps . Then", "He rests", "entailment") +
                               mnli_row("x", "y", "contradiction")).string();
  const ClassificationSet set = read_glue(path, GlueTask::Mnli);
  ASSERT_EQ(set.rows.size(), 2u);
  EXPECT_EQ(set.rows[0].text_a, "A man sleeps. Then");  // clean_text
  EXPECT_EQ(set.rows[0].text_b, "He rests");
  EXPECT_EQ(set.rows[0].label, 1);  // contradiction 0, entailment 1, neutral 2
  EXPECT_EQ(set.rows[1].label, 0);
  const std::string bad = dir.write("bad.tsv", kMnliHeader + mnli_row("x", "y", "maybe")).string();
  EXPECT_EQ(error_of([&] { read_glue(bad, GlueTask::Mnli); }),
            bad + ":2: label \"maybe\" is not contradiction, entailment or neutral");
}

TEST(Glue, AnMnliTestFileHasTenColumnsAndEveryLabelIsContradiction) {
  test_support::TempDir dir;
  const std::string path = dir.write("test.tsv", "i\tp\tq\tg\tb1\tb2\tp1\tp2\ts1\ts2\n"
                                                 "0\t1\t2\tg\tx\tx\tx\tx\tA\tB\n").string();
  const ClassificationSet set = read_glue(path, GlueTask::Mnli);
  ASSERT_EQ(set.rows.size(), 1u);
  EXPECT_EQ(set.rows[0].label, 0);
}

TEST(Glue, QqpSkipsAndCountsMalformedRowsAsMegatronDoes) {
  test_support::TempDir dir;
  const std::string path = dir.write("train.tsv", "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
                                                  "1\t2\t3\tHow old?\tWhat age?\t1\n"
                                                  "2\t4\t5\tbroken row\n"
                                                  "3\t6\t7\tWhy?\tHow?\t0\n").string();
  const ClassificationSet set = read_glue(path, GlueTask::Qqp);
  ASSERT_EQ(set.rows.size(), 2u);
  EXPECT_EQ(set.skipped, 1);
  EXPECT_EQ(set.rows[0].label, 1);
  EXPECT_EQ(set.rows[1].text_a, "Why?");
  const std::string test = dir.write("test.tsv", "id\tquestion1\tquestion2\n7\tA?\tB?\n").string();
  EXPECT_EQ(read_glue(test, GlueTask::Qqp).rows[0].label, 0);
}

TEST(BertClassificationSample, APairIsClsASepBSepWithTypesAndPadding) {
  const LabelledText row{.text_a = "the cat", .text_b = "a dog", .label = 2};
  const Sample s = bert_classification_sample(row, bert(), 10);
  const SpecialTokens& t = bert().special_tokens();
  const std::vector<int32_t> a = bert().encode("the cat"), b = bert().encode("a dog");
  std::vector<int32_t> ids = {*t.cls};
  ids.insert(ids.end(), a.begin(), a.end());
  ids.push_back(*t.sep);
  ids.insert(ids.end(), b.begin(), b.end());
  ids.push_back(*t.sep);
  ASSERT_EQ(s.valid_length, int32_t(ids.size()));
  ids.resize(10, *t.pad);
  EXPECT_EQ(s.tokens, ids);
  EXPECT_EQ(s.token_types, (std::vector<int32_t>{0, 0, 0, 0, 1, 1, 1, 0, 0, 0}));
  EXPECT_EQ(s.sentence_order, 2);
  EXPECT_EQ(s.loss_mask, std::vector<float>(10, 0.0f));
}

TEST(BertClassificationSample, ALongTextIsCutToEndInSepAtTheSequenceLength) {
  const Sample single = bert_classification_sample({.text_a = "one two three four five six seven"}, bert(), 5);
  const SpecialTokens& t = bert().special_tokens();
  EXPECT_EQ(single.valid_length, 5);
  EXPECT_EQ(single.tokens.front(), *t.cls);
  EXPECT_EQ(single.tokens.back(), *t.sep);
  EXPECT_EQ(single.token_types, std::vector<int32_t>(5, 0));
  const Sample pair = bert_classification_sample({.text_a = "one", .text_b = "two three four five six"}, bert(), 6);
  EXPECT_EQ(pair.tokens.back(), *t.sep);
  EXPECT_EQ(pair.token_types, (std::vector<int32_t>{0, 0, 0, 1, 1, 1}));
  // A single text that fits ends in its one [SEP].
  const Sample fits = bert_classification_sample({.text_a = "one"}, bert(), 6);
  EXPECT_EQ(fits.valid_length, 3);
}

}  // namespace classification_data_test
}  // namespace megatron::data
