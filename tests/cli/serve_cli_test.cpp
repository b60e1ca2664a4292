// `megatron serve` as clients use it: a server on a loopback port answering real HTTP on
// Megatron's PUT /api and OpenAI's POST /v1/completions (the request lm-evaluation-harness's
// local-completions sends to score a continuation) and /v1/chat/completions, streamed as
// server-sent events or whole, its metrics, HTTP 400 with a JSON error for malformed requests
// while it keeps serving, and Ctrl-C (SIGINT) stopping it cleanly.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <map>
#include <thread>

#include "cli/gpt2_checkpoint.hpp"
#include "cli/run_command.hpp"
#include "cli/test_server.hpp"
#include "cli/tiny_job.hpp"
#include "support/temp_dir.hpp"

extern char** environ;

namespace megatron::cli {
namespace serve_cli_test {

namespace fs = std::filesystem;

using nlohmann::json;

const fs::path& checkpoint() { return gpt2_checkpoint(); }

using test_server::Server;
using test_server::send;

TEST(ServeCli, MegatronsPutApiGeneratesTextSegmentsAndLogprobs) {
  Server server;
  auto c = server.client();
  const json r = send(c, "PUT", "/api",
                      R"({"prompts": ["It is a truth", "Mr. Darcy"], "tokens_to_generate": 5,
                          "top_k": 1, "logprobs": true, "stop_token": -1})", 200);
  ASSERT_EQ(r["text"].size(), 2u);
  EXPECT_EQ(r["text"][0].get<std::string>().rfind("It is a truth", 0), 0u);
  // Greedy: the same request, the same answer.
  const json again = send(c, "PUT", "/api",
                          R"({"prompts": ["It is a truth", "Mr. Darcy"], "tokens_to_generate": 5,
                              "top_k": 1, "logprobs": true, "stop_token": -1})", 200);
  EXPECT_EQ(r, again);
  // "It is a truth" is 4 GPT-2 tokens: 4 + 5 segments, and a log-probability for all but the first.
  EXPECT_EQ(r["segments"][0].size(), 9u);
  EXPECT_EQ(r["tokens"][0].size(), 9u);
  EXPECT_EQ(r["logprobs"][0].size(), 8u);
  std::string joined;
  for (const auto& s : r["segments"][0]) joined += s.get<std::string>();
  EXPECT_EQ(joined, r["text"][0]);
}

TEST(ServeCli, CompletionsScoreAContinuationAsLmEvaluationHarnessAsks) {
  Server server;
  auto c = server.client();
  // local-completions' loglikelihood request: token ids, echo, one token, logprobs 1.
  const json r = send(c, "POST", "/v1/completions",
                      R"({"model": "m", "prompt": [[1026, 318, 257, 3872]], "temperature": 0,
                          "max_tokens": 1, "logprobs": 1, "seed": 1234, "echo": true})", 200);
  ASSERT_EQ(r["choices"].size(), 1u);
  const json& lp = r["choices"][0]["logprobs"];
  ASSERT_EQ(lp["token_logprobs"].size(), 5u);  // the 4 prompt tokens and the generated one
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  EXPECT_EQ(lp["tokens"][3], " truth");
  for (size_t i = 1; i < 5; ++i) {
    ASSERT_EQ(lp["top_logprobs"][i].size(), 1u);
    EXPECT_LE(lp["token_logprobs"][i].get<double>(), lp["top_logprobs"][i].begin().value().get<double>() + 1e-12);
  }
  // Greedy: the generated token is the top one.
  EXPECT_EQ(lp["token_logprobs"][4], lp["top_logprobs"][4].begin().value());
  EXPECT_EQ(r["object"], "text_completion");
  EXPECT_EQ(r["usage"]["prompt_tokens"], 4);
  EXPECT_EQ(r["usage"]["completion_tokens"], 1);
  EXPECT_EQ(r["choices"][0]["text"].get<std::string>().rfind("It is a truth", 0), 0u);
}

