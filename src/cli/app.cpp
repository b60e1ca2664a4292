#include "cli/app.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <exception>
#include <iostream>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "core/printable.hpp"
#include "core/logging.hpp"
#include "dist/launcher.hpp"
#include "recipe/enum_names.hpp"

namespace megatron::cli {
namespace {

int report(const std::string& message, int code) {
  // Messages quote input (keys, file content): whatever they hold, the answer stays one line.
  std::cerr << "megatron: error: " << one_line(message) << "\n";
  return code;
}

// In a job every rank reads the same recipe and data, so a bad input fails on each of them the
// same way: rank 0 alone says so. A runtime failure may be one rank's: each says which it is.
int report_in_job(const std::string& message, int code) {
  const dist::LaunchInfo launch = dist::launch_info();
  if (launch.world_size == 1) return report(message, code);
  if (code == kExitBadInput) return launch.rank == 0 ? report(message, code) : code;
  return report(fmt::format("rank {}: {}", launch.rank, message), code);
}

}  // namespace

int run(int argc, char** argv) {
  CLI::App app{"megatron: train transformer language models from declarative YAML recipes"};
  app.name("megatron");
  app.require_subcommand(0, 1);
  bool version = false;
  app.add_flag("--version", version, "Print version, git commit and build options");
  std::string log_level = "info";
  CLI::Option* log_level_option = app.add_option(
      "--log-level", log_level, "Log level (default info; overrides a recipe's logging.level)")
      ->check(CLI::IsMember(recipe::canonical_names<recipe::LogLevel>()));
  Actions actions;
  add_recipe_commands(app, actions);
  add_plan_command(app, actions);
  add_run_command(app, actions);
  add_submit_command(app, actions);
  add_data_pipeline_commands(app, actions);
  add_tokenizer_command(app, actions);
  add_checkpoint_commands(app, actions);
  add_eval_command(app, actions);
  add_generate_command(app, actions);
  add_serve_command(app, actions);
  app.footer("Docs: docs/ in the source tree (recipes.md, plan.md). Exit codes: 0 ok, "
             "2 bad input, 1 runtime failure.");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return report(std::string(e.what()) + "; run megatron --help for usage", kExitBadInput);
  }
  if (version) {
    print_version();
    return 0;
  }
  if (app.get_subcommands().empty()) {
    std::cout << app.help();
    return kExitBadInput;
  }
  try {
    const dist::LaunchInfo launch = dist::launch_info();
    logging::init(log_level,
                  launch.world_size > 1 && launch.rank != 0 ? std::optional<int>(launch.rank) : std::nullopt,
                  log_level_option->count() > 0);
    for (const auto& [command, action] : actions) {
      if (command->parsed()) {
        action();
        return 0;
      }
    }
    // A command group (`megatron recipe`) without its subcommand.
    std::cout << app.get_subcommands().front()->help();
    return kExitBadInput;
  } catch (const ExitCode& e) {
    return e.code;
  } catch (const UserError& e) {
    return report_in_job(e.what(), kExitBadInput);
  } catch (const RuntimeFailure& e) {
    return report_in_job(e.what(), kExitRuntimeFailure);
  } catch (const std::exception& e) {
    return report_in_job(std::string("internal error: ") + e.what(), kExitRuntimeFailure);
  }
  return 0;
}

}  // namespace megatron::cli
