#include "generate/api_fields.hpp"

#include <algorithm>

namespace megatron::generate::api_fields {

using nlohmann::json;

uint64_t seed_field(const json& body, const char* field, uint64_t fallback) {
  const auto it = body.find(field);
  if (it == body.end() || it->is_null()) return fallback;
  if (it->is_number_unsigned()) return it->get<uint64_t>();
  if (it->is_number_integer() && it->get<int64_t>() >= 0) return uint64_t(it->get<int64_t>());
  throw ApiError(fmt::format("{} must be a whole number from 0 to 18446744073709551615 (leave it "
                             "out for a random seed)",
                             field));
}

void refuse_unknown(const json& body, const std::vector<std::string>& known, const char* api) {
  for (const auto& [key, value] : body.items()) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      throw ApiError(fmt::format("{} is not a field of {} requests", key, api));
    }
  }
}

std::vector<int32_t> fit(std::vector<int32_t> ids, size_t index, const ApiLimits& limits,
                         int64_t max_tokens, const data::Tokenizer& tokenizer) {
  if (ids.empty()) throw ApiError(fmt::format("prompt {} is empty", index));
  for (const int32_t id : ids) {
    if (id < 0 || id >= tokenizer.vocab_size()) {
      throw ApiError(fmt::format("prompt {} has token {}, outside the vocabulary of {}", index, id,
                                 tokenizer.vocab_size()));
    }
  }
  const int64_t room = max_tokens > 0 ? limits.max_positions - 1 : limits.max_positions;
  if (int64_t(ids.size()) > room) {
    throw ApiError(fmt::format("prompt {} has {} tokens; the model reads {} positions, so at most "
                               "{} fit{}",
                               index, ids.size(), limits.max_positions, room,
                               max_tokens > 0 ? " with tokens to generate" : ""));
  }
  return ids;
}

bool asks_sampling(const json& body) {
  for (const char* key : {"temperature", "top_k", "top_p"}) {
    const auto it = body.find(key);
    if (it != body.end() && !it->is_null()) return true;
  }
  return false;
}

void read_openai_common(const json& body, const ApiLimits& limits, uint64_t seed, ApiRequest& r) {
  GenerateOptions& o = r.options;
  const double temperature = get<double>(body, "temperature", 1.0);
  if (!(temperature >= 0.0 && temperature <= 100.0)) throw ApiError("temperature must be from 0 to 100");
  const double top_p = get<double>(body, "top_p", 1.0);
  if (!(top_p > 0.0 && top_p <= 1.0)) throw ApiError("top_p must be greater than 0 and at most 1");
  const int64_t top_k = get<int64_t>(body, "top_k", 0);
  if (top_k < 0 || top_k > 1000) throw ApiError("top_k must be an integer from 0 to 1000");
  if (top_k > 0 && top_p < 1.0) throw ApiError("cannot set both top_k and top_p");
  // top_p 1 keeps every token.
  o.sampling = sampling_for(temperature, top_k, top_p < 1.0 ? top_p : 0.0);
  if (!asks_sampling(body) && limits.defaults.sampling) o.sampling = *limits.defaults.sampling;
  r.n = get<int64_t>(body, "n", 1);
  if (r.n < 1 || r.n > 16) throw ApiError("n must be an integer from 1 to 16");
  if (get<int64_t>(body, "best_of", r.n) != r.n) throw ApiError("best_of must equal n");
  if (get<double>(body, "presence_penalty", 0.0) != 0.0 || get<double>(body, "frequency_penalty", 0.0) != 0.0) {
    throw ApiError("presence_penalty and frequency_penalty are not supported: send 0");
  }
  r.stream = get<bool>(body, "stream", false);
  const auto options = body.find("stream_options");
  if (options != body.end() && !options->is_null()) {
    if (!r.stream) throw ApiError("stream_options is only allowed when stream is true");
    if (!options->is_object()) throw ApiError("stream_options must be an object");
    refuse_unknown(*options, {"include_usage"}, "stream_options");
    r.stream_usage = get<bool>(*options, "include_usage", false);
  }
  const auto stop = body.find("stop");
  if (stop != body.end() && !stop->is_null()) {
    if (stop->is_string()) {
      o.stop.push_back(stop->get<std::string>());
    } else if (stop->is_array() && stop->size() <= 4 &&
               std::all_of(stop->begin(), stop->end(), [](const json& s) { return s.is_string(); })) {
      for (const json& s : *stop) o.stop.push_back(s.get<std::string>());
    } else {
      throw ApiError("stop must be a string or a list of up to 4 strings");
    }
  }
  o.seed = seed_field(body, "seed", seed);
}

}  // namespace megatron::generate::api_fields