TEST(ServeCli, CompletionsStopAtAStopStringAndSayWhy) {
  Server server;
  auto c = server.client();
  const json whole = send(c, "POST", "/v1/completions",
                          R"({"prompt": "She was", "max_tokens": 12, "temperature": 0})", 200);
  const std::string text = whole["choices"][0]["text"];
  ASSERT_GE(text.size(), 3u);
  const json stop = json::array({text.substr(1, 1)});
  const json cut = send(c, "POST", "/v1/completions",
                        json{{"prompt", "She was"}, {"max_tokens", 12}, {"temperature", 0}, {"stop", stop}}.dump(),
                        200);
  EXPECT_EQ(cut["choices"][0]["text"], text.substr(0, text.find(text.substr(1, 1))));
  EXPECT_EQ(cut["choices"][0]["finish_reason"], "stop");
}

TEST(ServeCli, ListsItsModelAndAnswersCompletionsAtBothPaths) {
  Server server;
  auto c = server.client();
  const auto models = c.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(json::parse(models->body)["data"][0]["id"], "ckpt");
  const std::string body = R"({"prompt": "She was", "max_tokens": 4, "temperature": 0})";
  EXPECT_EQ(send(c, "POST", "/completions", body, 200)["choices"], send(c, "POST", "/v1/completions", body, 200)["choices"]);
}

TEST(ServeCli, AnUnwritablePortFileIsRefusedBeforeTheServerStarts) {
  const CommandResult r = run_megatron("serve " + checkpoint().string() + kGpt2 +
                                       " --port 0 --port-file /proc/no-such-dir/port");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--port-file /proc/no-such-dir/port: cannot write there"), std::string::npos) << r.err;
}

TEST(ServeCli, AnEmptyHostIsRefusedSayingHowToListenEverywhere) {
  test_support::TempDir dir;
  const CommandResult r = run_megatron("serve " + (dir.path() / "no-checkpoint").string() + " --host ''");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--host is empty: give the address to listen on (0.0.0.0 to listen on every interface"),
            std::string::npos) << r.err;
}

TEST(ServeCli, MalformedRequestsGetA400AndTheServerKeepsServing) {
  Server server;
  auto c = server.client();
  const std::vector<std::tuple<std::string, std::string, std::string, std::string>> bad = {
      {"PUT", "/api", "this is not json", "not JSON"},
      {"PUT", "/api", R"({"tokens_to_generate": 4})", "prompts argument required"},
      {"PUT", "/api", R"({"prompts": ["a"], "top_k": 2, "top_p": 0.5})", "top-k and top-p"},
      {"PUT", "/api", R"({"prompts": ["a"], "temperature": 0})", "temperature"},
      {"PUT", "/api", R"({"prompts": [""]})", "add_BOS"},
      {"PUT", "/api", R"({"prompts": ["a"], "tokens_to_generate": 0})", "logprobs"},
      {"PUT", "/api", R"({"prompts": ["a"], "beam_width": 2})", "beam"},
      {"PUT", "/api", R"({"prompts": ["a"], "sentences": ["a"]})", "sentences"},
      {"PUT", "/api", R"({"prompts": ["a"], "tokens_to_generate": 1e300})", "integer"},
      {"PUT", "/api", R"({"prompts": ["a"], "top_k": -1})", "top_k"},
      {"PUT", "/api", R"({"prompts": [1, 2]})", "list of strings"},
      {"PUT", "/api", "[]", "JSON object"},
      {"POST", "/v1/completions", R"({"max_tokens": 3})", "prompt is required"},
      {"POST", "/v1/completions", R"({"prompt": [[1, 99999999]]})", "outside the vocabulary"},
      {"POST", "/v1/completions", R"({"prompt": "a", "n": 17})", "n must be an integer from 1 to 16"},
      {"POST", "/v1/completions", R"({"prompt": "a", "stream": true, "logprobs": 1})", "stream cannot be combined"},
      {"POST", "/v1/completions", R"({"prompt": "a", "stream_options": {"include_usage": true}})", "only allowed when stream"},
      {"POST", "/v1/completions", R"({"prompt": "a", "max_tokens": "many"})", "integer"},
      {"POST", "/v1/completions", R"({"prompt": "a", "made_up": 1})", "made_up"},
      {"POST", "/v1/completions", R"({"prompt": "a", "seed": -5})", "seed must be a whole number from 0"},
      {"PUT", "/api", R"({"prompts": ["a"], "random_seed": 1.5})", "random_seed must be a whole number from 0"},
  };
  for (const auto& [method, path, body, message] : bad) {
    const json r = send(c, method, path, body, 400);
    ASSERT_TRUE(r.contains("error")) << body;
    const std::string error = r["error"].is_string() ? r["error"].get<std::string>() : r["error"]["message"].get<std::string>();
    EXPECT_NE(error.find(message), std::string::npos) << body << " -> " << error;
  }
  const json ok = send(c, "PUT", "/api", R"({"prompts": ["a"], "tokens_to_generate": 2})", 200);
  EXPECT_EQ(ok["text"].size(), 1u);
  // The smallest temperatures are accepted and choose as greedy does.
  const json tiny = send(c, "PUT", "/api", R"({"prompts": ["a"], "tokens_to_generate": 4, "temperature": 1e-300})", 200);
  EXPECT_EQ(tiny["tokens"], send(c, "PUT", "/api", R"({"prompts": ["a"], "tokens_to_generate": 4, "top_k": 1})", 200)["tokens"]);
  // A huge number of tokens stops at the model's positions.
  const json all = send(c, "PUT", "/api",
                        R"({"prompts": ["a"], "tokens_to_generate": 9223372036854775807, "stop_token": -1, "top_k": 1})", 200);
  EXPECT_EQ(all["tokens"][0].size(), 128u);
}

