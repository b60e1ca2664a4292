#include "generate/server.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <map>
#include <mutex>
#include <random>

#include <unistd.h>

#include "core/error.hpp"
#include "dist/broadcast_text.hpp"
#include "dist/watchdog.hpp"
#include "generate/api.hpp"
#include "generate/batch_engine.hpp"
#include "generate/chat_api.hpp"
#include "generate/server_metrics.hpp"
#include "generate/text_stream.hpp"
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

constexpr const char* kJson = "application/json";

class Channel {
 public:
  explicit Channel(dist::Communicator* world) : world_(world) {}

  // Rank 0: sends; the others: receive. Returns the message and its text.
  std::pair<Message, std::string> exchange(Message kind, const std::string& text) {
    if (!world_) return {kind, text};
    return {Message(agree_value(int64_t(kind))), dist::broadcast_text(*world_, cpu_, text, 0)};
  }
  // Rank 0's flag, on every rank.
  bool agree(bool flag) { return !world_ ? flag : agree_value(flag ? 1 : 0) != 0; }

 private:
  int64_t agree_value(int64_t value) {
    tensor::Tensor header = cpu_.empty({1}, tensor::DType::I64);
    if (world_->rank() == 0) cpu_.write(header, &value);
    world_->broadcast(header, 0);
    cpu_.read(header, &value);
    return value;
  }
  dist::Communicator* world_;
  tensor::CpuBackend cpu_{1};
};

// One request as every rank runs it: its format and body, with the number and seed rank 0 gave it.
struct Job {
  Api api = Api::Megatron;
  json body;
  uint64_t seed = 0;
  int64_t id = 0;
  // Rank 0 only:
  std::string endpoint;
  bool stream = false;
  std::shared_ptr<HttpExchange> exchange;
  std::optional<ApiRequest> request;  // parsed once, as it arrived
  Clock::time_point arrived;
};

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

