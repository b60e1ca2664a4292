// Errors that reach the user: each carries the one-line message the CLI prints after
// "megatron: error: ". Thrown anywhere below cli/, caught once in cli/.
#pragma once

#include <stdexcept>
#include <string>

namespace megatron {

// Bad input from the user (recipe, flags, data paths): exit code 2.
class UserError : public std::runtime_error {
 public:
  explicit UserError(const std::string& message) : std::runtime_error(message) {}
};

// Something failed while running a valid request (I/O, communication): exit code 1.
class RuntimeFailure : public std::runtime_error {
 public:
  explicit RuntimeFailure(const std::string& message) : std::runtime_error(message) {}
};

inline constexpr int kExitBadInput = 2;
inline constexpr int kExitRuntimeFailure = 1;

}  // namespace megatron