TEST(ServeCli, WithAnApiKeyOnlyRequestsBearingItAreServedAndHealthIsOpen) {
  Server server("--api-key s3cret-key");
  auto c = server.client();
  const std::string body = R"({"prompts": ["a"], "tokens_to_generate": 2})";
  const auto none = c.Put("/api", body, "application/json");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  EXPECT_EQ(json::parse(none->body)["error"]["code"], "invalid_api_key");
  c.set_bearer_token_auth("s3cret-kez");
  const auto wrong = c.Put("/api", body, "application/json");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  const auto models = c.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 401);
  c.set_bearer_token_auth("s3cret-key");
  EXPECT_EQ(send(c, "PUT", "/api", body, 200)["text"].size(), 1u);
  httplib::Client anyone = server.client();
  const auto health = anyone.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(json::parse(health->body)["status"], "ok");
}

TEST(ServeCli, AnEmptyApiKeyIsRefusedRatherThanServingEveryone) {
  for (const std::string& how : {std::string("--api-key ''"), std::string("")}) {
    const auto r = run_megatron_with_env(how.empty() ? "MEGATRON_API_KEY=" : "",
                                         "serve " + checkpoint().string() + kGpt2 +
                                             " --threads 1 --port 0 " + how);
    EXPECT_EQ(r.exit_code, 2) << how;
    EXPECT_NE(r.err.find("--api-key (or MEGATRON_API_KEY) is empty"), std::string::npos) << r.err;
  }
}

TEST(ServeCli, AnApiKeyWithASpaceIsRefusedBeforeTheServerStarts) {
  const auto r = run_megatron("serve " + checkpoint().string() + kGpt2 +
                              " --threads 1 --port 0 --api-key 'two words'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--api-key (or MEGATRON_API_KEY) holds a space"), std::string::npos) << r.err;
}

TEST(ServeCli, BodiesOverTheLimitGetA413ChunkedOrNotAndTheServerKeepsServing) {
  Server server;
  auto c = server.client();
  // 65 chunks of 1 MiB with no Content-Length: httplib's own limit never sees them.
  const std::string mib(size_t{1} << 20, ' ');
  const auto chunked = c.Put(
      "/api",
      [&](size_t offset, httplib::DataSink& sink) {
        if (offset >= 65 * mib.size()) {
          sink.done();
        } else {
          sink.write(mib.data(), mib.size());
        }
        return true;
      },
      "application/json");
  ASSERT_TRUE(chunked) << "no answer to a chunked body: " << httplib::to_string(chunked.error());
  EXPECT_EQ(chunked->status, 413) << chunked->body;
  EXPECT_NE(chunked->body.find("over 64 MiB"), std::string::npos) << chunked->body;
  const auto stated = c.Put("/api", std::string(65 * mib.size(), ' '), "application/json");
  ASSERT_TRUE(stated);
  EXPECT_EQ(stated->status, 413);
  const json ok = send(c, "PUT", "/api", R"({"prompts": ["a"], "tokens_to_generate": 2})", 200);
  EXPECT_EQ(ok["text"].size(), 1u);
}

