// `megatron generate` from the command line: a continuation from a trained checkpoint, seeds
// that reproduce sampled text, jsonl for a file of prompts, stop strings, tensor-parallel ranks
// that generate the tokens of one process, a Hugging Face round trip that generates the same, and
// bad input as one line with exit 2.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "cli/gpt2_checkpoint.hpp"
#include "cli/run_command.hpp"
#include "cli/tiny_job.hpp"
#include "support/temp_dir.hpp"
#include "tensor/make_backend.hpp"

namespace megatron::cli {
namespace generate_cli_test {

namespace fs = std::filesystem;

// Its largest logits are typically ~0.05 apart, f32 rounding differences between layouts ~1e-6:
// a greedy choice flips between layouts with a chance of about 1e-5 per token.
const fs::path& checkpoint() { return gpt2_checkpoint(); }

std::vector<nlohmann::json> jsonl(const std::string& text) {
  std::vector<nlohmann::json> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  }
  return out;
}

// What `generate CHECKPOINT_AND_FLAGS --prompt 'Mr. Darcy' --greedy` prints.
std::string greedy_text(const std::string& checkpoint_and_flags, int tokens) {
  const CommandResult r = run_megatron("generate " + checkpoint_and_flags + " --threads 1 --prompt 'Mr. Darcy' "
                                       "--max-tokens " + std::to_string(tokens) + " --greedy");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out;
}

fs::path prompts_file(const fs::path& dir) {
  const fs::path file = dir / "prompts.jsonl";
  std::ofstream(file) << R"({"prompt": "It is a truth universally acknowledged"})" << "\n"
                      << R"({"prompt": "Mr. Darcy"})" << "\n"
                      << R"({"prompt": "She was"})" << "\n";
  return file;
}

TEST(GenerateCli, PrintsThePromptAndItsContinuation) {
  const CommandResult r = run_megatron("generate " + checkpoint().string() + kGpt2 +
                                       " --threads 1 --prompt 'It is a truth' --max-tokens 12 --greedy");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(r.out.rfind("It is a truth", 0), 0u) << r.out;
  EXPECT_GT(r.out.size(), std::string("It is a truth\n").size()) << "no continuation";
  EXPECT_NE(r.err.find("decode 12 tokens"), std::string::npos) << r.err;
}

TEST(GenerateCli, TheSameSeedSamplesTheSameTextAndAnotherSeedOtherText) {
  const std::string base = "generate " + checkpoint().string() + kGpt2 +
                           " --threads 1 --prompt 'She was' --max-tokens 20 --ignore-eod --seed ";
  const CommandResult a = run_megatron(base + "5"), b = run_megatron(base + "5"), c = run_megatron(base + "6");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);
}

TEST(GenerateCli, APromptsFileGivesOneJsonLinePerPromptWithTokensAndLogprobs) {
  test_support::TempDir dir;
  const fs::path out = dir.path() / "sub" / "out.jsonl";
  const CommandResult r = run_megatron("generate " + checkpoint().string() + kGpt2 + " --threads 1 --prompts " +
                                       prompts_file(dir.path()).string() + " --max-tokens 6 --greedy --ignore-eod " +
                                       "--logprobs --batch-size 2 --output " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto lines = jsonl(slurp(out));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1]["prompt"], "Mr. Darcy");
  for (const auto& line : lines) {
    EXPECT_EQ(line["tokens"].size(), 6u);
    EXPECT_EQ(line["finish_reason"], "length");
    // Every token after the first: the prompt's and the generated ones; all log-probabilities.
    for (const auto& lp : line["logprobs"]) EXPECT_LE(lp.get<double>(), 0.0);
  }
  EXPECT_EQ(lines[2]["logprobs"].size(), 2u - 1u + 6u);  // "She was": 2 tokens
}

TEST(GenerateCli, AddBosStartsFromEndOfDocumentEvenWithoutAPrompt) {
  const std::string base = "generate " + checkpoint().string() + kGpt2 + " --threads 1 --max-tokens 4 --greedy --ignore-eod --logprobs";
  const CommandResult bare = run_megatron(base + " --add-bos");
  ASSERT_EQ(bare.exit_code, 0) << bare.err;
  EXPECT_GT(bare.out.size(), 1u);
  test_support::TempDir dir;
  const fs::path prompts = dir.path() / "p.jsonl", out = dir.path() / "out.jsonl";
  std::ofstream(prompts) << R"({"prompt": "She was"})" << "\n";
  ASSERT_EQ(run_megatron(base + " --add-bos --prompts " + prompts.string() + " --output " + out.string()).exit_code, 0);
  // "She was" is 2 tokens; with the end-of-document token first, 3: log-probabilities of 2 + 4.
  EXPECT_EQ(jsonl(slurp(out))[0]["logprobs"].size(), 6u);
}

