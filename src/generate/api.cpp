#include "generate/api.hpp"

#include "generate/api_fields.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace megatron::generate {
namespace {

using nlohmann::json;
using api_fields::asks_sampling;
using api_fields::fit;
using api_fields::get;
using api_fields::refuse_unknown;
using api_fields::seed_field;

// A token's text for segments and logprobs (bytes that are not UTF-8 on their own are
// replaced when the answer is written).
std::string piece(const data::Tokenizer& t, int32_t id) {
  const int32_t ids[1] = {id};
  return t.decode(ids);
}

// The first token of `text` when it is exactly one token, for Megatron's stop_on_eol flags.
std::optional<int32_t> single_token(const data::Tokenizer& t, const std::string& text) {
  const std::vector<int32_t> ids = t.encode(text);
  if (ids.size() == 1) return ids[0];
  return std::nullopt;
}

}  // namespace

ApiRequest parse_megatron_request(const json& body, const data::Tokenizer& tokenizer,
                                  const ApiLimits& limits, uint64_t seed) {
  if (!body.is_object()) throw ApiError("the request body must be a JSON object");
  if (body.contains("sentences")) throw ApiError("sentences is no longer used; send prompts");
  if (body.contains("max_len")) throw ApiError("max_len is no longer used; send tokens_to_generate");
  refuse_unknown(body,
                 {"prompts", "tokens_to_generate", "logprobs", "temperature", "top_k", "top_p",
                  "top_p_decay", "top_p_bound", "add_BOS", "stop_on_eol", "stop_on_double_eol",
                  "prevent_newline_after_colon", "random_seed", "no_log", "beam_width",
                  "stop_token", "length_penalty"},
                 "PUT /api");
  const auto prompts = body.find("prompts");
  if (prompts == body.end()) throw ApiError("prompts argument required");
  if (!prompts->is_array() || prompts->empty()) throw ApiError("prompts is not a list of strings");
  if (int64_t(prompts->size()) > limits.max_prompts) {
    throw ApiError(fmt::format("Maximum number of prompts is {}", limits.max_prompts));
  }
  ApiRequest r{.api = Api::Megatron};
  GenerateOptions& o = r.options;
  o.max_tokens = get<int64_t>(body, "tokens_to_generate", 64);
  if (o.max_tokens < 0) throw ApiError("tokens_to_generate must be an integer greater than or equal to 0");
  o.logprobs = r.want_logprobs = get<bool>(body, "logprobs", false);
  if (o.max_tokens == 0 && !o.logprobs) throw ApiError("tokens_to_generate=0 implies logprobs should be True");
  const double temperature = get<double>(body, "temperature", 1.0);
  if (!(temperature > 0.0 && temperature <= 100.0)) {
    throw ApiError("temperature must be a positive number less than or equal to 100.0");
  }
  const int64_t top_k = get<int64_t>(body, "top_k", 0);
  if (top_k < 0 || top_k > 1000) throw ApiError("top_k must be an integer from 0 to 1000");
  const double top_p = get<double>(body, "top_p", 0.0);
  if (!(top_p >= 0.0 && top_p <= 1.0)) throw ApiError("top_p must be a number from 0 to 1");
  if (top_p > 0.0 && top_k > 0) throw ApiError("cannot set both top-k and top-p samplings.");
  o.sampling = {.temperature = temperature, .top_k = top_k, .top_p = top_p};
  if (!asks_sampling(body) && limits.defaults.sampling) o.sampling = *limits.defaults.sampling;
  o.top_p_decay = get<double>(body, "top_p_decay", 0.0);
  if (!(o.top_p_decay >= 0.0 && o.top_p_decay <= 1.0)) throw ApiError("top_p_decay must be a number from 0 to 1");
  if (o.top_p_decay > 0.0 && top_p == 0.0) throw ApiError("top_p_decay cannot be set without top_p");
  o.top_p_bound = get<double>(body, "top_p_bound", 0.0);
  if (o.top_p_bound > 0.0 && !(o.top_p_bound <= top_p)) {
    throw ApiError("top_p_bound must be greater than 0 and no more than top_p");
  }
  if (o.top_p_bound > 0.0 && top_p == 0.0) throw ApiError("top_p_bound cannot be set without top_p");
  const bool add_bos = get<bool>(body, "add_BOS", false);
  const auto eod = tokenizer.special_tokens().eod;
  const int64_t stop_token = get<int64_t>(body, "stop_token", eod.value_or(-1));
  if (stop_token < -1 || stop_token >= tokenizer.vocab_size()) {
    throw ApiError(fmt::format("stop_token must be a token id below {}, or -1 for none",
                               tokenizer.vocab_size()));
  }
  if (stop_token >= 0) o.eod = int32_t(stop_token);
  // A request's own stop_token replaces end-of-document and the model's other end tokens.
  if (!body.contains("stop_token")) o.end_tokens = limits.defaults.end_tokens;
  if (get<bool>(body, "stop_on_double_eol", false)) {
    const auto t = single_token(tokenizer, "\n\n");
    if (!t) throw ApiError("stop_on_double_eol: this tokenizer has no single token for a blank line");
    o.stop_tokens.push_back(*t);
  }
  if (get<bool>(body, "stop_on_eol", false)) {
    for (const char* text : {"\n", "\n\n"}) {
      if (const auto t = single_token(tokenizer, text)) o.stop_tokens.push_back(*t);
    }
    if (o.stop_tokens.empty()) throw ApiError("stop_on_eol: this tokenizer has no single token for a newline");
  }
  if (get<bool>(body, "prevent_newline_after_colon", false)) {
    throw ApiError("prevent_newline_after_colon is not supported by this server");
  }
  o.seed = seed_field(body, "random_seed", seed);
  r.log = !get<bool>(body, "no_log", false);
  if (get<int64_t>(body, "beam_width", 0) != 0) throw ApiError("beam search is not supported by this server");
  if (get<double>(body, "length_penalty", 1.0) != 1.0) throw ApiError("length_penalty applies to beam search only");
  for (size_t i = 0; i < prompts->size(); ++i) {
    const json& p = (*prompts)[i];
    if (!p.is_string()) throw ApiError("prompts is not a list of strings");
    std::vector<int32_t> ids;
    if (add_bos) {
      if (!eod) throw ApiError("add_BOS: the tokenizer has no end-of-document token");
      ids.push_back(*eod);
    }
    if (p.get<std::string>().empty() && !add_bos) throw ApiError("Empty prompts require add_BOS=true");
    const std::vector<int32_t> start = tokenizer.prompt_start();
    ids.insert(ids.end(), start.begin(), start.end());
    const std::vector<int32_t> text = tokenizer.encode(p.get<std::string>());
    ids.insert(ids.end(), text.begin(), text.end());
    r.prompts.push_back(fit(std::move(ids), i, limits, o.max_tokens, tokenizer));
  }
  return r;
}