TEST(ServeCli, ConcurrentRequestsAreQueuedAndEachGetsItsOwnAnswer) {
  Server server;
  std::vector<json> answers(4);
  std::vector<std::thread> clients;
  for (int i = 0; i < 4; ++i) {
    clients.emplace_back([&, i] {
      auto c = server.client();
      answers[size_t(i)] = send(c, "PUT", "/api",
                                json{{"prompts", {std::string(size_t(i + 1), 'a')}}, {"tokens_to_generate", 3},
                                     {"top_k", 1}, {"stop_token", -1}}.dump(),
                                200);
    });
  }
  for (auto& t : clients) t.join();
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(answers[size_t(i)]["text"][0].get<std::string>().rfind(std::string(size_t(i + 1), 'a'), 0), 0u);
  }
}

// The events of a streamed answer: each `data:` line's JSON, and whether [DONE] ended them.
struct Events {
  std::vector<json> chunks;
  bool done = false;
};

Events events_of(const std::string& body) {
  Events e;
  size_t at = 0;
  while (at < body.size()) {
    const size_t end = body.find("\n\n", at);
    EXPECT_NE(end, std::string::npos) << "an event does not end in a blank line: " << body.substr(at);
    if (end == std::string::npos) break;
    const std::string event = body.substr(at, end - at);
    at = end + 2;
    EXPECT_EQ(event.rfind("data: ", 0), 0u) << event;
    EXPECT_FALSE(e.done) << "an event after [DONE]";
    if (event == "data: [DONE]") {
      e.done = true;
    } else {
      e.chunks.push_back(json::parse(event.substr(6)));
    }
  }
  return e;
}

httplib::Result post_stream(httplib::Client& c, const std::string& path, const json& body) {
  auto res = c.Post(path, body.dump(), "application/json");
  EXPECT_TRUE(res) << "no answer";
  if (res) {
    EXPECT_EQ(res->status, 200) << res->body;
    EXPECT_EQ(res->get_header_value("Content-Type"), "text/event-stream");
  }
  return res;
}

TEST(ServeCli, StreamedCompletionsArriveAsEventsThatJoinIntoTheWholeAnswer) {
  Server server;
  auto c = server.client();
  const json body{{"prompt", {"It is a truth", "She"}}, {"max_tokens", 12}, {"temperature", 0}};
  const json whole = send(c, "POST", "/v1/completions", body.dump(), 200);
  json streamed_body = body;
  streamed_body["stream"] = true;
  streamed_body["stream_options"] = {{"include_usage", true}};
  const auto res = post_stream(c, "/v1/completions", streamed_body);
  ASSERT_TRUE(res);
  const Events e = events_of(res->body);
  EXPECT_TRUE(e.done);
  std::string texts[2], reasons[2];
  size_t text_events = 0;
  json usage;
  for (const json& chunk : e.chunks) {
    EXPECT_EQ(chunk["object"], "text_completion");
    EXPECT_EQ(chunk["id"], e.chunks[0]["id"]);
    if (chunk.contains("usage")) {
      usage = chunk["usage"];
      continue;
    }
    const json& choice = chunk["choices"][0];
    const size_t i = choice["index"].get<size_t>();
    texts[i] += choice["text"].get<std::string>();
    text_events += choice["text"].get<std::string>().empty() ? 0 : 1;
    if (!choice["finish_reason"].is_null()) reasons[i] = choice["finish_reason"].get<std::string>();
  }
  EXPECT_GT(text_events, 4u) << "the text came in one piece, not as it grew";
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(texts[i], whole["choices"][i]["text"].get<std::string>()) << i;
    EXPECT_EQ(reasons[i], whole["choices"][i]["finish_reason"].get<std::string>()) << i;
  }
  EXPECT_EQ(usage, whole["usage"]);
}

