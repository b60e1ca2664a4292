#include "recipe/megatron_command_line.hpp"

#include <fmt/format.h>

#include <charconv>

#include "core/error.hpp"
#include "core/printable.hpp"
#include "recipe/megatron_flags.hpp"

namespace megatron::recipe {
namespace {

bool is_flag(const std::string& word) { return word.size() > 2 && word.starts_with("--"); }

bool ends_with_py(const std::string& word) { return word.size() > 3 && word.ends_with(".py"); }

std::optional<int64_t> positive_integer(const std::string& text) {
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 1) return std::nullopt;
  return value;
}

// torchrun's own flags; both spellings are accepted by torchrun. A value such as "gpu" or an
// elastic "1:4" says no fixed world, so it is left out.
void read_launcher(const std::vector<std::string>& launcher, MegatronCommandLine& line) {
  for (size_t i = 0; i < launcher.size(); ++i) {
    std::string name = launcher[i];
    std::string value;
    if (const auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else if (i + 1 < launcher.size()) {
      value = launcher[i + 1];
    }
    if (name == "--nnodes") line.nodes = positive_integer(value);
    if (name == "--nproc_per_node" || name == "--nproc-per-node")
      line.gpus_per_node = positive_integer(value);
  }
}

}  // namespace

std::string flag_text(const GivenFlag& flag) {
  std::string text = flag.name;
  // Appended piecewise: `" " + printable(value)` trips GCC 12's false -Wrestrict warning.
  for (const auto& value : flag.values) {
    text += ' ';
    text += printable(value);
  }
  return text;
}

MegatronCommandLine parse_megatron_command_line(const std::vector<std::string>& words) {
  MegatronCommandLine line;
  size_t i = 0;
  if (!words.empty() && !is_flag(words[0])) {
    // A launcher (torchrun, python -m torch.distributed.run) and then the script, or the
    // script alone: everything up to the script is the launcher's.
    size_t script = 0;
    while (script < words.size() && !ends_with_py(words[script])) ++script;
    if (script == words.size())
      throw UserError(fmt::format(
          "'{}' is not a flag, and no Megatron-LM script (pretrain_gpt.py, pretrain_bert.py, "
          "pretrain_t5.py) follows it; give the flags, or the command line from its launcher or "
          "script on",
          printable(words[0])));
    read_launcher({words.begin(), words.begin() + static_cast<std::ptrdiff_t>(script)}, line);
    line.script = words[script];
    i = script + 1;
  }
  while (i < words.size()) {
    const std::string& word = words[i++];
    if (!is_flag(word))
      throw UserError(fmt::format("'{}' follows no flag that takes a value", printable(word)));
    GivenFlag flag;
    std::optional<std::string> inline_value;
    if (const auto eq = word.find('='); eq != std::string::npos) {
      flag.name = word.substr(0, eq);
      inline_value = word.substr(eq + 1);
    } else {
      flag.name = word;
    }
    const MegatronFlag* known = find_megatron_flag(flag.name);
    flag.known = known != nullptr;
    if (inline_value) flag.values.push_back(*inline_value);
    const bool takes_many = !known || known->arity == Arity::Many;
    const bool takes_one = known && known->arity == Arity::One;
    if (!inline_value && (takes_many || takes_one)) {
      while (i < words.size() && !is_flag(words[i])) {
        flag.values.push_back(words[i++]);
        if (takes_one) break;
      }
    }
    const bool switch_given_value =
        known && known->arity == Arity::Switch &&
        (!flag.values.empty() || (i < words.size() && !is_flag(words[i])));
    if (switch_given_value)
      throw UserError(fmt::format("{} is a switch and takes no value, but was given '{}'",
                                  flag.name,
                                  printable(flag.values.empty() ? words[i] : flag.values.front())));
    if (known && known->arity != Arity::Switch && flag.values.empty())
      throw UserError(fmt::format("{} is missing its value", flag.name));
    line.flags.push_back(std::move(flag));
  }
  return line;
}

}  // namespace megatron::recipe
