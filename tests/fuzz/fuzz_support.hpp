// What every fuzz target shares: the contract (any input ends in success or a UserError, the
// one-line answer the CLI gives bad input; anything else escapes and aborts as a finding) and
// a private scratch directory for parsers that read files.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "core/error.hpp"

namespace megatron::fuzz {

// A directory of this process's own (fuzzers may run several processes at once), removed at
// exit. Files in it are rewritten for each input.
inline const std::filesystem::path& scratch() {
  static const std::filesystem::path dir = [] {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "megatron-fuzz-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) std::abort();
    static std::filesystem::path remove_at_exit;
    remove_at_exit = pattern;
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(remove_at_exit, ignored);
    });
    return std::filesystem::path(pattern);
  }();
  return dir;
}

inline std::filesystem::path write_file(const std::string& name, std::string_view bytes) {
  const std::filesystem::path path = scratch() / name;
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) std::abort();
  return path;
}

// MEGATRON_FUZZ_VERBOSE=1 says how each input ended (to check that seeds reach the parser's
// far end, not just its first error).
inline bool verbose() {
  static const bool on = std::getenv("MEGATRON_FUZZ_VERBOSE") != nullptr;
  return on;
}

// Runs `parse`; a UserError is the answer bad input deserves, so it passes. Any other
// exception (std::out_of_range, a JSON library's own error, RuntimeFailure for input the user
// controls) propagates out of LLVMFuzzerTestOneInput and ends the run as a finding.
template <class F>
int expect_user_errors_only(F&& parse) {
  try {
    parse();
  } catch (const UserError& e) {
    // (The CLI makes every message one terminal-safe line as it prints it: core/printable.hpp.)
    if (verbose()) std::fprintf(stderr, "  user error: %s\n", e.what());
    return 0;
  }
  if (verbose()) std::fprintf(stderr, "  accepted\n");
  return 0;
}

inline std::string_view as_text(const uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace megatron::fuzz
