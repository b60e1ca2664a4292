// The generation server's two request formats, parsed and checked, and their responses:
// Megatron's `PUT /api` (its text generation server's fields and rules) and an OpenAI-style
// `POST /v1/completions` as lm-evaluation-harness's local-completions and the `openai` client
// send it. A request that breaks a rule throws ApiError with the message for the client.
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

enum class Api { Megatron, Completions };

struct ApiRequest {
  Api api = Api::Megatron;
  std::vector<std::vector<int32_t>> prompts;  // tokenized, each fitting the model
  GenerateOptions options;
  bool echo = false;            // completions: the prompt's text and tokens in the answer
  bool want_logprobs = false;   // the answer carries log-probabilities
  bool log = true;              // Megatron's no_log turns the server's request line off
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

}  // namespace megatron::generate
