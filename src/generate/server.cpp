#include "generate/server.hpp"

#include <fmt/format.h>
#include <httplib.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <future>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "core/error.hpp"
#include "dist/broadcast_text.hpp"
#include "dist/watchdog.hpp"
#include "generate/api.hpp"
#include "tensor/cpu_backend.hpp"

namespace megatron::generate {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// What rank 0 hands every rank: nothing new (a heartbeat that keeps the idle ranks' watchdog
// content), a request, or the end.
enum class Message : int64_t { Idle = 0, Request = 1, Stop = 2 };
// How long the other ranks wait in a broadcast at most while idle: well inside the graceful
// stop's grace (a rank that SIGTERM finds blocked longer is ended as stuck).
constexpr std::chrono::milliseconds kHeartbeat(100);

// One request as every rank runs it: its format and body, with the seed rank 0 chose for it.
struct Job {
  Api api = Api::Megatron;
  json body;
  uint64_t seed = 0;
  std::promise<json> answer;  // rank 0: the HTTP response's body
};

class Channel {
 public:
  explicit Channel(dist::Communicator* world) : world_(world) {}

  // Rank 0: sends; the others: receive. Returns the message and its text.
  std::pair<Message, std::string> exchange(Message kind, const std::string& text) {
    if (!world_) return {kind, text};
    tensor::Tensor header = cpu_.empty({1}, tensor::DType::I64);
    int64_t value = int64_t(kind);
    if (world_->rank() == 0) cpu_.write(header, &value);
    world_->broadcast(header, 0);
    cpu_.read(header, &value);
    return {Message(value), dist::broadcast_text(*world_, cpu_, text, 0)};
  }

 private:
  dist::Communicator* world_;
  tensor::CpuBackend cpu_{1};
};

// The largest request body read. httplib 0.11 enforces its payload limit only on bodies that
// state a Content-Length; a chunked body is read through read_bounded_body, which stops at it.
constexpr size_t kMaxBodyBytes = size_t{64} << 20;

// The body, or nullopt when it is longer than kMaxBodyBytes. Past the limit the rest is read and
// dropped, never kept: memory stays bounded, and the client, still sending, gets its 413.
std::optional<std::string> read_bounded_body(const httplib::ContentReader& reader) {
  std::string body;
  bool over = false;
  const bool complete = reader([&](const char* data, size_t length) {
    if (over || length > kMaxBodyBytes - body.size()) {
      over = true;
      body = std::string();  // released, not just cleared
      return true;
    }
    body.append(data, length);
    return true;
  });
  if (over || !complete) return std::nullopt;
  return body;
}

// Whether `header` is "Bearer <key>", compared in time that does not depend on where they first
// differ, so the key cannot be guessed a byte at a time from response times.
bool authorized(const std::string& header, const std::string& key) {
  const std::string expected = "Bearer " + key;
  unsigned char differ = header.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    differ |= static_cast<unsigned char>(expected[i] ^ (i < header.size() ? header[i] : 0));
  }
  return differ == 0;
}

json error_body(Api api, const std::string& message) {
  if (api == Api::Completions) {
    return {{"error", {{"message", message}, {"type", "invalid_request_error"}}}};
  }
  return {{"error", message}};
}

// Every rank: the request parsed (rank 0 already checked it) and generated.
json run_job(const Engine& engine, const ApiLimits& limits, Api api, const json& body,
             uint64_t seed, const std::string& name, int64_t id) {
  const auto begin = Clock::now();
  const ApiRequest request =
      api == Api::Megatron
          ? parse_megatron_request(body, engine.tokenizer, limits, seed)
          : parse_completions_request(body, engine.tokenizer, limits, seed);
  GenerateStats stats;
  const auto results = generate(engine, request.prompts, request.options, {}, &stats);
  const double s = std::chrono::duration<double>(Clock::now() - begin).count();
  if (request.log) {
    spdlog::info("request {} ({}): {} prompt{}, {} tokens generated in {:.2f} s ({:.1f} tokens/s)", id,
                 api == Api::Megatron ? "PUT /api" : "POST /v1/completions",
                 request.prompts.size(), request.prompts.size() == 1 ? "" : "s",
                 stats.decode_tokens, s, double(stats.decode_tokens) / std::max(s, 1e-9));
  }
  if (api == Api::Megatron) return megatron_response(request, results, engine.tokenizer);
  const int64_t created = std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
  return completions_response(request, results, engine.tokenizer, name, id, created);
}

}  // namespace