TEST(GenerateCli, AStopStringEndsTheTextBeforeIt) {
  const std::string base = "generate " + checkpoint().string() + kGpt2 +
                           " --threads 1 --prompt 'It is a truth' --max-tokens 30 --greedy --ignore-eod";
  const CommandResult whole = run_megatron(base);
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  const std::string continuation = whole.out.substr(std::string("It is a truth").size());
  // Stop at the second character of the greedy continuation: it cannot appear in its first.
  ASSERT_GE(continuation.size(), 3u);
  const std::string stop(1, continuation[1]);
  if (stop == "'" || stop == "\n") GTEST_SKIP() << "the continuation's second character is hard to quote";
  const CommandResult cut = run_megatron(base + " --stop '" + stop + "'");
  ASSERT_EQ(cut.exit_code, 0) << cut.err;
  EXPECT_EQ(cut.out, "It is a truth" + continuation.substr(0, continuation.find(stop)) + "\n");
}

TEST(GenerateCli, TwoTensorParallelRanksGenerateTheTokensOfOneProcess) {
  test_support::TempDir dir;
  const fs::path prompts = prompts_file(dir.path());
  std::vector<std::vector<nlohmann::json>> runs;
  for (const std::string launch : {"--threads 1", "--nproc 2"}) {
    const fs::path out = dir.path() / (launch == "--nproc 2" ? "tp2.jsonl" : "tp1.jsonl");
    const CommandResult r = run_job("generate " + checkpoint().string() + kGpt2 + launch + " --prompts " +
                                    prompts.string() + " --max-tokens 10 --greedy --ignore-eod --logprobs --output " +
                                    out.string());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    runs.push_back(jsonl(slurp(out)));
  }
  ASSERT_EQ(runs[0].size(), 3u);
  ASSERT_EQ(runs[1].size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(runs[0][i]["tokens"], runs[1][i]["tokens"]) << "prompt " << i;
    // The same model split two ways: f32 sums in other orders, ~1e-6 of log-probabilities ~10.
    for (size_t t = 0; t < runs[0][i]["logprobs"].size(); ++t) {
      EXPECT_NEAR(runs[0][i]["logprobs"][t].get<double>(), runs[1][i]["logprobs"][t].get<double>(), 1e-4);
    }
  }
}

TEST(GenerateCli, AHuggingFaceRoundTripGeneratesTheSameText) {
  test_support::TempDir dir;
  const fs::path hf = dir.path() / "hf", imported = dir.path() / "imported";
  ASSERT_EQ(run_megatron("convert --to hf --load " + checkpoint().string() + " --save " + hf.string()).exit_code, 0);
  ASSERT_EQ(run_megatron("convert --from hf --load " + hf.string() + " --save " + imported.string()).exit_code, 0);
  EXPECT_EQ(greedy_text(checkpoint().string() + kGpt2, 12), greedy_text(imported.string() + kGpt2, 12));
}

TEST(GenerateCli, ResultsReachDevStdoutAndATinyTemperatureWithTheLargestSeedIsGreedy) {
  test_support::TempDir dir;
  const std::string base = "generate " + checkpoint().string() + kGpt2 + " --threads 1 --max-tokens 4 --ignore-eod --prompts " +
                           prompts_file(dir.path()).string();
  const CommandResult tiny =
      run_megatron(base + " --temperature 1e-46 --seed 18446744073709551615 --output /dev/stdout");
  ASSERT_EQ(tiny.exit_code, 0) << tiny.err;
  const CommandResult greedy = run_megatron(base + " --greedy");
  ASSERT_EQ(greedy.exit_code, 0) << greedy.err;
  EXPECT_EQ(jsonl(tiny.out).size(), 3u) << tiny.out;
  EXPECT_EQ(tiny.out, greedy.out);
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status("/dev/stdout")));
}

