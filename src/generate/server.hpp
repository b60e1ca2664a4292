// The text generation server: Megatron's `PUT /api`, OpenAI's `POST /v1/completions` and
// `POST /v1/chat/completions` (also without /v1), streamed or not, with GET /health, /metrics and
// /v1/models; requests queue (bounded) and run continuously batched (or one at a time). Rank 0 serves HTTP
// (http_server.hpp); every rank runs each request's generation, which rank 0 hands them with a
// broadcast, and a request whose client has gone stops, queued or running.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "data/chat_template.hpp"
#include "dist/communicator.hpp"
#include "generate/batch_engine.hpp"
#include "generate/generator.hpp"
#include "generate/http_server.hpp"

namespace megatron::generate {

struct ServeOptions {
  std::string host = "0.0.0.0";
  int port = 5000;            // 0: any free port (logged, and written to port_file)
  std::string port_file;      // written once listening, when given
  std::string model_name;     // the model's name in OpenAI answers
  int64_t max_prompts = 128;  // per request
  std::string description;    // logged when serving starts: the model and where it runs
  // When set, every request but GET /health must carry `Authorization: Bearer <api_key>`; others
  // get 401 (so a server on a shared network is not open to everyone on it).
  std::string api_key;
  // Chat completions render messages with it; without one they are refused.
  std::optional<data::ChatTemplate> chat_template;
  int64_t max_queue = 64;  // requests waiting at most; more are answered 503
  // Continuous batching (batch_engine.hpp) with this pool and these limits; false: Megatron's
  // static path, one request at a time with its prompts batched together.
  bool continuous = true;
  BatchOptions batch;     // its blocks come from kv_cache_mib
  int64_t kv_cache_mib = 0;  // the key/value pool on each rank; 0: max_sequences full sequences
  HttpLimits http;
};

// Serves `engine`'s model until SIGINT or SIGTERM (dist::stop_signal), then stops taking
// requests (503), finishes the ones queued and running, and returns. `world`: every rank of the model (null for one process); each calls serve.
// A bad request gets HTTP 400 and a JSON error, a failing one 500; UserError when rank 0 cannot
// listen on the host and port.
void serve(const Engine& engine, dist::Communicator* world, const ServeOptions& options);

}  // namespace megatron::generate
