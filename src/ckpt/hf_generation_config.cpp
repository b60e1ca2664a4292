#include "ckpt/hf_generation_config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "ckpt/hf_json.hpp"
#include "core/error.hpp"
#include "core/printable.hpp"

namespace megatron::ckpt {

namespace {

using nlohmann::json;

// What transformers' GenerationConfig holds that changes nothing generate and serve compute:
// ids and lengths they take from elsewhere, bookkeeping, and outputs they do not return.
const std::set<std::string> kHarmless = {
    "_from_model_config", "transformers_version", "bos_token_id", "pad_token_id",
    "decoder_start_token_id", "max_length", "max_new_tokens", "use_cache", "cache_implementation",
    "output_attentions", "output_hidden_states", "output_scores", "output_logits",
    "return_dict_in_generate", "num_return_sequences", "trust_remote_code"};

// Settings at which transformers computes what generate and serve compute.
bool neutral(const std::string& key, const json& v) {
  const auto is = [&](double x) { return v.is_number() && v.get<double>() == x; };
  if (key == "repetition_penalty" || key == "length_penalty" || key == "encoder_repetition_penalty")
    return v.is_null() || is(1.0);
  if (key == "num_beams" || key == "num_beam_groups") return v.is_null() || is(1.0);
  if (key == "no_repeat_ngram_size" || key == "encoder_no_repeat_ngram_size" ||
      key == "min_length" || key == "min_new_tokens" || key == "diversity_penalty")
    return v.is_null() || is(0.0);
  if (key == "typical_p") return v.is_null() || is(1.0);
  if (key == "min_p" || key == "epsilon_cutoff" || key == "eta_cutoff") return v.is_null() || is(0.0);
  if (key == "bad_words_ids" || key == "suppress_tokens" || key == "begin_suppress_tokens" ||
      key == "forced_bos_token_id" || key == "forced_eos_token_id" || key == "sequence_bias" ||
      key == "stop_strings")
    return v.is_null() || (v.is_array() && v.empty());
  if (key == "early_stopping" || key == "renormalize_logits" || key == "remove_invalid_values")
    return v.is_null() || v.is_boolean();
  return false;
}

[[noreturn]] void bad(const std::string& where, const std::string& key, const json& v,
                      const std::string& want) {
  throw UserError(fmt::format("{}: {} = {}: expected {}", where, key, printable(v.dump(), 60), want));
}

int64_t token_id(const std::string& where, const json& v, int64_t vocab) {
  if (!v.is_number_integer()) bad(where, "eos_token_id", v, "a token id or a list of them");
  const int64_t id = v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)
                         ? INT64_MAX
                         : v.get<int64_t>();
  if (id < 0 || id >= vocab) {
    throw UserError(fmt::format("{}: eos_token_id {} is outside the model's {} tokens", where,
                                printable(v.dump(), 30), vocab));
  }
  return id;
}

}  // namespace

HfGenerationDefaults hf_generation_defaults(const json& config, const std::string& where,
                                            int64_t vocab) {
  if (!config.is_object()) throw UserError(where + ": expected a JSON object");
  HfGenerationDefaults g;
  for (const auto& [key, v] : config.items()) {
    if (key == "eos_token_id") {
      if (v.is_array()) {
        if (v.size() > 1024) bad(where, key, v, "at most 1024 ids");
        for (const json& id : v) g.stop_token_ids.push_back(token_id(where, id, vocab));
      } else if (!v.is_null()) {
        g.stop_token_ids.push_back(token_id(where, v, vocab));
      }
    } else if (key == "do_sample") {
      if (!v.is_boolean()) bad(where, key, v, "true or false");
      g.do_sample = v.get<bool>();
    } else if (key == "temperature") {
      if (!v.is_number() || !(v.get<double>() >= 0.0 && v.get<double>() <= 100.0))
        bad(where, key, v, "a number from 0 to 100");
      g.temperature = v.get<double>();
    } else if (key == "top_k") {
      if (v.is_null()) {
        g.top_k = 0;
      } else {
        if (!v.is_number_integer() || v.get<int64_t>() < 0) bad(where, key, v, "a whole number >= 0");
        g.top_k = std::min<int64_t>(v.get<int64_t>(), vocab);
      }
    } else if (key == "top_p") {
      if (v.is_null()) {
        g.top_p = 1.0;
      } else {
        if (!v.is_number() || !(v.get<double>() > 0.0 && v.get<double>() <= 1.0))
          bad(where, key, v, "a number in (0, 1]");
        g.top_p = v.get<double>();
      }
    } else if (!kHarmless.contains(key) && !neutral(key, v)) {
      g.not_applied.push_back(fmt::format("{} = {}", printable(key, 60), printable(v.dump(), 60)));
    }
  }
  return g;
}

std::optional<HfGenerationDefaults> read_hf_generation_config(const std::filesystem::path& dir,
                                                              int64_t vocab) {
  const std::filesystem::path path = dir / "generation_config.json";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  return hf_generation_defaults(read_hf_json(path), path.string(), vocab);
}

std::string generation_yaml(const HfGenerationDefaults& g) {
  std::string y = "# From generation_config.json: what generate and serve do unless told otherwise.\n";
  for (const std::string& line : g.not_applied) {
    y += fmt::format("# Not applied by generate or serve (transformers applies it): {}\n", line);
  }
  y += "generation:\n";
  if (!g.stop_token_ids.empty()) {
    y += "  stop_token_ids: [";
    for (size_t i = 0; i < g.stop_token_ids.size(); ++i) {
      y += fmt::format("{}{}", i ? ", " : "", g.stop_token_ids[i]);
    }
    y += "]\n";
  }
  y += fmt::format("  do_sample: {}\n", g.do_sample ? "true" : "false");
  if (g.do_sample) {
    // transformers' order: temperature, then top-k, then top-p over what top-k kept.
    y += fmt::format("  temperature: {}\n  top_k: {}\n  top_p: {}\n", g.temperature, g.top_k,
                     g.top_p < 1.0 ? g.top_p : 0.0);
  }
  return y;
}

json hf_generation_config(const recipe::GenerationSection& g, std::optional<int64_t> eod) {
  std::vector<int64_t> ends;
  if (eod) ends.push_back(*eod);
  for (const int64_t id : g.stop_token_ids) {
    if (std::find(ends.begin(), ends.end(), id) == ends.end()) ends.push_back(id);
  }
  json j = json::object();
  if (ends.size() == 1) j["eos_token_id"] = ends[0];
  if (ends.size() > 1) j["eos_token_id"] = ends;
  if (g.sampling_set()) {
    // As generation_defaults reads the section: do_sample alone means sampling at temperature 1;
    // temperature 0 is greedy (sampling_for), which transformers spells do_sample false.
    const bool sample = g.do_sample.value_or(true) && g.temperature.value_or(1.0) > 0.0;
    j["do_sample"] = sample;
    if (sample) {
      j["temperature"] = g.temperature.value_or(1.0);
      j["top_k"] = g.top_k.value_or(0);  // transformers: 0 keeps every token
      const double top_p = g.top_p.value_or(0.0);
      j["top_p"] = top_p > 0.0 ? top_p : 1.0;  // ours: 0 is off; transformers': 1
    }
  }
  return j.empty() ? json() : j;
}

}  // namespace megatron::ckpt
