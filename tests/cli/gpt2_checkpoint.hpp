// The small GPT checkpoint the eval, generate and serve tests read: gpt-tiny with 2 layers and the
// GPT-2 vocabulary after 2 iterations on mock data, and the tokenizer flags it needs (a mock-data
// recipe names no tokenizer files). ctest runs each test in its own process: the first that
// needs the checkpoint trains it into the build tree and the others read it, one per build of
// the binary.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "cli/run_command.hpp"

namespace megatron::cli {

inline const std::string kGpt2 = std::string(" --vocab-file ") + MEGATRON_SOURCE_DIR +
                                 "/data/tokenizers/gpt2/vocab.json --merge-file " +
                                 MEGATRON_SOURCE_DIR + "/data/tokenizers/gpt2/merges.txt ";

inline const std::filesystem::path& gpt2_checkpoint() {
  namespace fs = std::filesystem;
  static const fs::path path = [] {
    std::error_code ec;
    const auto stamp = fs::last_write_time(MEGATRON_BINARY, ec).time_since_epoch().count();
    const fs::path root = fs::path(MEGATRON_BINARY).parent_path().parent_path() / "test-cache";
    const std::string name = "gpt2-ckpt-" + std::to_string(stamp);
    const fs::path done = root / name;
    if (fs::exists(done / "ckpt" / "latest", ec)) return done / "ckpt";
    fs::create_directories(root, ec);
    const fs::path tmp = root / ("making-" + std::to_string(::getpid()));
    fs::remove_all(tmp, ec);
    const CommandResult r = run_megatron(
        "run --threads 2 recipes/gpt-tiny.yaml model.num_layers=2 training.train_iters=2 "
        "training.lr_warmup_iters=1 eval.interval=null checkpoint.save=" +
        (tmp / "ckpt").string() + " --run-dir " + (tmp / "run").string());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    // Atomic: another process that got there first keeps its (equal) checkpoint.
    fs::rename(tmp, done, ec);
    if (ec) fs::remove_all(tmp, ec);
    // Checkpoints of earlier builds of the binary are stale.
    for (const auto& entry : fs::directory_iterator(root, ec)) {
      const std::string other = entry.path().filename().string();
      if (other.rfind("gpt2-ckpt-", 0) == 0 && other != name) fs::remove_all(entry.path(), ec);
    }
    return done / "ckpt";
  }();
  return path;
}

}  // namespace megatron::cli
