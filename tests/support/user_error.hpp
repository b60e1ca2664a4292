// What a call refuses with: the message of the UserError it throws, for tests that pin the
// one-line errors users see.
#pragma once

#include <functional>
#include <string>

#include "core/error.hpp"

namespace megatron::test_support {

// The UserError's message, or "" when `f` throws none.
inline std::string user_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

}  // namespace megatron::test_support