TEST(GenerateCli, BadInputIsOneLineAndExitTwo) {
  test_support::TempDir dir;
  const fs::path empty = dir.path() / "empty.jsonl";
  std::ofstream(empty) << "\n";
  const fs::path prompts = dir.path() / "p.jsonl";
  std::ofstream(prompts) << R"({"prompt": "She was"})" << "\n";
  const std::string ckpt = checkpoint().string() + kGpt2;
  const std::string long_prompt(2000, 'a');
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"generate " + ckpt + " --max-tokens 4", "give one of --prompt"},
      {"generate " + ckpt + " --prompt x --top-k 3 --top-p 0.5", "cannot be used together"},
      {"generate " + ckpt + " --prompt " + long_prompt, "positions"},
      {"generate " + ckpt + " --prompts " + empty.string(), "no prompts"},
      {"generate " + ckpt + " --prompt x --temperature -1", "temperature"},
      {"generate " + ckpt + " --prompt x --temperature nan", "temperature"},
      {"generate " + ckpt + " --prompt x --top-p nan", "top-p"},
      {"generate " + ckpt + " --prompt x --seed -1", "--seed: -1 is not a whole number from 0"},
      {"generate " + ckpt + " --prompt x --seed 18446744073709551616",
       "--seed: 18446744073709551616 is not a whole number from 0 to 18446744073709551615"},
      {"generate " + ckpt + " --prompts " + prompts.string() + " --output " + (dir.path() / "." / "p.jsonl").string(),
       "--output " + (dir.path() / "." / "p.jsonl").string() + " and --prompts " + prompts.string() + " are the same file"},
      {"generate " + (dir.path() / "nothing").string() + kGpt2 + " --prompt x", "no checkpoint there"},
  };
  for (const auto& [args, message] : cases) {
    const CommandResult r = run_megatron(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

}  // namespace generate_cli_test
}  // namespace megatron::cli

namespace megatron::cli {
namespace generate_cli_test {

TEST(GenerateCli, TheKvCacheHoldsWhatThePlanCountsForIt) {
  const CommandResult plan = run_megatron("plan recipes/gpt-tiny.yaml model.num_layers=2 --json");
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  const double per_token = nlohmann::json::parse(plan.out)["generation"]["kv_cache_bytes_per_token"];
  const CommandResult r = run_megatron("generate " + checkpoint().string() + kGpt2 +
                                       " --threads 1 --prompt 'It is a truth' --max-tokens 3 --greedy");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // "It is a truth": 4 tokens, and 3 more: a cache of 7 positions for 1 sequence.
  EXPECT_NE(r.err.find(fmt::format("KV cache: {} bytes on this rank for 1 sequence of 7 positions",
                                   int64_t(per_token) * 7)),
            std::string::npos)
      << r.err;
}

}  // namespace generate_cli_test
}  // namespace megatron::cli

namespace megatron::cli {
namespace generate_cli_test {

TEST(GenerateCli, AHuggingFaceExportCarriesItsTokenizerAndItsImportGeneratesWithoutTokenizerFlags) {
  test_support::TempDir dir;
  const std::string vocab = std::string(MEGATRON_SOURCE_DIR) + "/data/tokenizers/gpt2/vocab.json";
  const std::string merges = std::string(MEGATRON_SOURCE_DIR) + "/data/tokenizers/gpt2/merges.txt";
  const fs::path ckpt = dir.path() / "ckpt", hf = dir.path() / "hf", imported = dir.path() / "imported";
  ASSERT_EQ(run_megatron("run --threads 1 recipes/gpt-tiny.yaml model.num_layers=1 training.train_iters=1 "
                         "training.lr_warmup_iters=0 eval.interval=null generation.stop_token_ids=[13] "
                         "data.vocab_file=" + vocab +
                         " data.merge_file=" + merges + " checkpoint.save=" + ckpt.string() +
                         " --run-dir " + (dir.path() / "run").string())
                .exit_code,
            0);
  const CommandResult exported = run_megatron("convert --to hf --load " + ckpt.string() + " --save " + hf.string());
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_EQ(slurp(hf / "vocab.json"), slurp(vocab));
  EXPECT_EQ(slurp(hf / "merges.txt"), slurp(merges));
  const auto config = nlohmann::json::parse(slurp(hf / "tokenizer_config.json"));
  EXPECT_EQ(config["tokenizer_class"], "GPT2Tokenizer");
  EXPECT_EQ(config["eos_token"], "<|endoftext|>");
  // transformers' generate() stops where ours does: at <|endoftext|> and the recipe's stop ids.
  EXPECT_EQ(nlohmann::json::parse(slurp(hf / "generation_config.json")),
            nlohmann::json::parse(R"({"eos_token_id": [50256, 13]})"));
  ASSERT_EQ(run_megatron("convert --from hf --load " + hf.string() + " --save " + imported.string()).exit_code, 0);
  EXPECT_EQ(greedy_text(ckpt.string(), 5), greedy_text(imported.string(), 5));
}

TEST(GenerateCli, AnExportWhoseTokenizerFileIsDamagedIsRefusedBeforeItWritesAnything) {
  test_support::TempDir dir;
  const fs::path vocab = dir.path() / "vocab.json", ckpt = dir.path() / "ckpt", hf = dir.path() / "hf";
  fs::copy_file(std::string(MEGATRON_SOURCE_DIR) + "/data/tokenizers/gpt2/vocab.json", vocab);
  ASSERT_EQ(run_megatron("run --threads 1 recipes/gpt-tiny.yaml model.num_layers=1 training.train_iters=1 "
                         "training.lr_warmup_iters=0 eval.interval=null data.vocab_file=" + vocab.string() +
                         " data.merge_file=" + MEGATRON_SOURCE_DIR + "/data/tokenizers/gpt2/merges.txt "
                         "checkpoint.save=" + ckpt.string() + " --run-dir " + (dir.path() / "run").string())
                .exit_code,
            0);
  std::ofstream(vocab, std::ios::trunc) << R"({"!": 0, "\"": 7})";  // truncated, ids out of range
  const CommandResult r = run_megatron("convert --to hf --load " + ckpt.string() + " --save " + hf.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(vocab.string()), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(hf)) << "no half-written model directory";
}