ApiRequest parse_completions_request(const json& body, const data::Tokenizer& tokenizer,
                                     const ApiLimits& limits, uint64_t seed) {
  if (!body.is_object()) throw ApiError("the request body must be a JSON object");
  refuse_unknown(body,
                 {"model", "prompt", "max_tokens", "temperature", "top_p", "n", "logprobs", "echo",
                  "stop", "seed", "stream", "stream_options", "user", "best_of",
                  "presence_penalty", "frequency_penalty", "top_k"},
                 "POST /v1/completions");
  ApiRequest r{.api = Api::Completions};
  GenerateOptions& o = r.options;
  o.max_tokens = get<int64_t>(body, "max_tokens", 16);
  if (o.max_tokens < 0) throw ApiError("max_tokens must be at least 0");
  api_fields::read_openai_common(body, limits, seed, r);
  const auto logprobs = body.find("logprobs");
  if (logprobs != body.end() && !logprobs->is_null()) {
    if (!logprobs->is_number_integer() || logprobs->get<int64_t>() < 0 || logprobs->get<int64_t>() > 20) {
      throw ApiError("logprobs must be an integer from 0 to 20");
    }
    r.want_logprobs = o.logprobs = true;
    o.top_logprobs = logprobs->get<int64_t>();
  }
  r.echo = get<bool>(body, "echo", false);
  if (r.stream && (r.want_logprobs || r.echo)) {
    throw ApiError("stream cannot be combined with logprobs or echo: send stream=false for them");
  }
  o.eod = tokenizer.special_tokens().eod;
  o.end_tokens = limits.defaults.end_tokens;
  const auto prompt = body.find("prompt");
  if (prompt == body.end() || prompt->is_null()) throw ApiError("prompt is required");
  // A string, a list of strings, a list of token ids, or a list of lists of token ids.
  std::vector<json> prompts;
  if (prompt->is_string() || (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_number_integer())) {
    prompts.push_back(*prompt);
  } else if (prompt->is_array() && !prompt->empty()) {
    prompts.assign(prompt->begin(), prompt->end());
  } else {
    throw ApiError("prompt must be a string, a list of strings, or token ids");
  }
  if (int64_t(prompts.size()) * r.n > limits.max_prompts) {
    throw ApiError(fmt::format("at most {} completions per request (prompts times n)", limits.max_prompts));
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    const json& p = prompts[i];
    std::vector<int32_t> ids;
    if (p.is_string()) {
      ids = tokenizer.prompt_start();
      const std::vector<int32_t> text = tokenizer.encode(p.get<std::string>());
      ids.insert(ids.end(), text.begin(), text.end());
    } else if (p.is_array() && std::all_of(p.begin(), p.end(), [](const json& t) { return t.is_number_integer(); })) {
      for (const json& t : p) {
        const int64_t id = t.get<int64_t>();
        if (id < 0 || id >= tokenizer.vocab_size()) {
          throw ApiError(fmt::format("prompt {} has token {}, outside the vocabulary of {}", i, id,
                                     tokenizer.vocab_size()));
        }
        ids.push_back(int32_t(id));
      }
    } else {
      throw ApiError("prompt must be a string, a list of strings, or token ids");
    }
    ids = fit(std::move(ids), i, limits, o.max_tokens, tokenizer);
    for (int64_t c = 1; c < r.n; ++c) r.prompts.push_back(ids);
    r.prompts.push_back(std::move(ids));
  }
  return r;
}

