// Generative fine-tuning from the command line on small constructed data: a GPT instruction-tuned
// on prompt/response pairs and a T5 tuned on source/target pairs learn their answers, and
// `megatron eval --task generation` reproduces them greedily, the same on other layouts; recipes
// whose fine-tuning keys cannot act are refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/run_command.hpp"
#include "cli/tiny_job.hpp"
#include "support/temp_dir.hpp"

namespace megatron::cli {
namespace generation_finetune_test {

using ::testing::HasSubstr;
using ::testing::Not;

const std::string kSource = MEGATRON_SOURCE_DIR;

// Eight questions, each answered by one word no other question shares.
const char* const kPairs[][2] = {{"colour of the sky", "blue"},    {"colour of grass", "green"},
                                 {"opposite of hot", "cold"},      {"number after one", "two"},
                                 {"animal that barks", "dog"},     {"capital of France", "Paris"},
                                 {"first month", "January"},       {"largest planet", "Jupiter"}};

std::string prompt_response_jsonl() {
  std::string out;
  for (const auto& [question, answer] : kPairs) {
    out += nlohmann::json{{"prompt", std::string("Q: ") + question + "?\nA:"},
                          {"response", std::string(" ") + answer}}.dump() + "\n";
  }
  return out;
}

std::string source_target_jsonl() {
  std::string out;
  for (const auto& [question, answer] : kPairs) {
    out += nlohmann::json{{"source", question}, {"target", answer}}.dump() + "\n";
  }
  return out;
}

nlohmann::json read_json(const std::filesystem::path& file) { return nlohmann::json::parse(slurp(file)); }

std::vector<std::string> predictions(const nlohmann::json& results) {
  std::vector<std::string> out;
  for (const auto& g : results["generations"]["generation"]) out.push_back(g["prediction"]);
  return out;
}

// The tiny GPT shrunk to a few seconds of training; its tokenizer is GPT-2's.
const std::string kGpt = "recipes/gpt-tiny.yaml model.num_layers=2 model.hidden_size=64 "
                         "data.mock=false data.prefixes=[] data.seq_length=32 "
                         "data.vocab_file=" + kSource + "/data/tokenizers/gpt2/vocab.json "
                         "data.merge_file=" + kSource + "/data/tokenizers/gpt2/merges.txt "
                         "training.micro_batch_size=4 training.global_batch_size=8 "
                         "training.lr=3e-3 training.min_lr=3e-4 training.lr_warmup_iters=2 "
                         "logging.interval=10 eval.interval=null ";

TEST(GenerationFinetune, AnInstructionTunedGptAnswersItsPromptsOnEveryLayout) {
  test_support::TempDir dir;
  const std::string data = dir.write("qa.jsonl", prompt_response_jsonl()).string();
  const auto ckpt = dir.path() / "sft";
  const CommandResult run =
      run_megatron("run " + kGpt + "finetune.format=sft finetune.train_data=" + data + " finetune.valid_data=" +
                   data + " training.train_iters=60 --threads 1 checkpoint.save=" + ckpt.string() + " --run-dir " +
                   (dir.path() / "run").string());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  // Eight examples packed into sequences of 33 tokens; only the answers (and each end of
  // document) are scored.
  EXPECT_THAT(run.out, HasSubstr("(8 examples, "));
  for (const std::string layout : {"", "--nproc 2 parallel.pipeline=2", "--nproc 2"}) {
    SCOPED_TRACE(layout);
    const auto json = dir.path() / ("eval" + std::to_string(layout.size()) + ".json");  // eval0.json: one process
    const CommandResult eval = run_job("eval " + ckpt.string() + " --task generation --data " + data +
                                       " --answer-field response --max-tokens 4 --batch-size 3 --threads 1 --json " +
                                            json.string() + " " + layout);
    ASSERT_EQ(eval.exit_code, 0) << eval.err;
    const nlohmann::json results = read_json(json);
    // Memorised: the greedy answers are the responses.
    EXPECT_GE(results["results"]["generation"]["exact_match,none"].get<double>(), 0.75) << results.dump();
    static const std::vector<std::string> first = predictions(results);
    EXPECT_EQ(predictions(results), first);
  }
  // Drawn outputs depend on the seed and the prompt, not on the batch or the layout (the
  // tensor-parallel shards' logits are gathered before each draw).
  std::vector<std::string> drawn[2];
  for (int i = 0; i < 2; ++i) {
    const auto json = dir.path() / ("sampled" + std::to_string(i) + ".json");
    const CommandResult eval = run_job(
        "eval " + ckpt.string() + " --task generation --data " + data +
        " --answer-field response --max-tokens 4 --temperature 5 --seed 7 --threads 1 --json " + json.string() +
        (i == 0 ? " --batch-size 3" : " --batch-size 8 --nproc 2 parallel.tensor=2"));
    ASSERT_EQ(eval.exit_code, 0) << eval.err;
    drawn[i] = predictions(read_json(json));
  }
  EXPECT_EQ(drawn[0], drawn[1]);
  EXPECT_NE(drawn[0], predictions(read_json(dir.path() / "eval0.json")));  // a hot draw is not the argmax
  const CommandResult shaped_greedy = run_megatron("eval " + ckpt.string() + " --task generation --data " +
                                                   data + " --top-k 3");
  EXPECT_EQ(shaped_greedy.exit_code, 2);
  EXPECT_THAT(shaped_greedy.err, HasSubstr("give --temperature too"));
  // 32 outputs fill the model's 32 positions: refused before the model is built.
  const CommandResult no_room = run_megatron("eval " + ckpt.string() + " --task generation --data " + data +
                                             " --answer-field response --max-tokens 32");
  EXPECT_EQ(no_room.exit_code, 2);
  EXPECT_THAT(no_room.err, HasSubstr("--max-tokens 32 leaves no room for a prompt in the model's 32 positions"));
  EXPECT_THAT(no_room.out, Not(HasSubstr("megatron eval")));  // the model was never loaded
  const CommandResult negative_seed = run_megatron("eval " + ckpt.string() + " --task generation --data " +
                                                   data + " --temperature 1 --seed -5");
  EXPECT_EQ(negative_seed.exit_code, 2);
  EXPECT_THAT(negative_seed.err, HasSubstr("--seed"));
}

TEST(GenerationFinetune, ASeq2SeqTunedT5DecodesItsTargetsAndScoresThemWithBleuAndChrf) {
  test_support::TempDir dir;
  const std::string data = dir.write("pairs.jsonl", source_target_jsonl()).string();
  const auto ckpt = dir.path() / "t5";
  const CommandResult run = run_megatron(
      "run recipes/t5-tiny.yaml data.prefixes=[] data.seq_length=12 data.decoder_seq_length=8 "
      "model.max_position_embeddings=12 model.hidden_size=64 model.ffn_hidden_size=256 "
      "finetune.format=seq2seq finetune.train_data=" + data +
      " training.micro_batch_size=4 training.global_batch_size=8 training.train_iters=80 training.lr=3e-3 "
      "logging.interval=20 eval.interval=null --threads 1 checkpoint.save=" + ckpt.string() +
      " --run-dir " + (dir.path() / "run").string());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("(8 pairs)"));
  const auto json = dir.path() / "eval.json";
  const CommandResult eval =
      run_megatron("eval " + ckpt.string() + " --task generation --data " + data +
                   " --prompt-field source --answer-field target --metrics exact_match,bleu,chrf "
                   "--max-tokens 6 --batch-size 4 --threads 1 --json " + json.string());
  ASSERT_EQ(eval.exit_code, 0) << eval.err;
  const nlohmann::json r = read_json(json)["results"]["generation"];
  EXPECT_GE(r["exact_match,none"].get<double>(), 0.75) << r.dump();
  EXPECT_GE(r["chrf,none"].get<double>(), 75.0) << r.dump();
  EXPECT_TRUE(r.contains("bleu,none"));
  EXPECT_FALSE(r.contains("f1,none"));  // only the metrics asked for
}

TEST(GenerationFinetune, KeysOfAnotherFormatAndFormatsOfAnotherFamilyAreRefused) {
  test_support::TempDir dir;
  const std::string data = dir.write("qa.jsonl", prompt_response_jsonl()).string();
  const CommandResult chat_key = run_megatron("plan " + kGpt + "finetune.format=sft finetune.train_data=" +
                                              data + " finetune.chat_template=plain");
  EXPECT_EQ(chat_key.exit_code, 2);
  EXPECT_THAT(chat_key.err, HasSubstr("finetune.chat_template is not read by finetune.format: sft"));
  const CommandResult t5_sft = run_megatron("plan recipes/t5-tiny.yaml data.prefixes=[] finetune.format=sft "
                                            "finetune.train_data=" + data);
  EXPECT_EQ(t5_sft.exit_code, 2);
  EXPECT_THAT(t5_sft.err, HasSubstr("finetune.format: sft trains a gpt model"));
  const CommandResult no_data = run_megatron("plan " + kGpt + "finetune.pack=false");
  EXPECT_EQ(no_data.exit_code, 2);
  EXPECT_THAT(no_data.err, HasSubstr("finetune.pack belongs to fine-tuning"));
}

TEST(GenerationFinetune, AMalformedExampleStopsTheRunNamingItsLine) {
  test_support::TempDir dir;
  const std::string data =
      dir.write("qa.jsonl", prompt_response_jsonl() + "{\"prompt\": \"Q: ?\", \"response\": 7}\n").string();
  const CommandResult r = run_megatron("run " + kGpt + "finetune.format=sft finetune.train_data=" + data +
                                       " training.train_iters=3 --run-dir " + (dir.path() / "run").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr(data + ":9"));
  EXPECT_THAT(r.err, HasSubstr("response"));
}

TEST(GenerationFinetune, DataWhoseResponsesAllFallPastTheSequenceIsRefused) {
  test_support::TempDir dir;
  const std::string data =
      dir.write("long.jsonl", "{\"prompt\": \"a prompt far longer than four tokens\", \"response\": \" x\"}\n").string();
  const CommandResult r = run_megatron("run " + kGpt + "data.seq_length=4 finetune.format=sft finetune.train_data=" +
                                       data + " training.train_iters=3 --run-dir " + (dir.path() / "run").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr(data + ": no example keeps a response token within data.seq_length + 1 = 5"));
}

}  // namespace generation_finetune_test
}  // namespace megatron::cli