TEST(GenerateCli, AnExportWithoutTokenizerFilesSaysSoAndStillWritesTheModel) {
  test_support::TempDir dir;
  const CommandResult r = run_megatron("convert --to hf --load " + checkpoint().string() + " --save " +
                                       (dir.path() / "hf").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("AutoTokenizer will not load"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(dir.path() / "hf" / "model.safetensors"));
  EXPECT_FALSE(fs::exists(dir.path() / "hf" / "tokenizer_config.json"));
  EXPECT_FALSE(fs::exists(dir.path() / "hf" / "generation_config.json")) << "no end token known";
}

}  // namespace generate_cli_test
}  // namespace megatron::cli

namespace megatron::cli {
namespace generate_cli_test {

// On a GPU (scripts/gpu-check.sh runs the Cuda* suites): the CUDA backend's prefill (flash
// attention) and decode (cached_attention.cu) give the greedy tokens of the CPU, and
// log-probabilities within 1e-4 (f32 math, other summation orders; TF32 off).
// The recipe's generation section (a Hugging Face import's generation_config.json): its end
// tokens stop a sequence as end-of-document does, and its sampling applies when no flag names one.
std::vector<nlohmann::json> generated(const std::string& flags, const fs::path& dir) {
  const fs::path prompts = dir / "one.jsonl";
  std::ofstream(prompts) << R"({"prompt": "Mr. Darcy"})" << "\n";
  const CommandResult r = run_megatron("generate " + checkpoint().string() + kGpt2 +
                                       " --threads 1 --prompts " + prompts.string() +
                                       " --max-tokens 12 " + flags);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return jsonl(r.out);
}

TEST(GenerateCli, TheRecipesStopTokenIdsEndASequenceAndAreLeftOutOfItsText) {
  test_support::TempDir dir;
  // Sampled (the seed fixes the draws): the tiny model's greedy text repeats one token.
  const auto free = generated("--seed 5 --ignore-eod", dir.path());
  ASSERT_EQ(free.size(), 1u);
  const std::vector<int32_t> tokens = free[0]["tokens"].get<std::vector<int32_t>>();
  ASSERT_EQ(tokens.size(), 12u);
  // The first token that does not occur before it: the sequence ends just before it.
  size_t at = 1;
  while (at < tokens.size() && std::find(tokens.begin(), tokens.begin() + at, tokens[at]) != tokens.begin() + at) ++at;
  ASSERT_LT(at, tokens.size());
  const auto stopped = generated(fmt::format("--seed 5 generation.stop_token_ids=[{}]", tokens[at]), dir.path());
  ASSERT_EQ(stopped.size(), 1u);
  EXPECT_EQ(stopped[0]["tokens"].get<std::vector<int32_t>>(),
            std::vector<int32_t>(tokens.begin(), tokens.begin() + at));
  EXPECT_EQ(stopped[0]["finish_reason"], "stop");
  // --ignore-eod keeps going past them too.
  EXPECT_EQ(generated(fmt::format("--seed 5 --ignore-eod generation.stop_token_ids=[{}]", tokens[at]),
                      dir.path())[0]["tokens"],
            free[0]["tokens"]);
}

TEST(GenerateCli, TheRecipesSamplingAppliesUnlessAFlagNamesOne) {
  test_support::TempDir dir;
  const auto greedy = generated("--greedy --ignore-eod", dir.path());
  // No flag: the recipe's do_sample false is greedy, where the command's own default samples.
  EXPECT_EQ(generated("--ignore-eod generation.do_sample=false", dir.path())[0]["tokens"],
            greedy[0]["tokens"]);
  EXPECT_NE(generated("--ignore-eod", dir.path())[0]["tokens"], greedy[0]["tokens"]);
  // A flag wins: --temperature 1 samples as the command's default does, whatever the recipe says.
  EXPECT_EQ(generated("--ignore-eod --temperature 1 generation.do_sample=false", dir.path())[0]["tokens"],
            generated("--ignore-eod", dir.path())[0]["tokens"]);
}

TEST(GenerateCli, ARecipeStopTokenPastTheVocabularyIsOneLineAndExitTwo) {
  const CommandResult r = run_megatron("generate " + checkpoint().string() + kGpt2 +
                                       " --prompt 'Mr. Darcy' --max-tokens 2 generation.stop_token_ids=[50257]");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("generation.stop_token_ids holds 50257, past the tokenizer's 50257 tokens"),
            std::string::npos)
      << r.err;
}

TEST(GenerateCli, AChatTemplateMakesEachPromptAUserTurnFollowedByTheAssistantsHeader) {
  test_support::TempDir dir;
  const fs::path as_chat = dir.path() / "chat.jsonl", by_hand = dir.path() / "hand.jsonl";
  std::ofstream(as_chat) << R"({"prompt": "Mr. Darcy?"})" << "\n";
  std::ofstream(by_hand) << nlohmann::json{{"prompt", "<|im_start|>user\nMr. Darcy?<|im_end|>\n<|im_start|>assistant\n"}}.dump() << "\n";
  const auto run = [&](const fs::path& prompts, const std::string& flags) {
    const CommandResult r = run_megatron("generate " + checkpoint().string() + kGpt2 + " --threads 1 --prompts " +
                                         prompts.string() + " --max-tokens 4 --greedy --ignore-eod " + flags);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    // The prompt's tokens, and what follows them.
    const size_t at = r.err.find("prefill ");
    return r.err.substr(at, r.err.find(" tokens", at) - at) + " " + jsonl(r.out).at(0)["tokens"].dump();
  };
  EXPECT_EQ(run(as_chat, "--chat-template chatml"), run(by_hand, ""));
  const CommandResult bad = run_megatron("generate " + checkpoint().string() + kGpt2 +
                                         " --prompt x --chat-template llama2");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("chat template \"llama2\" is not one of chatml, plain, qwen2.5"), std::string::npos)
      << bad.err;
}