json error_body(Api api, const std::string& message, const char* type = "invalid_request_error") {
  if (api == Api::Megatron) return {{"error", message}};
  return {{"error", {{"message", message}, {"type", type}}}};
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

const char* api_name(Api api) {
  switch (api) {
    case Api::Megatron: return "PUT /api";
    case Api::Completions: return "POST /v1/completions";
    case Api::Chat: return "POST /v1/chat/completions";
  }
  return "";
}

struct Served {
  const Engine& engine;
  ApiLimits limits;
  std::optional<data::ChatTemplate> chat_template;
  std::string name;

  ApiRequest parse(Api api, const json& body, uint64_t seed) const {
    switch (api) {
      case Api::Megatron: return parse_megatron_request(body, engine.tokenizer, limits, seed);
      case Api::Completions: return parse_completions_request(body, engine.tokenizer, limits, seed);
      case Api::Chat: return parse_chat_request(body, engine.tokenizer, limits, seed, chat_template);
    }
    throw std::logic_error("unknown API");
  }

  // Every rank: the request (parsed from the job) generated.
  std::vector<Generated> run(const Job& job, const ApiRequest& request, const OnText& on_text,
                             std::function<bool()> cancelled, GenerateStats& stats) const {
    const auto begin = Clock::now();
    GenerateOptions options = request.options;
    options.cancelled = std::move(cancelled);
    std::vector<Generated> results = generate(engine, request.prompts, options, on_text, &stats);
    const double s = std::chrono::duration<double>(Clock::now() - begin).count();
    if (request.log) {
      spdlog::info("request {} ({}): {} prompt{}, {} tokens generated in {:.2f} s ({:.1f} tokens/s)",
                   job.id, api_name(job.api), request.prompts.size(),
                   request.prompts.size() == 1 ? "" : "s", stats.decode_tokens, s,
                   double(stats.decode_tokens) / std::max(s, 1e-9));
    }
    return results;
  }

  json answer(const Job& job, const ApiRequest& request, const std::vector<Generated>& results) const {
    switch (job.api) {
      case Api::Megatron: return megatron_response(request, results, engine.tokenizer);
      case Api::Completions:
        return completions_response(request, results, engine.tokenizer, name, job.id, unix_now());
      case Api::Chat: return chat_response(request, results, engine.tokenizer, name, job.id, unix_now());
    }
    return {};
  }
};

// Rank 0's streamed answer: server-sent events in OpenAI's chunk shapes, then [DONE].
class EventStream {
 public:
  EventStream(const Job& job, const ApiRequest& request, const std::string& model)
      : job_(job), header_{completion_id(job.api, job.id), unix_now(), model} {
    for (size_t i = 0; i < request.prompts.size(); ++i) texts_.emplace_back(request.options.stop);
    job_.exchange->start_stream(200, "text/event-stream");
    if (job_.api == Api::Chat) {
      for (size_t i = 0; i < texts_.size(); ++i) event(chunk(i, {{"role", "assistant"}, {"content", ""}}, ""));
    }
  }
  void grew(size_t i, const std::string& text) {
    const std::string part = texts_[i].next(text);
    if (!part.empty()) event(chunk(i, text_delta(part), ""));
  }
  void finish(const ApiRequest& request, const std::vector<Generated>& results) {
    for (size_t i = 0; i < results.size(); ++i) {
      const std::string part = texts_[i].rest(results[i].text);
      if (!part.empty()) event(chunk(i, text_delta(part), ""));
      event(chunk(i, job_.api == Api::Chat ? json::object() : json(""), results[i].finish_reason));
    }
    if (request.stream_usage) {
      event({{"id", header_.id},
             {"object", job_.api == Api::Chat ? "chat.completion.chunk" : "text_completion"},
             {"created", header_.created},
             {"model", header_.model},
             {"choices", json::array()},
             {"usage", usage_json(results)}});
    }
    done();
  }
  void fail(const std::string& message) {
    event(error_body(job_.api, message, "server_error"));
    done();
  }

 private:
  json text_delta(const std::string& part) const {
    return job_.api == Api::Chat ? json{{"content", part}} : json(part);
  }
  json chunk(size_t i, const json& delta, const std::string& finish_reason) const {
    return job_.api == Api::Chat ? chat_chunk(header_, i, delta, finish_reason)
                                 : completions_chunk(header_, i, delta.get<std::string>(), finish_reason);
  }
  void event(const json& data) { job_.exchange->send("data: " + dump(data) + "\n\n"); }
  void done() {
    job_.exchange->send("data: [DONE]\n\n");
    job_.exchange->finish();
  }
  const Job& job_;
  StreamHeader header_;
  std::vector<TextStream> texts_;
};

// A step message's requests to add (api, body, seed, id) and to cancel, applied on every rank.
// Rank 0 brings the requests it parsed on arrival (`parsed`), a listener for each (`prepare`),
// and answers the ones the engine cannot take (`refused`); the other ranks parse the bodies.
void apply_step(const Served& served, BatchEngine& batch, const json& message,
                const std::function<const ApiRequest*(int64_t)>& parsed,
                const std::function<void(int64_t, const ApiRequest&, BatchRequest&)>& prepare,
                const std::function<void(int64_t, const std::string&)>& refused) {
  for (const json& add : message["add"]) {
    const Job job{.api = Api(add["api"].get<int>()),
                  .body = add["body"],
                  .seed = add["seed"].get<uint64_t>(),
                  .id = add["id"].get<int64_t>()};
    try {  // a request that cannot be taken is refused alike on every rank
      const ApiRequest* known = parsed ? parsed(job.id) : nullptr;
      const ApiRequest request = known ? *known : served.parse(job.api, job.body, job.seed);
      BatchRequest r{.prompts = request.prompts, .options = request.options, .on_text = {}};
      if (prepare) prepare(job.id, request, r);
      batch.add(job.id, std::move(r));
    } catch (const std::exception& e) {
      if (refused) refused(job.id, e.what());
    }
  }
  for (const json& id : message["cancel"]) batch.cancel(id.get<int64_t>());
}

// The engine with its pool; a pool the device cannot hold is a flag to lower, not a crash.
std::unique_ptr<BatchEngine> make_batch(const Engine& engine, const BatchOptions& options) {
  try {
    return std::make_unique<BatchEngine>(engine, options);
  } catch (const std::bad_alloc&) {
  } catch (const RuntimeFailure&) {  // the GPU's out of memory
  }
  throw UserError(fmt::format("cannot allocate the key/value pool of {} blocks: give a smaller "
                              "--kv-cache-memory (or --max-batch)",
                              options.blocks));
}

void serve_other_rank_continuous(const Served& served, Channel& channel, const BatchOptions& options) {
  const std::unique_ptr<BatchEngine> made = make_batch(served.engine, options);
  BatchEngine& batch = *made;
  while (true) {
    auto [kind, text] = channel.exchange(Message::Idle, "");
    if (kind == Message::Stop) return;
    if (kind != Message::Request) continue;
    apply_step(served, batch, json::parse(text), {}, {}, {});
    batch.step();
  }
}

void serve_other_rank(const Served& served, Channel& channel) {
  while (true) {
    auto [kind, text] = channel.exchange(Message::Idle, "");
    if (kind == Message::Stop) return;
    if (kind != Message::Request) continue;
    const json message = json::parse(text);
    Job job{.api = Api(message["api"].get<int>()),
            .body = message["body"],
            .seed = message["seed"].get<uint64_t>(),
            .id = message["id"].get<int64_t>()};
    GenerateStats stats;
    try {  // a request that fails fails on every rank alike: rank 0 answers 500, all go on
      served.run(job, served.parse(job.api, job.body, job.seed), {},
                 [&] { return channel.agree(false); }, stats);
    } catch (const std::invalid_argument&) {
    } catch (const ApiError&) {
    }
  }
}

}  // namespace

