// OpenAI's chat completions (`POST /v1/chat/completions`) for the generation server: the
// messages rendered by the served model's chat template with the assistant's header after them,
// the answer cut where the template ends an assistant turn, and the response and streamed events
// in OpenAI's chat.completion and chat.completion.chunk shapes. Errors are ApiError.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "data/chat_template.hpp"
#include "data/tokenizer.hpp"
#include "generate/api.hpp"

namespace megatron::generate {

// `chat_template` null: the server has none, and every chat request is refused saying so.
ApiRequest parse_chat_request(const nlohmann::json& body, const data::Tokenizer& tokenizer,
                              const ApiLimits& limits, uint64_t seed,
                              const std::optional<data::ChatTemplate>& chat_template);

nlohmann::json chat_response(const ApiRequest& request, const std::vector<Generated>& results,
                             const data::Tokenizer& tokenizer, const std::string& model, int64_t id,
                             int64_t created);

// One event of a streamed chat answer: choice `index`'s delta (the role in the first, then new
// content), and its finish reason in the last (null before).
nlohmann::json chat_chunk(const StreamHeader& header, size_t index, const nlohmann::json& delta,
                          const std::string& finish_reason);

}  // namespace megatron::generate
