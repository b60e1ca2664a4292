// Shared pieces of the recipe tests: a minimal valid recipe and a way to compile text.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "recipe/compile.hpp"
#include "support/temp_dir.hpp"

namespace megatron::recipe {

// The smallest recipe that compiles: every required key, nothing else.
inline const char* kMinimalRecipe = R"(model:
  num_layers: 4
  hidden_size: 128
  num_attention_heads: 4
  vocab_size: 1000
data:
  seq_length: 64
training:
  micro_batch_size: 2
  global_batch_size: 8
  lr: 1.0e-3
)";

class RecipeTest : public ::testing::Test {
 protected:
  // Compiles `text` written as `name` in a fresh directory.
  CompiledRecipe compile_text(const std::string& text, std::vector<std::string> overrides = {},
                              const std::string& name = "recipe.yaml") {
    CompileOptions options;
    options.overrides = std::move(overrides);
    return compile(dir_.write(name, text), options);
  }

  // The message of the UserError that compiling `text` throws ("" if it compiles).
  std::string error_of(const std::string& text, std::vector<std::string> overrides = {},
                       const std::string& name = "recipe.yaml") {
    try {
      compile_text(text, std::move(overrides), name);
    } catch (const UserError& e) {
      return e.what();
    }
    return "";
  }

  std::string file(const std::string& name = "recipe.yaml") const {
    return (dir_.path() / name).string();
  }

  test_support::TempDir dir_;
};

}  // namespace megatron::recipe
