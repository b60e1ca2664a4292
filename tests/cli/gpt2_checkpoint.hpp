// The small GPT checkpoint the eval, generate and serve tests read: gpt-tiny with 2 layers and the
// GPT-2 vocabulary after 2 iterations on mock data, made once per test process (ctest runs each
// test in its own, so it must be cheap), and the tokenizer flags it needs (a mock-data recipe
// names no tokenizer files).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "cli/run_command.hpp"
#include "support/temp_dir.hpp"

namespace megatron::cli {

inline const std::string kGpt2 = std::string(" --vocab-file ") + MEGATRON_SOURCE_DIR +
                                 "/data/tokenizers/gpt2/vocab.json --merge-file " +
                                 MEGATRON_SOURCE_DIR + "/data/tokenizers/gpt2/merges.txt ";

inline const std::filesystem::path& gpt2_checkpoint() {
  static test_support::TempDir dir;
  static const bool made = [] {
    const CommandResult r = run_megatron(
        "run --threads 2 recipes/gpt-tiny.yaml model.num_layers=2 training.train_iters=2 "
        "training.lr_warmup_iters=1 eval.interval=null checkpoint.save=" +
        (dir.path() / "ckpt").string() + " --run-dir " + (dir.path() / "run").string());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return true;
  }();
  (void)made;
  static const std::filesystem::path path = dir.path() / "ckpt";
  return path;
}

}  // namespace megatron::cli
