// A Megatron-LM command line cut into its parts: the launcher before the script (torchrun's
// world size), the script that names the model family, and each flag with its words.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace megatron::recipe {

struct GivenFlag {
  std::string name;                 // "--hidden-size"
  std::vector<std::string> values;  // the words after it, or the text after '='
  bool known = false;               // in megatron_flags()
};

struct MegatronCommandLine {
  std::optional<std::string> script;  // "pretrain_gpt.py", when the words name one
  // The launcher's world (torchrun --nnodes / --nproc_per_node), when it gives one.
  std::optional<int64_t> nodes;
  std::optional<int64_t> gpus_per_node;
  std::vector<GivenFlag> flags;       // in the order given
};

// Throws UserError for a known flag missing its value, a switch given one, or a word that
// belongs to no flag. An unknown flag takes the words that follow it, as argparse would.
MegatronCommandLine parse_megatron_command_line(const std::vector<std::string>& words);

// "--data-path 0.3 a 0.7 b": a flag as the user wrote it, for messages.
std::string flag_text(const GivenFlag& flag);

}  // namespace megatron::recipe
