// `megatron serve CHECKPOINT [--port 5000] [--host 0.0.0.0] [--nproc N]`: the checkpoint's model
// behind generate::serve (Megatron's `PUT /api`, OpenAI's `POST /v1/completions` and
// `/v1/chat/completions`); SIGINT or SIGTERM stops the server once the requests taken are answered.
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "cli/commands.hpp"
#include "cli/generation_model.hpp"
#include "cli/limits.hpp"
#include "core/error.hpp"
#include "data/chat_template.hpp"
#include "generate/server.hpp"

namespace megatron::cli {
namespace {

struct ServeArgs {
  ModelArgs model;
  generate::ServeOptions options;
  bool api_key_given = false;  // --api-key or MEGATRON_API_KEY, even if empty
  std::string chat_template;   // a name, auto, or empty: the tokenizer's own when it has one
  std::string batching = "continuous";
  double request_timeout_s = 30.0;
  double write_timeout_s = 30.0;
};

void run_serve(ServeArgs a) {
  // An empty address binds every interface: that must be asked for by name.
  if (a.options.host.empty()) {
    throw UserError("--host is empty: give the address to listen on (0.0.0.0 to listen on every "
                    "interface, 127.0.0.1 for this machine only)");
  }
  // An empty key (`--api-key "$KEY"` with KEY unset) would silently serve everyone.
  if (a.api_key_given && a.options.api_key.empty()) {
    throw UserError("--api-key (or MEGATRON_API_KEY) is empty: give the key, or leave both out "
                    "to serve without one");
  }
  // A key that cannot travel in a header line would lock every client out.
  for (const unsigned char ch : a.options.api_key) {
    if (ch < 0x21 || ch > 0x7e) {
      throw UserError("--api-key (or MEGATRON_API_KEY) holds a space or a control or non-ASCII "
                      "character: use printable ASCII without spaces");
    }
  }
  GenerationModel model(a.model, [&] {
    // Where clients wait for the port: it must be writable before anything starts.
    if (!a.options.port_file.empty() && !std::ofstream(a.options.port_file)) {
      throw UserError("--port-file " + a.options.port_file +
                      ": cannot write there; give a writable path");
    }
  });
  if (!a.chat_template.empty()) {
    a.options.chat_template = model.chat_template(a.chat_template);
  } else {
    try {  // the tokenizer's own, when it has one megatron renders
      a.options.chat_template = model.chat_template("auto");
    } catch (const UserError&) {
    }
  }
  a.options.continuous = a.batching == "continuous";
  a.options.http.request_timeout = std::chrono::milliseconds(int64_t(a.request_timeout_s * 1000));
  a.options.http.write_timeout = std::chrono::milliseconds(int64_t(a.write_timeout_s * 1000));
  if (a.options.model_name.empty())
    a.options.model_name = std::filesystem::path(model.checkpoint()).parent_path().filename().string();
  a.options.description = model.description();
  generate::serve(model.engine(), model.world(), a.options);
}

}  // namespace

void add_serve_command(CLI::App& app, Actions& actions) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "serve", "Serve text generation over HTTP: Megatron's PUT /api, OpenAI's /v1/completions and "
               "/v1/chat/completions (streamed or not), /health and /metrics");
  args->model.add_to(cmd);
  cmd->add_option("--port", args->options.port, "TCP port (default 5000; 0: any free one, logged)")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--host", args->options.host, "Address to listen on (default 0.0.0.0: every interface)");
  cmd->add_option("--port-file", args->options.port_file, "Write the port here once listening");
  cmd->add_option("--model-name", args->options.model_name,
                  "The model's name in OpenAI answers (default: the checkpoint directory's)");
  cmd->add_option("--max-prompts", args->options.max_prompts, "Prompts per request at most (default 128)")
      ->check(whole_number(4096));
  cmd->add_option("--api-key", args->options.api_key,
                  "Require `Authorization: Bearer KEY` on every request but GET /health (401 "
                  "otherwise); prefer the environment variable, which other users' ps cannot see")
      ->envname("MEGATRON_API_KEY");
  cmd->add_option("--chat-template", args->chat_template,
                  "How /v1/chat/completions renders messages: " + data::chat_template_names() +
                      ", or auto (default: the tokenizer's own, when it has one; without a "
                      "template chat requests are refused)");
  cmd->add_option("--batching", args->batching,
                  "continuous (default: requests join and leave the running batch every step, keys "
                  "and values in blocks of a pool) or static (one request at a time, Megatron's)")
      ->check(CLI::IsMember({"continuous", "static"}));
  cmd->add_option("--kv-cache-memory", args->options.kv_cache_mib,
                  "MiB of keys and values on each rank for continuous batching (default: --max-batch "
                  "sequences of the model's positions)")
      ->check(whole_number(int64_t{1} << 30));
  cmd->add_option("--max-batch", args->options.batch.max_sequences,
                  "Sequences generating at once under continuous batching (default 32)")
      ->check(whole_number(4096));
  cmd->add_option("--block-size", args->options.batch.block_size,
                  "Positions per key/value block (default 16)")
      ->check(whole_number(1024));
  cmd->add_option("--step-tokens", args->options.batch.step_tokens,
                  "Tokens each step runs at most: one per decoding sequence, then prompt chunks "
                  "(default 256)")
      ->check(whole_number(1 << 20));
  cmd->add_option("--max-queue", args->options.max_queue,
                  "Requests waiting at most; more are answered 503 with Retry-After (default 64)")
      ->check(whole_number(1 << 20));
  cmd->add_option("--max-connections", args->options.http.max_connections,
                  "Connections open at most; more are answered 503 (default 256)")
      ->check(whole_number(1 << 16));
  cmd->add_option("--request-timeout", args->request_timeout_s,
                  "Seconds a client has to send a whole request, headers and body, and a kept-alive "
                  "connection may idle (408 past it; default 30)")
      ->check(CLI::Range(0.1, 86400.0));
  cmd->add_option("--write-timeout", args->write_timeout_s,
                  "Seconds a client has to take each part of an answer before it is disconnected "
                  "(default 30)")
      ->check(CLI::Range(0.1, 86400.0));
  actions.emplace_back(cmd, [args, cmd] {
    args->api_key_given = cmd->get_option("--api-key")->count() > 0 ||
                          std::getenv("MEGATRON_API_KEY") != nullptr;
    run_serve(*args);
  });
}

}  // namespace megatron::cli