TEST(ServeCli, CompletionsGiveNChoicesPerPromptInPromptOrder) {
  Server server;
  auto c = server.client();
  const json r = send(c, "POST", "/v1/completions",
                      json{{"prompt", {"Sense", "Pride"}}, {"n", 2}, {"max_tokens", 4}, {"echo", true},
                           {"seed", 3}}.dump(),
                      200);
  ASSERT_EQ(r["choices"].size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(r["choices"][i]["index"], i);
    EXPECT_EQ(r["choices"][i]["text"].get<std::string>().rfind(i < 2 ? "Sense" : "Pride", 0), 0u) << i;
  }
  EXPECT_NE(r["choices"][0]["text"], r["choices"][1]["text"]) << "n samples of one prompt drew alike";
}

TEST(ServeCli, ChatCompletionsAnswerWhatTheTemplatesPromptCompletes) {
  Server server("--chat-template chatml");
  auto c = server.client();
  const json chat = send(c, "POST", "/v1/chat/completions",
                         json{{"messages", {{{"role", "system"}, {"content", "Be brief."}},
                                            {{"role", "user"}, {"content", "Who is Emma?"}}}},
                              {"max_tokens", 10},
                              {"temperature", 0}}.dump(),
                         200);
  EXPECT_EQ(chat["object"], "chat.completion");
  EXPECT_EQ(chat["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(chat["choices"][0]["message"]["role"], "assistant");
  const json plain = send(c, "POST", "/v1/completions",
                          json{{"prompt", "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n"
                                          "Who is Emma?<|im_end|>\n<|im_start|>assistant\n"},
                               {"max_tokens", 10},
                               {"temperature", 0},
                               {"stop", "<|im_end|>"}}.dump(),
                          200);
  EXPECT_EQ(chat["choices"][0]["message"]["content"], plain["choices"][0]["text"]);
  EXPECT_EQ(chat["usage"], plain["usage"]);

  const auto res = post_stream(c, "/v1/chat/completions",
                               json{{"messages", {{{"role", "user"}, {"content", {{{"type", "text"}, {"text", "Who is Emma?"}}}}}}},
                                    {"max_tokens", 10},
                                    {"temperature", 0},
                                    {"stream", true}});
  ASSERT_TRUE(res);
  const Events e = events_of(res->body);
  ASSERT_GE(e.chunks.size(), 2u);
  EXPECT_EQ(e.chunks[0]["choices"][0]["delta"]["role"], "assistant");
  std::string content;
  for (const json& chunk : e.chunks) {
    EXPECT_EQ(chunk["object"], "chat.completion.chunk");
    const json& delta = chunk["choices"][0]["delta"];
    if (delta.contains("content")) content += delta["content"].get<std::string>();
  }
  EXPECT_FALSE(e.chunks.back()["choices"][0]["finish_reason"].is_null());
  const json same = send(c, "POST", "/v1/chat/completions",
                         json{{"messages", {{{"role", "user"}, {"content", "Who is Emma?"}}}},
                              {"max_tokens", 10},
                              {"temperature", 0}}.dump(),
                         200);
  EXPECT_EQ(content, same["choices"][0]["message"]["content"]);
}

TEST(ServeCli, ChatRequestsWithoutATemplateAreRefusedSayingHowToGiveOne) {
  Server server;  // GPT-2's tokenizer has no chat template
  auto c = server.client();
  const json r = send(c, "POST", "/v1/chat/completions",
                      R"({"messages": [{"role": "user", "content": "hi"}]})", 400);
  EXPECT_NE(r["error"]["message"].get<std::string>().find("--chat-template"), std::string::npos) << r;
}

TEST(ServeCli, MetricsCountRequestsByStatusAndTokensGenerated) {
  Server server;
  auto c = server.client();
  send(c, "PUT", "/api", R"({"prompts": ["a", "b"], "tokens_to_generate": 3, "stop_token": -1})", 200);
  send(c, "PUT", "/api", R"({"prompts": []})", 400);
  const auto res = c.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type").rfind("text/plain; version=0.0.4", 0), 0u);
  for (const std::string line : {"megatron_requests_total{endpoint=\"/api\",status=\"200\"} 1\n",
                                 "megatron_requests_total{endpoint=\"/api\",status=\"400\"} 1\n",
                                 "megatron_generation_tokens_total 6\n",
                                 "megatron_queue_depth 0\n",
                                 "megatron_request_duration_seconds_count 2\n",
                                 "# TYPE megatron_request_duration_seconds histogram\n"}) {
    EXPECT_NE(res->body.find(line), std::string::npos) << line << " not in\n" << res->body;
  }
}

TEST(ServeCli, UnknownPathsGet404AndWrongMethods405) {
  Server server;
  auto c = server.client();
  const auto missing = c.Get("/v2/nothing");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  const auto wrong = c.Get("/v1/completions");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 405);
  EXPECT_EQ(wrong->get_header_value("Allow"), "POST");
}

TEST(ServeCli, CtrlCStopsTheServerCleanly) {
  Server server;
  auto c = server.client();
  send(c, "PUT", "/api", R"({"prompts": ["a"], "tokens_to_generate": 2})", 200);
  EXPECT_EQ(server.stop(SIGINT), 0) << server.err();
  EXPECT_NE(server.err().find("1 request answered"), std::string::npos) << server.err();
}

TEST(ServeCli, TwoRanksServeWhatOneRankServesBatchedEitherWay) {
  for (const std::string batching : {"continuous", "static"}) {
    json answers[2];
    for (int i = 0; i < 2; ++i) {
      Server server("--batching " + batching + (i == 0 ? "" : " --nproc 2"));
      auto c = server.client();
      answers[i] = send(c, "PUT", "/api",
                        R"({"prompts": ["It is a truth", "She"], "tokens_to_generate": 6, "top_k": 1,
                            "stop_token": -1})", 200);
      // Under mpirun a signal reaches the launcher, which exits 1 for the interruption however
      // cleanly the ranks stop: only that it ends, and that no rank reports an error, is checked.
      server.stop(SIGTERM);
      EXPECT_EQ(server.err().find("megatron: error"), std::string::npos) << server.err();
    }
    EXPECT_EQ(answers[0]["tokens"], answers[1]["tokens"]) << batching;
  }
}

