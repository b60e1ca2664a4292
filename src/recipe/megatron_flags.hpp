// The Megatron-LM flags `megatron recipe from-megatron` knows, and what becomes of each: a
// recipe key, a translation with arithmetic, no effect here, no counterpart, or a refusal.
#pragma once

#include <string_view>
#include <vector>

namespace megatron::recipe {

// How many words follow the flag on Megatron's command line.
enum class Arity { Switch, One, Many };

enum class Fate {
  Key,           // the value (a switch: `value`) is recipe key `key`, as it is
  Special,       // from_megatron.cpp translates it: several keys, arithmetic or checks
  Ignored,       // runtime tuning with no effect on what trains here: listed, with `why`
  Untranslated,  // a setting the recipe cannot say: listed, with `why`
  Refused,       // it would change the model into one recipes cannot describe: an error
};

struct MegatronFlag {
  std::string_view name;  // "--hidden-size"
  Arity arity;
  Fate fate;
  std::string_view key = {};    // Fate::Key: "model.hidden_size"
  std::string_view value = {};  // Fate::Key switches: the value they give `key`
  std::string_view why = {};    // Ignored, Untranslated, Refused: said to the user
};

const std::vector<MegatronFlag>& megatron_flags();

// nullptr for a flag the table does not know.
const MegatronFlag* find_megatron_flag(std::string_view name);

// Families of flags refused by prefix ("--moe-"), as {prefix, why}.
struct RefusedPrefix {
  std::string_view prefix;
  std::string_view why;
};
const std::vector<RefusedPrefix>& refused_flag_prefixes();

// Pairs of flags Megatron-LM itself refuses together, with why.
struct ExclusiveFlags {
  std::string_view first;
  std::string_view second;
  std::string_view why;
};
const std::vector<ExclusiveFlags>& exclusive_megatron_flags();

}  // namespace megatron::recipe