TEST(CudaGenerate, GreedyTokensAndLogprobsAreTheCpus) {
  if (tensor::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device on this machine: GPU test skipped";
  test_support::TempDir dir;
  const fs::path prompts = dir.path() / "prompts.jsonl";
  std::ofstream(prompts) << R"({"prompt": "It is a truth universally acknowledged"})" << "\n"
                         << R"({"prompt": "She"})" << "\n";
  std::vector<nlohmann::json> runs[2];
  for (int i = 0; i < 2; ++i) {
    const fs::path out = dir.path() / (i == 0 ? "cpu.jsonl" : "cuda.jsonl");
    const CommandResult r = run_megatron("generate " + checkpoint().string() + kGpt2 + " precision.allow_tf32=false --device " +
                                         (i == 0 ? "cpu" : "cuda") + " --prompts " + prompts.string() +
                                         " --max-tokens 12 --greedy --ignore-eod --logprobs --output " + out.string());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    runs[i] = jsonl(slurp(out));
  }
  ASSERT_EQ(runs[0].size(), 2u);
  ASSERT_EQ(runs[1].size(), 2u);
  for (size_t p = 0; p < 2; ++p) {
    EXPECT_EQ(runs[0][p]["tokens"], runs[1][p]["tokens"]) << "prompt " << p;
    for (size_t t = 0; t < runs[0][p]["logprobs"].size(); ++t) {
      EXPECT_NEAR(runs[0][p]["logprobs"][t].get<double>(), runs[1][p]["logprobs"][t].get<double>(), 1e-4);
    }
  }
}

}  // namespace generate_cli_test
}  // namespace megatron::cli
