// Registration of each `megatron` subcommand on the CLI11 app. A command registers the action
// to run when it was the one parsed; the work itself is one call into the library below cli/.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <utility>
#include <vector>

namespace megatron::cli {

using Actions = std::vector<std::pair<CLI::App*, std::function<void()>>>;

// Thrown by a command that ends as it should but must tell its caller something through the
// exit code (`megatron run --stopped-exit-code`); nothing is printed.
struct ExitCode {
  int code = 0;
};

void add_recipe_commands(CLI::App& app, Actions& actions);
// `megatron recipe from-megatron`, under the recipe group (from_megatron_command.cpp).
void add_from_megatron_command(CLI::App& recipe_group, Actions& actions);
void add_plan_command(CLI::App& app, Actions& actions);
void add_run_command(CLI::App& app, Actions& actions);
// `megatron submit` (submit_command.cpp).
void add_submit_command(CLI::App& app, Actions& actions);
// `megatron eval` (eval_command.cpp).
void add_eval_command(CLI::App& app, Actions& actions);
// generate_command.cpp, serve_command.cpp
void add_generate_command(CLI::App& app, Actions& actions);
void add_serve_command(CLI::App& app, Actions& actions);
// preprocess, tokenize, data inspect, data merge
void add_data_pipeline_commands(CLI::App& app, Actions& actions);
// tokenizer train
void add_tokenizer_command(CLI::App& app, Actions& actions);
// `megatron convert` and `megatron ckpt inspect` (ckpt_commands.cpp).
void add_checkpoint_commands(CLI::App& app, Actions& actions);
void print_version();

}  // namespace megatron::cli
