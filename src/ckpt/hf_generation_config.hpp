// A Hugging Face directory's generation_config.json as the recipe's generation section: the ids
// that end a sequence and the sampling transformers' generate() uses by default, checked where
// they enter.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "recipe/recipe.hpp"

namespace megatron::ckpt {

struct HfGenerationDefaults {
  std::vector<int64_t> stop_token_ids;  // eos_token_id, one or a list
  bool do_sample = false;               // transformers' default: greedy
  double temperature = 1.0;             // transformers' defaults when sampling
  int64_t top_k = 50;
  double top_p = 1.0;
  // Settings transformers applies that generate and serve do not (repetition_penalty, beams, ...):
  // one line each for the recipe's comments.
  std::vector<std::string> not_applied;
};

// `config` is the file's JSON and `where` its path; ids must be below `vocab`. UserError for a
// key of the wrong type or an id out of range.
HfGenerationDefaults hf_generation_defaults(const nlohmann::json& config, const std::string& where,
                                            int64_t vocab);

// The directory's generation_config.json read as above; nullopt when it has none.
std::optional<HfGenerationDefaults> read_hf_generation_config(const std::filesystem::path& dir,
                                                              int64_t vocab);

// The recipe's generation section (YAML, with its comments) for these defaults.
std::string generation_yaml(const HfGenerationDefaults& g);

// The other way, for --to hf: generation_config.json for a recipe's generation section, so that
// transformers' generate() stops and samples where `megatron generate` does. `eod`: the
// tokenizer's end of document, the first eos_token_id. Null when there is nothing to say (no end
// token known and no sampling set): transformers' defaults then are the recipe's too.
nlohmann::json hf_generation_config(const recipe::GenerationSection& g, std::optional<int64_t> eod);

}  // namespace megatron::ckpt