json megatron_response(const ApiRequest& request, const std::vector<Generated>& results,
                       const data::Tokenizer& tokenizer) {
  json text = json::array(), segments = json::array(), tokens = json::array(), logprobs = json::array();
  for (const Generated& g : results) {
    std::string whole = tokenizer.decode(std::span(g.tokens.data(), size_t(g.prompt_tokens)));
    text.push_back(whole + g.text);
    json pieces = json::array();
    for (const int32_t id : g.tokens) pieces.push_back(piece(tokenizer, id));
    segments.push_back(std::move(pieces));
    tokens.push_back(g.tokens);
    if (request.want_logprobs) logprobs.push_back(g.logprobs);
  }
  json out{{"text", text}, {"segments", segments}, {"tokens", tokens}};
  if (request.want_logprobs) out["logprobs"] = logprobs;
  return out;
}

json completions_response(const ApiRequest& request, const std::vector<Generated>& results,
                          const data::Tokenizer& tokenizer, const std::string& model, int64_t id,
                          int64_t created) {
  json choices = json::array();
  for (size_t i = 0; i < results.size(); ++i) {
    const Generated& g = results[i];
    const std::string prompt_text = tokenizer.decode(std::span(g.tokens.data(), size_t(g.prompt_tokens)));
    json choice{{"index", i},
                {"text", request.echo ? prompt_text + g.text : g.text},
                {"finish_reason", g.finish_reason},
                {"logprobs", nullptr}};
    if (request.want_logprobs) {
      // Per token: with echo the prompt's too (its first has none), then the generated ones.
      const size_t first = request.echo ? 0 : size_t(g.prompt_tokens);
      json toks = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
      int64_t offset = 0;
      for (size_t t = first; t < g.tokens.size(); ++t) {
        const std::string text = piece(tokenizer, g.tokens[t]);
        toks.push_back(text);
        offsets.push_back(offset);
        offset += int64_t(text.size());
        if (t == 0) {
          lps.push_back(nullptr);
          tops.push_back(nullptr);
          continue;
        }
        lps.push_back(g.logprobs[t - 1]);
        json top = json::object();
        if (!g.top_logprobs.empty()) {
          for (const auto& [token, lp] : g.top_logprobs[t - 1]) top[piece(tokenizer, token)] = lp;
        }
        tops.push_back(std::move(top));
      }
      choice["logprobs"] = {{"tokens", toks}, {"token_logprobs", lps}, {"top_logprobs", tops},
                            {"text_offset", offsets}};
    }
    choices.push_back(std::move(choice));
  }
  return {{"id", completion_id(Api::Completions, id)},
          {"object", "text_completion"},
          {"created", created},
          {"model", model},
          {"choices", choices},
          {"usage", usage_json(results)}};
}

std::string completion_id(Api api, int64_t id) {
  return fmt::format("{}-{}", api == Api::Chat ? "chatcmpl" : "cmpl", id);
}

json usage_json(const std::vector<Generated>& results) {
  int64_t prompt = 0, completion = 0;
  for (const Generated& g : results) {
    prompt += g.prompt_tokens;
    completion += int64_t(g.tokens.size()) - g.prompt_tokens;
  }
  return {{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion}};
}

json completions_chunk(const StreamHeader& h, size_t index, const std::string& text,
                       const std::string& finish_reason) {
  return {{"id", h.id},
          {"object", "text_completion"},
          {"created", h.created},
          {"model", h.model},
          {"choices",
           {{{"index", index},
             {"text", text},
             {"logprobs", nullptr},
             {"finish_reason", finish_reason.empty() ? json(nullptr) : json(finish_reason)}}}}};
}

}  // namespace megatron::generate
