// `megatron recipe from-megatron`: a Megatron-LM command line (pretrain_gpt.py, pretrain_bert.py
// or pretrain_t5.py flags) translated into a recipe, saying what could not be translated.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace megatron::recipe {

struct MegatronTranslation {
  std::string yaml;                       // the recipe
  std::vector<std::string> untranslated;  // "--flag value: why", settings the recipe cannot say
  std::vector<std::string> ignored;       // "--flag value: why", no effect on what trains here
  std::vector<std::string> unknown;       // "--flag (did you mean --other?)"
  std::vector<std::string> notes;         // choices made for the user: inferred tokenizer, world
};

// `words`: the command line after `--`, from its launcher (torchrun ...), its script, or its
// first flag on. `family`: "gpt", "bert" or "t5" (--model); unset: named by the script.
// Throws UserError for contradictions, refused flags, missing values and missing essentials.
MegatronTranslation from_megatron(const std::vector<std::string>& words,
                                  const std::optional<std::string>& family);

}  // namespace megatron::recipe