TEST(ServeCli, ContinuousBatchingAnswersConcurrentClientsAsTheStaticPathDoes) {
  const std::vector<std::string> prompts = {"It is a truth", "She", "Emma Woodhouse, handsome", "A"};
  std::map<std::string, std::vector<json>> answers;
  for (const std::string batching : {"continuous", "static"}) {
    Server server("--batching " + batching + " --max-batch 3 --step-tokens 4");
    std::vector<json>& got = answers[batching];
    got.resize(prompts.size());
    std::vector<std::thread> clients;
    for (size_t i = 0; i < prompts.size(); ++i) {
      clients.emplace_back([&, i] {
        auto c = server.client();
        got[i] = send(c, "POST", "/v1/completions",
                      json{{"prompt", prompts[i]}, {"max_tokens", 12}, {"temperature", 0}}.dump(), 200);
      });
    }
    for (auto& t : clients) t.join();
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(answers["continuous"][i]["choices"], answers["static"][i]["choices"]) << prompts[i];
  }
}

TEST(ServeCli, TheDefaultKeyValuePoolIsWhatThePlanCountsForIt) {
  const CommandResult plan = run_megatron("plan recipes/gpt-tiny.yaml model.num_layers=2 --json");
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  const double pool = json::parse(plan.out)["generation"]["serve_pool_bytes"];
  Server server;
  EXPECT_NE(server.err().find(fmt::format("({} bytes on this rank), 32 sequences at once", int64_t(pool))),
            std::string::npos)
      << server.err();
}

TEST(ServeCli, AKeyValuePoolBeyondTheMachinesMemoryIsRefusedAtStart) {
  const auto r = run_megatron("serve " + checkpoint().string() + kGpt2 +
                              " --threads 1 --port 0 --kv-cache-memory 1073741824");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("the key/value pool would take 1073741824 MiB, more than half of this machine's"),
            std::string::npos)
      << r.err;
}

TEST(ServeCli, AKeyValuePoolTooSmallForOneSequenceIsRefusedAtStart) {
  // A block of 1024 positions of 2 layers' 128 keys and values in f32 is 2 MiB: 1 MiB holds none.
  const auto r = run_megatron("serve " + checkpoint().string() + kGpt2 +
                              " --threads 1 --port 0 --block-size 1024 --kv-cache-memory 1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--kv-cache-memory 1 MiB does not hold one sequence of the model's 128 "
                       "positions: give at least 2 MiB"),
            std::string::npos)
      << r.err;
}

}  // namespace serve_cli_test
}  // namespace megatron::cli
