// Runs the built `megatron` binary as a user would and captures what it printed.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "support/temp_dir.hpp"

namespace megatron::cli {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// A file's whole content ("" when it does not exist).
inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// `args` is appended to the binary path as shell words (quote them yourself); `prefix` goes
// before the binary (environment assignments, a wrapper such as timeout).
inline CommandResult run_megatron_with_env(const std::string& prefix, const std::string& args) {
  test_support::TempDir dir;
  const auto out_file = dir.path() / "stdout";
  const auto err_file = dir.path() / "stderr";
  const std::string command = std::string("cd '") + MEGATRON_SOURCE_DIR + "' && " + prefix +
                              " '" + MEGATRON_BINARY + "' " + args + " >'" + out_file.string() +
                              "' 2>'" + err_file.string() + "'";
  const int status = std::system(command.c_str());
  CommandResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.out = slurp(out_file);
  result.err = slurp(err_file);
  return result;
}

inline CommandResult run_megatron(const std::string& args) { return run_megatron_with_env("", args); }

}  // namespace megatron::cli
