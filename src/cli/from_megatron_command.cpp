// `megatron recipe from-megatron [--model gpt|bert|t5] [-o FILE] [--strict] -- MEGATRON-FLAGS`
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "plan/placement.hpp"
#include "recipe/compile.hpp"
#include "recipe/from_megatron.hpp"

namespace megatron::cli {
namespace {

namespace fs = std::filesystem;

struct FromMegatronArgs {
  std::optional<std::string> model;
  std::optional<std::string> output;
  bool strict = false;
  std::vector<std::string> words;
};

// A translation is only handed out once it compiles, so the flags' own inconsistencies (a
// layout that does not divide the layers, say) are reported now rather than at `megatron plan`.
void check_compiles(const std::string& yaml) {
  std::string pattern = (fs::temp_directory_path() / "megatron-from-megatron-XXXXXX").string();
  if (!::mkdtemp(pattern.data()))
    throw RuntimeFailure("cannot make a temporary directory to check the translated recipe");
  const fs::path dir = pattern;
  const fs::path file = dir / "from-megatron.yaml";
  std::ofstream(file) << yaml;
  std::string error;
  try {
    plan::place(recipe::compile(file));
  } catch (const UserError& e) {
    error = e.what();
  }
  std::error_code ignored;
  fs::remove_all(dir, ignored);
  if (error.empty()) return;
  // The temporary file's line and column mean nothing to the user, who wrote flags.
  const std::string where = file.string() + ":";
  if (error.starts_with(where)) {
    const auto end = error.find(": ");
    if (end != std::string::npos) error.erase(0, end + 2);
  }
  throw UserError("the recipe these flags translate to does not compile: " + error);
}

void report(const recipe::MegatronTranslation& t) {
  for (const auto& line : t.notes) std::cerr << "megatron: note: " << line << "\n";
  for (const auto& line : t.untranslated) std::cerr << "megatron: not translated: " << line << "\n";
  for (const auto& line : t.ignored) std::cerr << "megatron: ignored, no effect here: " << line << "\n";
  for (const auto& line : t.unknown) std::cerr << "megatron: unknown flag, left out: " << line << "\n";
}

void run_from_megatron(const FromMegatronArgs& args) {
  const recipe::MegatronTranslation t = recipe::from_megatron(args.words, args.model);
  check_compiles(t.yaml);
  report(t);
  if (args.strict && !(t.untranslated.empty() && t.unknown.empty()))
    throw UserError(fmt::format("--strict: {} flag(s) not translated and {} unknown (listed above)",
                                t.untranslated.size(), t.unknown.size()));
  if (!args.output) {
    std::cout << t.yaml;
    return;
  }
  std::ofstream out(*args.output);
  out << t.yaml;
  if (!out) throw RuntimeFailure("cannot write " + *args.output);
}

}  // namespace

void add_from_megatron_command(CLI::App& recipe_group, Actions& actions) {
  auto args = std::make_shared<FromMegatronArgs>();
  auto* cmd = recipe_group.add_subcommand(
      "from-megatron",
      "Translate a Megatron-LM command line (pretrain_gpt.py, pretrain_bert.py, pretrain_t5.py "
      "flags, after --) into a recipe; flags without a counterpart are listed on stderr "
      "(docs/from-megatron.md)");
  cmd->add_option("--model", args->model,
                  "Model family: gpt, bert or t5 (default: from the script name in the flags)");
  cmd->add_option("-o,--output", args->output, "Write the recipe to this file instead of stdout");
  cmd->add_flag("--strict", args->strict, "Fail (exit 2) if any flag is not translated or unknown");
  cmd->add_option("megatron-args", args->words,
                  "After --: the Megatron-LM command line, from torchrun, the script or its first "
                  "flag on");
  actions.emplace_back(cmd, [args] { run_from_megatron(*args); });
}

}  // namespace megatron::cli