void serve(const Engine& engine, dist::Communicator* world, const ServeOptions& options) {
  ServeOptions a = options;
  if (a.continuous) {
    // The pool: --kv-cache-memory, or room for max_sequences sequences of the model's positions.
    BatchOptions& b = a.batch;
    const model::KvCache probe = engine.model.make_pool(engine.backend, 1, b.block_size);
    int64_t per_block = 0;
    for (const model::LayerCache& layer : probe.layers) per_block += layer.k.bytes() + layer.v.bytes();
    const int64_t per_sequence = (engine.max_positions + b.block_size - 1) / b.block_size;
    b.blocks = a.kv_cache_mib > 0 ? (a.kv_cache_mib << 20) / std::max<int64_t>(per_block, 1)
                                  : per_sequence * b.max_sequences;
    if (b.blocks < per_sequence) {
      throw UserError(fmt::format("--kv-cache-memory {} MiB does not hold one sequence of the model's "
                                  "{} positions: give at least {} MiB",
                                  a.kv_cache_mib, engine.max_positions,
                                  (per_sequence * per_block + (1 << 20) - 1) >> 20));
    }
    // On the CPU the pool is host memory: more than half the machine's would leave too little
    // for the model and end in the kernel's out-of-memory kill, not a message.
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    const int64_t memory = pages > 0 && page > 0 ? int64_t(pages) * int64_t(page) : 0;
    if (engine.backend.device() == tensor::Device::Cpu && memory > 0 && b.blocks * per_block > memory / 2) {
      throw UserError(fmt::format("the key/value pool would take {} MiB, more than half of this "
                                  "machine's {} MiB: give a smaller --kv-cache-memory (or --max-batch)",
                                  (b.blocks * per_block) >> 20, memory >> 20));
    }
    if (!world || world->rank() == 0) {
      spdlog::info("continuous batching: {} key/value blocks of {} positions ({} bytes on this rank), "
                   "{} sequences at once, {} tokens per step",
                   b.blocks, b.block_size, b.blocks * per_block, b.max_sequences,
                   std::max(b.step_tokens, b.max_sequences));
    }
  }
  // A grace of seconds, not training's half second: under mpirun a Ctrl-C reaches mpirun too,
  // which tears the job down while the ranks finalize, and MPI_Finalize then takes that long.
  dist::enable_graceful_stop(std::chrono::seconds(3));
  const Served served{.engine = engine,
                      .limits = {.max_positions = engine.max_positions, .max_prompts = a.max_prompts,
                                 .defaults = engine.defaults},
                      .chat_template = a.chat_template,
                      .name = a.model_name};
  Channel channel(world);
  if (world && world->rank() != 0) {
    return a.continuous ? serve_other_rank_continuous(served, channel, a.batch)
                        : serve_other_rank(served, channel);
  }

  ServerMetrics metrics;
  std::mutex mutex;
  std::condition_variable ready;
  std::deque<std::shared_ptr<Job>> queue;
  std::atomic<bool> draining{false};
  std::atomic<int64_t> batch_waiting{0};  // continuous batching: requests the engine holds unstarted
  std::random_device entropy;
  uint64_t next_seed = (uint64_t(entropy()) << 32) | entropy();
  int64_t next_id = 0;

  const auto since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  const auto reply = [&](HttpExchange& ex, const std::string& endpoint, Clock::time_point arrived,
                         int status, const std::string& type, std::string body, HttpHeaders headers = {}) {
    metrics.answered(endpoint, status, since(arrived));  // first: the client may ask for them next
    ex.respond(status, type, std::move(body), std::move(headers));
  };

  const auto enqueue = [&](Api api, const std::string& endpoint, const HttpRequest& req,
                           const std::shared_ptr<HttpExchange>& ex, Clock::time_point arrived) {
    const auto refuse = [&](int status, const std::string& message, HttpHeaders headers = {}) {
      reply(*ex, endpoint, arrived, status, kJson, dump(error_body(api, message)), std::move(headers));
    };
    if (draining) return refuse(503, "the server is shutting down", {{"Retry-After", "5"}});
    auto job = std::make_shared<Job>(
        Job{.api = api, .endpoint = endpoint, .exchange = ex, .arrived = arrived});
    try {
      job->body = json::parse(req.body);
    } catch (const json::exception&) {
      return refuse(400, "the request body is not JSON");
    }
    {
      std::lock_guard lock(mutex);
      job->seed = next_seed++;
    }
    try {  // checked here, so that a bad request never reaches the queue or the other ranks
      job->request = served.parse(api, job->body, job->seed);
      job->stream = job->request->stream;
    } catch (const ApiError& e) {
      return refuse(400, e.what());
    }
    std::unique_lock lock(mutex);
    if (int64_t(queue.size()) + batch_waiting >= a.max_queue) {
      lock.unlock();
      return refuse(503, fmt::format("the server is busy: {} requests are waiting; try again shortly",
                                     a.max_queue),
                    {{"Retry-After", "1"}});
    }
    job->id = ++next_id;
    queue.push_back(job);
    metrics.queue(int64_t(queue.size()), 1);
    lock.unlock();
    ready.notify_one();
  };

  const auto handle = [&](HttpRequest req, std::shared_ptr<HttpExchange> ex) {
    const auto arrived = Clock::now();
    if (!a.api_key.empty() && req.path != "/health" && !authorized(req.header("Authorization"), a.api_key)) {
      return reply(*ex, req.path, arrived, 401, kJson,
                   json{{"error", {{"message", "a valid API key is required: send the header "
                                               "Authorization: Bearer <key>"},
                                   {"type", "invalid_request_error"},
                                   {"code", "invalid_api_key"}}}}.dump(),
                   {{"WWW-Authenticate", "Bearer"}});
    }
    struct Route {
      const char* path;
      const char* method;
      const char* endpoint;
    };
    static constexpr Route kRoutes[] = {
        {"/health", "GET", "/health"},
        {"/metrics", "GET", "/metrics"},
        {"/v1/models", "GET", "/v1/models"},
        {"/api", "PUT", "/api"},
        {"/v1/completions", "POST", "/v1/completions"},
        {"/completions", "POST", "/v1/completions"},
        {"/v1/chat/completions", "POST", "/v1/chat/completions"},
        {"/chat/completions", "POST", "/v1/chat/completions"},
    };
    const Route* route = nullptr;
    for (const Route& r : kRoutes) {
      if (req.path == r.path) route = &r;
    }
    if (!route) {
      return reply(*ex, "other", arrived, 404, kJson,
                   dump(error_body(Api::Completions, "no such endpoint: " + req.path)));
    }
    const std::string endpoint = route->endpoint;
    if (req.method != route->method) {
      return reply(*ex, endpoint, arrived, 405, kJson,
                   dump(error_body(Api::Completions, fmt::format("{} takes {} only", req.path, route->method))),
                   {{"Allow", route->method}});
    }
    if (endpoint == "/health") {
      if (draining) return reply(*ex, endpoint, arrived, 503, kJson, R"({"status":"draining"})");
      return reply(*ex, endpoint, arrived, 200, kJson, R"({"status":"ok"})");
    }
    if (endpoint == "/metrics") {
      return reply(*ex, endpoint, arrived, 200, "text/plain; version=0.0.4; charset=utf-8",
                   metrics.prometheus());
    }
    if (endpoint == "/v1/models") {
      return reply(*ex, endpoint, arrived, 200, kJson,
                   dump(json{{"object", "list"},
                             {"data", {{{"id", a.model_name}, {"object", "model"}, {"owned_by", "megatron"}}}}}));
    }
    const Api api = endpoint == "/api" ? Api::Megatron
                    : endpoint == "/v1/completions" ? Api::Completions
                                                    : Api::Chat;
    enqueue(api, endpoint, req, ex, arrived);
  };

  std::optional<HttpServer> listening;
  try {
    listening.emplace(a.host, a.port, a.http, handle);
  } catch (...) {
    channel.exchange(Message::Stop, "");  // the other ranks are waiting for requests
    throw;
  }
  HttpServer& http = *listening;
  // The exchanges queued hold the server's connections: released before it goes, however
  // serving ends.
  struct Release {
    HttpServer& http;
    std::mutex& mutex;
    std::deque<std::shared_ptr<Job>>& queue;
    ~Release() {
      http.stop();
      std::lock_guard lock(mutex);
      queue.clear();
    }
  } release{http, mutex, queue};
  http.start();
  spdlog::info("megatron serve {}", a.description);
  spdlog::info("serving {} on http://{}:{}: PUT /api (Megatron), POST /v1/completions and "
               "/v1/chat/completions (OpenAI; {}), GET /health and /metrics; {}; Ctrl-C stops",
               a.model_name, a.host, http.port(),
               a.chat_template ? "chat template " + std::string(data::chat_template_name(*a.chat_template))
                               : std::string("no chat template"),
               a.api_key.empty() ? "no API key (--api-key or MEGATRON_API_KEY asks for one)"
                                 : "requests need the API key");
  if (!a.port_file.empty()) std::ofstream(a.port_file) << http.port() << "\n";

  int64_t answered = 0;
  const auto start_draining = [&] {
    if (draining || dist::stop_signal() == 0) return;
    draining = true;
    http.stop_accepting();
    std::lock_guard lock(mutex);
    spdlog::info("stopping: finishing the requests taken first (a second Ctrl-C ends at once)");
  };
  if (a.continuous) {
    const std::unique_ptr<BatchEngine> made = make_batch(engine, a.batch);
    BatchEngine& batch = *made;
    struct Active {
      std::shared_ptr<Job> job;
      std::optional<EventStream> events;
      bool cancelling = false;
    };
    std::map<int64_t, Active> active;
    while (true) {
      start_draining();
      std::vector<std::shared_ptr<Job>> intake;
      {
        std::unique_lock lock(mutex);
        if (batch.idle()) ready.wait_for(lock, kHeartbeat, [&] { return !queue.empty(); });
        intake.assign(queue.begin(), queue.end());
        queue.clear();
      }
      json adds = json::array(), cancels = json::array();
      for (const auto& job : intake) {
        if (job->exchange->gone()) {  // its client left while it waited
          metrics.abandoned();
          continue;
        }
        adds.push_back({{"api", int(job->api)}, {"body", job->body}, {"seed", job->seed}, {"id", job->id}});
        active[job->id].job = job;
      }
      for (auto& [id, act] : active) {
        if (!act.cancelling && act.job->exchange->gone()) {
          act.cancelling = true;
          cancels.push_back(id);
        }
      }
      if (adds.empty() && cancels.empty() && batch.idle()) {
        metrics.queue(0, 0);
        if (draining) break;
        channel.exchange(Message::Idle, "");
        continue;
      }
      const json message{{"add", adds}, {"cancel", cancels}};
      channel.exchange(Message::Request, message.dump());
      apply_step(
          served, batch, message,
          [&](int64_t id) -> const ApiRequest* { return &*active.at(id).job->request; },
          [&](int64_t id, const ApiRequest& request, BatchRequest& r) {
            Active& act = active[id];
            if (!act.job->stream) return;
            act.events.emplace(*act.job, request, a.model_name);
            r.on_text = [events = &*act.events](size_t i, const std::string& text) { events->grew(i, text); };
          },
          [&](int64_t id, const std::string& why) {
            Active& act = active[id];
            const std::string message =
                "the server cannot take this request: " + why + " (--kv-cache-memory, --max-batch)";
            if (act.events) {
              act.events->fail(message);
            } else {
              reply(*act.job->exchange, act.job->endpoint, act.job->arrived, 503, kJson,
                    dump(error_body(act.job->api, message)));
            }
            active.erase(id);
          });
      std::vector<Finished> finished;
      try {
        finished = batch.step();
      } catch (const std::exception& e) {  // every request in hand fails alike
        for (auto& [id, act] : active) {
          if (act.events) {
            act.events->fail(e.what());
          } else {
            reply(*act.job->exchange, act.job->endpoint, act.job->arrived, 500, kJson,
                  dump(error_body(act.job->api, e.what(), "server_error")));
          }
        }
        throw;
      }
      batch_waiting = batch.waiting();
      metrics.queue(batch.waiting(), batch.running());
      metrics.kv_blocks(batch.blocks_used(), batch.blocks());
      for (Finished& f : finished) {
        auto it = active.find(f.id);
        if (it == active.end()) continue;
        Active& act = it->second;
        int64_t prompt = 0, generated = 0;
        for (const Generated& g : f.results) {
          prompt += g.prompt_tokens;
          generated += int64_t(g.tokens.size()) - g.prompt_tokens;
        }
        metrics.tokens(prompt, generated);
        const Job& job = *act.job;
        if (!f.results.empty() && f.results[0].finish_reason == "cancelled") {
          metrics.abandoned();
          spdlog::info("request {}: its client left after {} tokens; stopped", job.id, generated);
        } else {
          const double s = since(job.arrived);
          if (act.job->request->log) {
            spdlog::info("request {} ({}): {} prompt{}, {} tokens generated in {:.2f} s", job.id,
                         api_name(job.api), f.results.size(), f.results.size() == 1 ? "" : "s", generated, s);
          }
          if (act.events) {
            metrics.answered(job.endpoint, 200, s);
            act.events->finish(*act.job->request, f.results);
          } else {
            reply(*job.exchange, job.endpoint, job.arrived, 200, kJson, dump(served.answer(job, *act.job->request, f.results)));
          }
          ++answered;
        }
        active.erase(it);
      }
    }
  }
  while (!a.continuous) {
    if (!draining && dist::stop_signal() != 0) {
      draining = true;
      http.stop_accepting();
      std::lock_guard lock(mutex);
      spdlog::info("stopping: finishing {} queued request{} first (a second Ctrl-C ends at once)",
                   queue.size(), queue.size() == 1 ? "" : "s");
    }
    std::shared_ptr<Job> job;
    {
      std::unique_lock lock(mutex);
      ready.wait_for(lock, kHeartbeat, [&] { return !queue.empty(); });
      if (!queue.empty()) {
        job = queue.front();
        queue.pop_front();
      }
      metrics.queue(int64_t(queue.size()), job ? 1 : 0);
      if (!job && draining) break;
    }
    if (!job) {
      channel.exchange(Message::Idle, "");
      continue;
    }
    if (job->exchange->gone()) {  // never run: its client left while it waited
      metrics.abandoned();
      spdlog::info("request {}: its client left before it ran; dropped", job->id);
      continue;
    }
    const json message{{"api", int(job->api)}, {"body", job->body}, {"seed", job->seed}, {"id", job->id}};
    channel.exchange(Message::Request, message.dump());
    std::optional<EventStream> events;
    GenerateStats stats;
    const auto cancelled = [&] { return channel.agree(job->exchange->gone()); };
    try {
      const OnText on_text = [&](size_t i, const std::string& text) {
        if (events) events->grew(i, text);
      };
      const ApiRequest& request = *job->request;
      if (job->stream) events.emplace(*job, request, a.model_name);
      const std::vector<Generated> results =
          served.run(*job, request, job->stream ? on_text : OnText{}, cancelled, stats);
      metrics.kv_cache(stats.kv_cache_bytes);
      int64_t prompt = 0, generated = 0;
      for (const Generated& g : results) {
        prompt += g.prompt_tokens;
        generated += int64_t(g.tokens.size()) - g.prompt_tokens;
      }
      metrics.tokens(prompt, generated);
      if (!results.empty() && results[0].finish_reason == "cancelled") {
        metrics.abandoned();
        spdlog::info("request {}: its client left after {} tokens; stopped", job->id, generated);
        continue;
      }
      if (events) {
        metrics.answered(job->endpoint, 200, since(job->arrived));
        events->finish(request, results);
      } else {
        reply(*job->exchange, job->endpoint, job->arrived, 200, kJson, dump(served.answer(*job, request, results)));
      }
      ++answered;
    } catch (const std::exception& e) {
      if (events) {
        events->fail(e.what());
        metrics.answered(job->endpoint, 200, since(job->arrived));
      } else {
        reply(*job->exchange, job->endpoint, job->arrived, 500, kJson,
              dump(error_body(job->api, e.what(), "server_error")));
      }
    }
  }
  spdlog::info("stopped: {} request{} answered", answered, answered == 1 ? "" : "s");
  channel.exchange(Message::Stop, "");  // the other ranks are waiting in a broadcast
}

}  // namespace megatron::generate
