// `megatron serve` as clients use it: a server on a loopback port answering real HTTP on
// Megatron's PUT /api and OpenAI's POST /v1/completions (the request lm-evaluation-harness's
// local-completions sends to score a continuation), HTTP 400 with a JSON error for malformed
// requests while it keeps serving, and Ctrl-C (SIGINT) stopping it cleanly.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/gpt2_checkpoint.hpp"
#include "cli/run_command.hpp"
#include "cli/tiny_job.hpp"
#include "support/temp_dir.hpp"

extern char** environ;

namespace megatron::cli {
namespace serve_cli_test {

namespace fs = std::filesystem;

using nlohmann::json;

const fs::path& checkpoint() { return gpt2_checkpoint(); }

// A server on a free loopback port for the test's lifetime.
class Server {
 public:
  explicit Server(const std::string& extra = "") {
    const fs::path port_file = dir_.path() / "port";
    const std::string command = std::string("cd '") + MEGATRON_SOURCE_DIR + "' && " + mpi_sanitizer_env() + " exec '" +
                                MEGATRON_BINARY + "' serve " + checkpoint().string() + kGpt2 +
                                " --threads 1 --host 127.0.0.1 --port 0 --port-file " +
                                port_file.string() + " " + extra + " >" + (dir_.path() / "out").string() +
                                " 2>" + (dir_.path() / "err").string();
    const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
    EXPECT_EQ(posix_spawn(&pid_, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ), 0);
    for (int i = 0; i < 600 && port_ == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {  // it ended before listening
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        break;
      }
      const std::string text = slurp(port_file);
      if (!text.empty() && text.back() == '\n') port_ = std::stoi(text);
    }
    if (port_ == 0) ADD_FAILURE() << "the server did not start: " << err();
  }
  ~Server() {
    if (pid_ > 0 && exit_code_ < 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(120, 0);
    return c;
  }
  // Sends `signal` and waits for the exit code.
  int stop(int signal) {
    kill(pid_, signal);
    int status = 0;
    waitpid(pid_, &status, 0);
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return exit_code_;
  }
  std::string err() const { return slurp(dir_.path() / "err"); }

 private:
  test_support::TempDir dir_;
  pid_t pid_ = -1;
  int port_ = 0;
  int exit_code_ = -1;
};

json send(httplib::Client& c, const std::string& method, const std::string& path, const std::string& body,
          int expect_status) {
  const auto res = method == "PUT" ? c.Put(path, body, "application/json") : c.Post(path, body, "application/json");
  EXPECT_TRUE(res) << method << " " << path << ": no answer";
  if (!res) return {};
  EXPECT_EQ(res->status, expect_status) << body << "\n" << res->body;
  return json::parse(res->body);
}

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
      {"POST", "/v1/completions", R"({"prompt": "a", "n": 2})", "n must be 1"},
      {"POST", "/v1/completions", R"({"prompt": "a", "stream": true})", "stream"},
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

TEST(ServeCli, CtrlCStopsTheServerCleanly) {
  Server server;
  auto c = server.client();
  send(c, "PUT", "/api", R"({"prompts": ["a"], "tokens_to_generate": 2})", 200);
  EXPECT_EQ(server.stop(SIGINT), 0) << server.err();
  EXPECT_NE(server.err().find("1 request served"), std::string::npos) << server.err();
}

TEST(ServeCli, TwoRanksServeWhatOneRankServes) {
  json answers[2];
  for (int i = 0; i < 2; ++i) {
    Server server(i == 0 ? "" : "--nproc 2");
    auto c = server.client();
    answers[i] = send(c, "PUT", "/api",
                      R"({"prompts": ["It is a truth", "She"], "tokens_to_generate": 6, "top_k": 1,
                          "stop_token": -1})", 200);
    // Under mpirun a signal reaches the launcher, which exits 1 for the interruption however
    // cleanly the ranks stop: only that it ends, and that no rank reports an error, is checked.
    server.stop(SIGTERM);
    EXPECT_EQ(server.err().find("megatron: error"), std::string::npos) << server.err();
  }
  EXPECT_EQ(answers[0]["tokens"], answers[1]["tokens"]);
}

}  // namespace serve_cli_test
}  // namespace megatron::cli
