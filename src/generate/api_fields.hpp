// Reading the generation server's JSON requests: typed fields with their rules, the seed rule,
// unknown fields refused, prompts checked against the model, and the sampling, stop and stream
// fields that OpenAI's completions and chat completions share. Every failure is an ApiError.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "data/tokenizer.hpp"
#include "generate/api.hpp"

namespace megatron::generate::api_fields {

// The field's value when present (null counts as absent), else `fallback`.
template <typename T>
T get(const nlohmann::json& body, const char* field, T fallback) {
  const auto it = body.find(field);
  if (it == body.end() || it->is_null()) return fallback;
  if constexpr (std::is_same_v<T, bool>) {
    if (!it->is_boolean()) throw ApiError(fmt::format("{} must be a boolean", field));
    return it->template get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    if (!it->is_number_integer()) throw ApiError(fmt::format("{} must be an integer", field));
    return it->template get<T>();
  } else {
    if (!it->is_number()) throw ApiError(fmt::format("{} must be a number", field));
    return it->template get<T>();
  }
}

// A seed field: absent or null, `fallback` (the server's fresh seed for the request); else a
// whole number from 0 to 2^64 - 1, each a fixed seed. Anything else (negative, fractional,
// past 2^64 - 1, which JSON parsers read as a fraction) is refused, never read as "random".
uint64_t seed_field(const nlohmann::json& body, const char* field, uint64_t fallback);

void refuse_unknown(const nlohmann::json& body, const std::vector<std::string>& known, const char* api);

// `ids` checked against the vocabulary and the model's positions (one left to generate into
// when max_tokens > 0).
std::vector<int32_t> fit(std::vector<int32_t> ids, size_t index, const ApiLimits& limits,
                         int64_t max_tokens, const data::Tokenizer& tokenizer);

// Whether a request chooses its own sampling; if not, the model's defaults (its recipe's
// generation section) apply.
bool asks_sampling(const nlohmann::json& body);

// OpenAI's fields that completions and chat completions share: temperature, top_p, top_k, n,
// stop, seed, stream and stream_options, the penalties (0 only); into `r`.
void read_openai_common(const nlohmann::json& body, const ApiLimits& limits, uint64_t seed,
                        ApiRequest& r);

}  // namespace megatron::generate::api_fields
