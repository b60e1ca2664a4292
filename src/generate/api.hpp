// The generation server's request formats, parsed and checked, and their responses: Megatron's
// `PUT /api` (its text generation server's fields and rules) and an OpenAI-style
// `POST /v1/completions` as lm-evaluation-harness's local-completions and the `openai` client
// send it (chat completions: chat_api.hpp). A request that breaks a rule throws ApiError with the
// message for the client.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/tokenizer.hpp"
#include "generate/generator.hpp"

namespace megatron::generate {

class ApiError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class Api { Megatron, Completions, Chat };

struct ApiRequest {
  Api api = Api::Megatron;
  std::vector<std::vector<int32_t>> prompts;  // tokenized, each fitting the model
  GenerateOptions options;
  bool echo = false;            // completions: the prompt's text and tokens in the answer
  bool want_logprobs = false;   // the answer carries log-probabilities
  bool log = true;              // Megatron's no_log turns the server's request line off
  int64_t n = 1;                // OpenAI's: completions per prompt (prompts holds each n times)
  bool stream = false;          // OpenAI's: server-sent events as the text grows
  bool stream_usage = false;    // stream_options.include_usage: an event with the usage last
};

// What the served model allows and does by default.
struct ApiLimits {
  int64_t max_positions = 0;
  int64_t max_prompts = 128;  // per request (Megatron's limit)
  GenerationDefaults defaults;  // for requests that name no sampling or stop token
};

// `seed` is used where the request gives none. Throws ApiError.
ApiRequest parse_megatron_request(const nlohmann::json& body, const data::Tokenizer& tokenizer,
                                  const ApiLimits& limits, uint64_t seed);
ApiRequest parse_completions_request(const nlohmann::json& body, const data::Tokenizer& tokenizer,
                                     const ApiLimits& limits, uint64_t seed);

// {"text": [prompt + generated], "segments": [[token texts]], "tokens": [[ids]], "logprobs":
// [[...]] (when asked: of every token after the first)}.
nlohmann::json megatron_response(const ApiRequest& request, const std::vector<Generated>& results,
                                 const data::Tokenizer& tokenizer);
// OpenAI's text_completion object.
nlohmann::json completions_response(const ApiRequest& request, const std::vector<Generated>& results,
                                    const data::Tokenizer& tokenizer, const std::string& model,
                                    int64_t id, int64_t created);

// "cmpl-7" or "chatcmpl-7".
std::string completion_id(Api api, int64_t id);
// OpenAI's usage object: prompt, completion and total tokens.
nlohmann::json usage_json(const std::vector<Generated>& results);

// What every event of one streamed answer repeats.
struct StreamHeader {
  std::string id;
  int64_t created = 0;
  std::string model;
};
// One event of a streamed completion: choice `index`'s new text, and its finish reason in the
// last (null before).
nlohmann::json completions_chunk(const StreamHeader& header, size_t index, const std::string& text,
                                 const std::string& finish_reason);

}  // namespace megatron::generate