void serve(const Engine& engine, dist::Communicator* world, const ServeOptions& a) {
  // A grace of seconds, not training's half second: under mpirun a Ctrl-C reaches mpirun too,
  // which tears the job down while the ranks finalize, and MPI_Finalize then takes that long.
  dist::enable_graceful_stop(std::chrono::seconds(3));
  const ApiLimits limits{.max_positions = engine.max_positions, .max_prompts = a.max_prompts,
                         .defaults = engine.defaults};
  const std::string& name = a.model_name;
  Channel channel(world);
  int64_t served = 0;

  if (world && world->rank() != 0) {
    while (true) {
      auto [kind, text] = channel.exchange(Message::Idle, "");
      if (kind == Message::Stop) return;
      if (kind != Message::Request) continue;
      const json job = json::parse(text);
      try {  // a request that fails fails on every rank alike: rank 0 answers 500, all go on
        run_job(engine, limits, Api(job["api"].get<int>()), job["body"],
                job["seed"].get<uint64_t>(), name, ++served);
      } catch (const std::invalid_argument&) {
      } catch (const ApiError&) {
      }
    }
  }

  std::mutex mutex;
  std::condition_variable ready;
  std::deque<std::shared_ptr<Job>> queue;
  std::random_device entropy;
  uint64_t next_seed = (uint64_t(entropy()) << 32) | entropy();

  httplib::Server server;
  server.set_payload_max_length(kMaxBodyBytes);  // bodies with a Content-Length: 413 unread
  const auto handle = [&](Api api) {
    return [&, api](const httplib::Request&, httplib::Response& res,
                    const httplib::ContentReader& reader) {
      const std::optional<std::string> text = read_bounded_body(reader);
      if (!text) {
        res.status = 413;
        res.set_content(error_body(api, fmt::format("the request body is over {} MiB",
                                                    kMaxBodyBytes >> 20)).dump(),
                        "application/json");
        return;
      }
      auto job = std::make_shared<Job>();
      job->api = api;
      try {
        job->body = json::parse(*text);
        std::lock_guard lock(mutex);
        job->seed = next_seed++;
      } catch (const json::exception&) {
        res.status = 400;
        res.set_content(error_body(api, "the request body is not JSON").dump(), "application/json");
        return;
      }
      try {  // checked here, so that a bad request never reaches the other ranks
        if (api == Api::Megatron) {
          parse_megatron_request(job->body, engine.tokenizer, limits, job->seed);
        } else {
          parse_completions_request(job->body, engine.tokenizer, limits, job->seed);
        }
      } catch (const ApiError& e) {
        res.status = 400;
        res.set_content(error_body(api, e.what()).dump(), "application/json");
        return;
      }
      std::future<json> answer = job->answer.get_future();
      {
        std::lock_guard lock(mutex);
        queue.push_back(job);
      }
      ready.notify_one();
      try {
        res.set_content(answer.get().dump(-1, ' ', false, json::error_handler_t::replace),
                        "application/json");
      } catch (const std::exception& e) {
        res.status = 500;
        res.set_content(error_body(api, e.what()).dump(), "application/json");
      }
    };
  };
  // GET /health answers without a key: load balancers and supervisors probe it.
  server.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"status":"ok"})", "application/json");
  });
  if (!a.api_key.empty()) {
    server.set_pre_routing_handler([&](const httplib::Request& req, httplib::Response& res) {
      if (req.path == "/health" || authorized(req.get_header_value("Authorization"), a.api_key)) {
        return httplib::Server::HandlerResponse::Unhandled;
      }
      res.status = 401;
      res.set_header("WWW-Authenticate", "Bearer");
      res.set_content(json{{"error", {{"message", "a valid API key is required: send the header "
                                                  "Authorization: Bearer <key>"},
                                      {"type", "invalid_request_error"},
                                      {"code", "invalid_api_key"}}}}.dump(),
                      "application/json");
      return httplib::Server::HandlerResponse::Handled;
    });
  }
  server.Put("/api", handle(Api::Megatron));
  server.Post("/v1/completions", handle(Api::Completions));
  server.Post("/completions", handle(Api::Completions));
  server.Get("/v1/models", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(json{{"object", "list"}, {"data", {{{"id", name}, {"object", "model"}, {"owned_by", "megatron"}}}}}.dump(),
                    "application/json");
  });
  const int port = a.port == 0 ? server.bind_to_any_port(a.host) : (server.bind_to_port(a.host, a.port) ? a.port : -1);
  if (port < 0) {
    channel.exchange(Message::Stop, "");
    throw UserError(fmt::format("cannot listen on {}:{} (in use, or not an address of this machine): "
                                "give another --port or --host",
                                a.host, a.port));
  }
  std::thread listener([&] { server.listen_after_bind(); });
  spdlog::info("megatron serve {}", a.description);
  spdlog::info("serving {} on http://{}:{}: PUT /api (Megatron), POST /v1/completions (OpenAI), "
               "GET /health; {}; Ctrl-C stops",
               name, a.host, port,
               a.api_key.empty() ? "no API key (--api-key or MEGATRON_API_KEY asks for one)"
                                 : "requests need the API key");
  if (!a.port_file.empty()) std::ofstream(a.port_file) << port << "\n";

  while (dist::stop_signal() == 0) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock lock(mutex);
      ready.wait_for(lock, kHeartbeat, [&] { return !queue.empty(); });
      if (!queue.empty()) {
        job = queue.front();
        queue.pop_front();
      }
    }
    if (!job) {
      channel.exchange(Message::Idle, "");
      continue;
    }
    const json message{{"api", int(job->api)}, {"body", job->body}, {"seed", job->seed}};
    channel.exchange(Message::Request, message.dump());
    try {
      job->answer.set_value(run_job(engine, limits, job->api, job->body, job->seed, name, ++served));
    } catch (...) {
      job->answer.set_exception(std::current_exception());
    }
  }
  spdlog::info("stopping: {} request{} served", served, served == 1 ? "" : "s");
  channel.exchange(Message::Stop, "");  // first: the other ranks are waiting in a broadcast
  server.stop();
  listener.join();
  {
    std::lock_guard lock(mutex);
    for (auto& job : queue) job->answer.set_exception(std::make_exception_ptr(std::runtime_error("the server stopped")));
  }
}


}  // namespace megatron::generate
