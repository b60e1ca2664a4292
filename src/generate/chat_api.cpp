#include "generate/chat_api.hpp"

#include <fmt/format.h>

#include "generate/api_fields.hpp"

namespace megatron::generate {
namespace {

using nlohmann::json;
using api_fields::get;

data::ChatRole role_named(const std::string& role, size_t index) {
  if (role == "system" || role == "developer") return data::ChatRole::System;
  if (role == "user") return data::ChatRole::User;
  if (role == "assistant") return data::ChatRole::Assistant;
  throw ApiError(fmt::format("messages[{}].role must be system, developer, user or assistant (tool "
                             "calls are not supported)",
                             index));
}

// A message's content: a string, or a list of text parts, joined.
std::string content_of(const json& message, size_t index) {
  const auto it = message.find("content");
  if (it == message.end() || it->is_null()) throw ApiError(fmt::format("messages[{}].content is required", index));
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array()) throw ApiError(fmt::format("messages[{}].content must be a string or a list of text parts", index));
  std::string text;
  for (const json& part : *it) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
        !part["text"].is_string()) {
      throw ApiError(fmt::format("messages[{}].content: only parts of type text are supported", index));
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

// The token's text and its UTF-8 bytes, as OpenAI's chat logprobs give them.
json token_entry(const data::Tokenizer& t, int32_t id, double logprob) {
  const int32_t ids[1] = {id};
  const std::string text = t.decode(ids);
  json bytes = json::array();
  for (const unsigned char c : text) bytes.push_back(int(c));
  return {{"token", text}, {"logprob", logprob}, {"bytes", bytes}};
}

}  // namespace

ApiRequest parse_chat_request(const json& body, const data::Tokenizer& tokenizer,
                              const ApiLimits& limits, uint64_t seed,
                              const std::optional<data::ChatTemplate>& chat_template) {
  if (!body.is_object()) throw ApiError("the request body must be a JSON object");
  if (!chat_template) {
    throw ApiError("this server has no chat template: its model's tokenizer names none; start it "
                   "with --chat-template, or use /v1/completions");
  }
  api_fields::refuse_unknown(
      body,
      {"model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k",
       "n", "stop", "seed", "stream", "stream_options", "logprobs", "top_logprobs", "user",
       "presence_penalty", "frequency_penalty"},
      "POST /v1/chat/completions");
  ApiRequest r{.api = Api::Chat};
  GenerateOptions& o = r.options;
  // Unbounded by default, as OpenAI's: until the turn ends or the model's positions run out.
  o.max_tokens = get<int64_t>(body, "max_completion_tokens", get<int64_t>(body, "max_tokens", limits.max_positions));
  if (o.max_tokens < 1) throw ApiError("max_tokens must be at least 1");
  api_fields::read_openai_common(body, limits, seed, r);
  r.want_logprobs = o.logprobs = get<bool>(body, "logprobs", false);
  o.top_logprobs = get<int64_t>(body, "top_logprobs", 0);
  if (o.top_logprobs < 0 || o.top_logprobs > 20) throw ApiError("top_logprobs must be an integer from 0 to 20");
  if (o.top_logprobs > 0 && !o.logprobs) throw ApiError("top_logprobs needs logprobs set to true");
  if (r.stream && r.want_logprobs) throw ApiError("stream cannot be combined with logprobs: send stream=false for them");

  const auto messages = body.find("messages");
  if (messages == body.end() || !messages->is_array() || messages->empty()) {
    throw ApiError("messages must be a non-empty list of {role, content}");
  }
  std::vector<data::ChatMessage> turns;
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& m = (*messages)[i];
    if (!m.is_object()) throw ApiError(fmt::format("messages[{}] must be an object", i));
    api_fields::refuse_unknown(m, {"role", "content", "name"}, "chat message");
    if (!m.contains("role") || !m["role"].is_string()) throw ApiError(fmt::format("messages[{}].role is required", i));
    turns.push_back({.role = role_named(m["role"].get<std::string>(), i), .content = content_of(m, i)});
  }
  std::string text;
  for (const data::SftSegment& s : data::render_chat(turns, *chat_template, true).segments) text += s.text;
  std::vector<int32_t> ids = api_fields::fit(tokenizer.encode(text), 0, limits, o.max_tokens, tokenizer);
  for (int64_t c = 0; c < r.n; ++c) r.prompts.push_back(ids);

  // The answer ends where the template ends an assistant turn: that token when it is one (left
  // out of the answer, as end-of-document is), and the text in any case.
  o.eod = tokenizer.special_tokens().eod;
  o.end_tokens = limits.defaults.end_tokens;
  const std::string turn_end(data::chat_turn_end(*chat_template));
  if (!turn_end.empty()) {
    const std::vector<int32_t> end = tokenizer.encode(turn_end);
    if (end.size() == 1) o.end_tokens.push_back(end[0]);
    o.stop.push_back(turn_end);
  }
  return r;
}

json chat_response(const ApiRequest& request, const std::vector<Generated>& results,
                   const data::Tokenizer& tokenizer, const std::string& model, int64_t id,
                   int64_t created) {
  json choices = json::array();
  for (size_t i = 0; i < results.size(); ++i) {
    const Generated& g = results[i];
    json choice{{"index", i},
                {"message", {{"role", "assistant"}, {"content", g.text}}},
                {"finish_reason", g.finish_reason},
                {"logprobs", nullptr}};
    if (request.want_logprobs) {
      json content = json::array();
      for (size_t t = size_t(g.prompt_tokens); t < g.tokens.size(); ++t) {
        json entry = token_entry(tokenizer, g.tokens[t], g.logprobs[t - 1]);
        json top = json::array();
        if (!g.top_logprobs.empty()) {
          for (const auto& [token, lp] : g.top_logprobs[t - 1]) top.push_back(token_entry(tokenizer, token, lp));
        }
        entry["top_logprobs"] = std::move(top);
        content.push_back(std::move(entry));
      }
      choice["logprobs"] = {{"content", content}};
    }
    choices.push_back(std::move(choice));
  }
  return {{"id", completion_id(Api::Chat, id)},
          {"object", "chat.completion"},
          {"created", created},
          {"model", model},
          {"choices", choices},
          {"usage", usage_json(results)}};
}

json chat_chunk(const StreamHeader& h, size_t index, const json& delta, const std::string& finish_reason) {
  return {{"id", h.id},
          {"object", "chat.completion.chunk"},
          {"created", h.created},
          {"model", h.model},
          {"choices",
           {{{"index", index},
             {"delta", delta},
             {"logprobs", nullptr},
             {"finish_reason", finish_reason.empty() ? json(nullptr) : json(finish_reason)}}}}};
}

}  // namespace megatron::generate
