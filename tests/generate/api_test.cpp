// The server's request formats as parsed: Megatron's PUT /api fields turn into the generation
// options they name (defaults, sampling, stop flags, add_BOS, seeds), OpenAI's completions
// fields likewise (greedy at temperature 0, top_p 1 off, prompt forms, logprobs), and the
// answers carry what each client reads.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <limits>

#include "data/tokenizer.hpp"
#include "generate/api.hpp"
#include "generate/sampling.hpp"

namespace megatron::generate {
namespace api_test {

using nlohmann::json;

const data::Tokenizer& gpt2() {
  static const auto t = data::make_tokenizer(
      data::TokenizerKind::Gpt2Bpe,
      {.vocab_file = std::string(MEGATRON_SOURCE_DIR) + "/data/tokenizers/gpt2/vocab.json",
       .merge_file = std::string(MEGATRON_SOURCE_DIR) + "/data/tokenizers/gpt2/merges.txt"});
  return *t;
}

const ApiLimits kLimits{.max_positions = 64};

ApiRequest megatron(const std::string& body, uint64_t seed = 7) {
  return parse_megatron_request(json::parse(body), gpt2(), kLimits, seed);
}
ApiRequest completions(const std::string& body, uint64_t seed = 7) {
  return parse_completions_request(json::parse(body), gpt2(), kLimits, seed);
}

TEST(MegatronApi, DefaultsAreMegatrons) {
  const ApiRequest r = megatron(R"({"prompts": ["Hello world"]})");
  EXPECT_EQ(r.options.max_tokens, 64);
  EXPECT_EQ(r.options.sampling.temperature, 1.0);
  EXPECT_EQ(r.options.sampling.top_k, 0);
  EXPECT_EQ(r.options.sampling.top_p, 0.0);
  EXPECT_FALSE(r.options.logprobs);
  EXPECT_EQ(r.options.eod, 50256);  // stop_token: end of document
  EXPECT_EQ(r.options.seed, 7u);    // no random_seed: the server's
  EXPECT_EQ(r.prompts, (std::vector<std::vector<int32_t>>{gpt2().encode("Hello world")}));
}

// The served model's recipe (a Hugging Face import's generation_config.json): its sampling for
// requests that name none, its end tokens unless a request gives its own stop token.
const ApiLimits kWithDefaults{
    .max_positions = 64,
    .defaults = {.sampling = Sampling{.temperature = 0.6, .top_k = 50, .top_p = 0.9},
                 .end_tokens = {13, 198}}};

TEST(MegatronApi, TheModelsDefaultsApplyUnlessTheRequestNamesItsOwn) {
  const auto parse = [](const std::string& body) {
    return parse_megatron_request(json::parse(body), gpt2(), kWithDefaults, 7);
  };
  const ApiRequest plain = parse(R"({"prompts": ["Hi"]})");
  EXPECT_EQ(plain.options.sampling.temperature, 0.6);
  EXPECT_EQ(plain.options.sampling.top_k, 50);
  EXPECT_EQ(plain.options.sampling.top_p, 0.9);
  EXPECT_EQ(plain.options.eod, 50256);
  EXPECT_EQ(plain.options.end_tokens, (std::vector<int32_t>{13, 198}));
  const ApiRequest own = parse(R"({"prompts": ["Hi"], "temperature": 2.0, "stop_token": 11})");
  EXPECT_EQ(own.options.sampling.temperature, 2.0);
  EXPECT_EQ(own.options.sampling.top_k, 0);
  EXPECT_EQ(own.options.eod, 11);
  EXPECT_TRUE(own.options.end_tokens.empty());
}

TEST(CompletionsApi, TheModelsDefaultsApplyUnlessTheRequestNamesItsOwn) {
  const auto parse = [](const std::string& body) {
    return parse_completions_request(json::parse(body), gpt2(), kWithDefaults, 7);
  };
  const ApiRequest plain = parse(R"({"prompt": "Hi"})");
  EXPECT_EQ(plain.options.sampling.top_p, 0.9);
  EXPECT_EQ(plain.options.end_tokens, (std::vector<int32_t>{13, 198}));
  EXPECT_EQ(parse(R"({"prompt": "Hi", "temperature": 0})").options.sampling.top_k, 1);
}

TEST(MegatronApi, FieldsBecomeTheOptionsTheyName) {
  const ApiRequest r = megatron(R"({"prompts": ["a", "b c"], "tokens_to_generate": 5, "logprobs": true,
      "temperature": 0.5, "top_p": 0.9, "top_p_decay": 0.5, "top_p_bound": 0.2, "random_seed": 42,
      "add_BOS": true, "stop_on_eol": true, "stop_token": -1, "no_log": true})");
  EXPECT_EQ(r.options.max_tokens, 5);
  EXPECT_TRUE(r.options.logprobs && r.want_logprobs);
  EXPECT_EQ(r.options.sampling.temperature, 0.5);
  EXPECT_EQ(r.options.sampling.top_p, 0.9);
  EXPECT_EQ(r.options.top_p_decay, 0.5);
  EXPECT_EQ(r.options.top_p_bound, 0.2);
  EXPECT_EQ(r.options.seed, 42u);
  EXPECT_FALSE(r.options.eod.has_value());
  EXPECT_EQ(r.options.stop_tokens, (std::vector<int32_t>{198, 628}));  // GPT-2's "\n" and "\n\n"
  EXPECT_FALSE(r.log);
  ASSERT_EQ(r.prompts.size(), 2u);
  EXPECT_EQ(r.prompts[0].front(), 50256);  // add_BOS: end of document first
}

// A tokenizer.json whose post-processor puts <|begin_of_text|> first (Llama 3's shape): text
// prompts start with it, as transformers' tokenizer(prompt) starts them; id prompts are as given.
TEST(MegatronApi, TextPromptsStartWithWhatTheTokenizersLibraryPutsFirst) {
  static const auto llama3 = data::make_tokenizer(
      data::TokenizerKind::HuggingFace,
      {.tokenizer_model = std::string(MEGATRON_SOURCE_DIR) + "/tests/data/hf_tokenizers/bpe_llama3"});
  const std::vector<int32_t> start = llama3->prompt_start();
  ASSERT_EQ(start.size(), 1u);
  std::vector<int32_t> want = start;
  const std::vector<int32_t> text = llama3->encode("Hello world");
  want.insert(want.end(), text.begin(), text.end());
  const json body{{"prompts", {"Hello world"}}};
  EXPECT_EQ(parse_megatron_request(body, *llama3, kLimits, 7).prompts[0], want);
  EXPECT_EQ(parse_completions_request(json{{"prompt", "Hello world"}}, *llama3, kLimits, 7).prompts[0], want);
  EXPECT_EQ(parse_completions_request(json{{"prompt", text}}, *llama3, kLimits, 7).prompts[0], text);
}

TEST(MegatronApi, AnEmptyPromptNeedsAddBos) {
  EXPECT_THROW(megatron(R"({"prompts": [""]})"), ApiError);
  EXPECT_EQ(megatron(R"({"prompts": [""], "add_BOS": true})").prompts[0], std::vector<int32_t>{50256});
}

TEST(MegatronApi, BreakingARuleIsAnApiError) {
  for (const char* body :
       {R"({"prompts": "a"})", R"({"prompts": ["a"], "temperature": 0})", R"({"prompts": ["a"], "temperature": 101})",
        R"({"prompts": ["a"], "top_k": 1001})", R"({"prompts": ["a"], "top_p": 1.5})",
        R"({"prompts": ["a"], "top_k": 2, "top_p": 0.5})", R"({"prompts": ["a"], "top_p_decay": 0.5})",
        R"({"prompts": ["a"], "tokens_to_generate": -1})", R"({"prompts": ["a"], "tokens_to_generate": 0})",
        R"({"prompts": ["a"], "random_seed": -5})", R"({"prompts": ["a"], "logprobs": 1})",
        R"({"prompts": ["a"], "unknown": 1})", R"({"prompts": ["a"], "beam_width": 2})", R"([1, 2])"}) {
    EXPECT_THROW(megatron(body), ApiError) << body;
  }
}

TEST(MegatronApi, TheNumberOfPromptsAndTheStopTokenAreBounded) {
  const ApiLimits two{.max_positions = 64, .max_prompts = 2};
  EXPECT_NO_THROW(parse_megatron_request(json::parse(R"({"prompts": ["a", "b"]})"), gpt2(), two, 1));
  EXPECT_THROW(parse_megatron_request(json::parse(R"({"prompts": ["a", "b", "c"]})"), gpt2(), two, 1), ApiError);
  EXPECT_THROW(parse_completions_request(json::parse(R"({"prompt": ["a", "b", "c"]})"), gpt2(), two, 1), ApiError);
  EXPECT_THROW(megatron(R"({"prompts": ["a"], "stop_token": 50257})"), ApiError);
  EXPECT_THROW(megatron(R"({"prompts": ["a"], "stop_token": -2})"), ApiError);
  EXPECT_EQ(megatron(R"({"prompts": ["a"], "stop_token": 13})").options.eod, 13);
}

TEST(MegatronApi, AHugeNumberOfTokensIsAcceptedAndLeftToThePositionLimit) {
  EXPECT_EQ(megatron(R"({"prompts": ["a"], "tokens_to_generate": 9223372036854775807})").options.max_tokens,
            std::numeric_limits<int64_t>::max());
  // Past int64: read as a negative number, refused.
  EXPECT_THROW(megatron(R"({"prompts": ["a"], "tokens_to_generate": 18446744073709551615})"), ApiError);
}

TEST(MegatronApi, APromptMustLeaveRoomForTheTokensToGenerate) {
  std::string text;
  for (int i = 0; i < 64; ++i) text += " a";  // 64 tokens
  EXPECT_THROW(megatron(json{{"prompts", {text}}}.dump()), ApiError);
  // Scoring only: the whole 64 positions.
  EXPECT_NO_THROW(megatron(json{{"prompts", {text}}, {"tokens_to_generate", 0}, {"logprobs", true}}.dump()));
}

TEST(MegatronApi, EveryWholeSeedIsAFixedSeed) {
  EXPECT_EQ(megatron(R"({"prompts": ["a"], "random_seed": 0})").options.seed, 0u);
  EXPECT_EQ(megatron(R"({"prompts": ["a"], "random_seed": 18446744073709551615})").options.seed,
            std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(megatron(R"({"prompts": ["a"], "random_seed": null})").options.seed, 7u);  // the server's
  EXPECT_EQ(completions(R"({"prompt": "a", "seed": 18446744073709551615})").options.seed,
            std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(completions(json{{"prompt", "a"}, {"seed", int64_t{5}}}.dump()).options.seed, 5u);
}

TEST(MegatronApi, ASeedThatCannotBeOneIsRefusedNamingTheField) {
  for (const char* value : {"-1", "-5", "1.5", "\"5\"", "18446744073709551616", "true"}) {
    for (const auto& [field, parse] :
         {std::pair{"random_seed", +[](const std::string& v) { megatron(R"({"prompts": ["a"], "random_seed": )" + v + "}"); }},
          std::pair{"seed", +[](const std::string& v) { completions(R"({"prompt": "a", "seed": )" + v + "}"); }}}) {
      try {
        parse(value);
        ADD_FAILURE() << field << " " << value << " accepted";
      } catch (const ApiError& e) {
        EXPECT_EQ(std::string(e.what()), std::string(field) + " must be a whole number from 0 to "
                                                               "18446744073709551615 (leave it out for a random seed)");
      }
    }
  }
}

TEST(MegatronApi, ATinyAcceptedTemperatureChoosesTheGreedyToken) {
  const std::vector<float> logits = {0.5f, 3.0f, -2.0f, 2.9f};
  for (const char* t : {"1e-46", "1e-38", "1e-300"}) {
    const Sampling s = megatron(std::string(R"({"prompts": ["a"], "temperature": )") + t + "}").options.sampling;
    const Sampling c = completions(std::string(R"({"prompt": "a", "temperature": )") + t + "}").options.sampling;
    Rng rng(1);
    EXPECT_EQ(sample(logits, s, rng), 1) << t;
    EXPECT_EQ(sample(logits, c, rng), 1) << t;
  }
}

TEST(CompletionsApi, TemperatureZeroIsGreedyAndTopPOneIsOff) {
  const ApiRequest greedy = completions(R"({"prompt": "Hi", "temperature": 0})");
  EXPECT_TRUE(greedy.options.sampling.greedy());
  const ApiRequest r = completions(R"({"prompt": "Hi"})");
  EXPECT_EQ(r.options.max_tokens, 16);
  EXPECT_FALSE(r.options.sampling.greedy());
  EXPECT_EQ(r.options.sampling.top_p, 0.0);
  EXPECT_EQ(completions(R"({"prompt": "Hi", "top_p": 0.8})").options.sampling.top_p, 0.8);
}

TEST(CompletionsApi, EveryPromptFormIsAccepted) {
  const std::vector<int32_t> hi = gpt2().encode("Hi there");
  EXPECT_EQ(completions(R"({"prompt": "Hi there"})").prompts, (std::vector<std::vector<int32_t>>{hi}));
  EXPECT_EQ(completions(R"({"prompt": ["Hi there", "Hi there"]})").prompts.size(), 2u);
  EXPECT_EQ(completions(json{{"prompt", hi}}.dump()).prompts, (std::vector<std::vector<int32_t>>{hi}));
  EXPECT_EQ(completions(json{{"prompt", {hi, hi}}}.dump()).prompts.size(), 2u);
}

TEST(CompletionsApi, LogprobsStopSeedAndEchoAreRead) {
  const ApiRequest r = completions(R"({"prompt": "Hi", "logprobs": 3, "stop": ["\n", "."], "seed": 9, "echo": true})");
  EXPECT_TRUE(r.want_logprobs);
  EXPECT_EQ(r.options.top_logprobs, 3);
  EXPECT_EQ(r.options.stop, (std::vector<std::string>{"\n", "."}));
  EXPECT_EQ(r.options.seed, 9u);
  EXPECT_TRUE(r.echo);
  EXPECT_FALSE(completions(R"({"prompt": "Hi", "logprobs": null})").want_logprobs);
  EXPECT_EQ(completions(R"({"prompt": "Hi", "stop": "x"})").options.stop, std::vector<std::string>{"x"});
}

TEST(CompletionsApi, TheAnswerEchoesThePromptsTokensWithANullFirstLogprob) {
  const ApiRequest r = completions(R"({"prompt": [[40, 716]], "logprobs": 1, "echo": true, "max_tokens": 1})");
  Generated g{.tokens = {40, 716, 13}, .prompt_tokens = 2, .text = ".", .logprobs = {-1.5, -2.5},
              .top_logprobs = {{{716, -1.5}}, {{13, -2.5}}}, .finish_reason = "length"};
  const json a = completions_response(r, {g}, gpt2(), "m", 3, 100);
  const json& lp = a["choices"][0]["logprobs"];
  EXPECT_EQ(a["choices"][0]["text"], gpt2().decode(std::vector<int32_t>{40, 716}) + ".");
  EXPECT_EQ(lp["token_logprobs"], json::parse("[null, -1.5, -2.5]"));
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  EXPECT_EQ(lp["top_logprobs"][2], json::parse(R"({".": -2.5})"));
  EXPECT_EQ(lp["text_offset"][1], gpt2().decode(std::vector<int32_t>{40}).size());
  EXPECT_EQ(a["usage"]["total_tokens"], 3);
  EXPECT_EQ(a["id"], "cmpl-3");
}

}  // namespace api_test
}  // namespace megatron::generate
