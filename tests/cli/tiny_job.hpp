// The tiny GPT that the multi-process and checkpoint tests train, how they launch it (with the
// sanitizers' MPI settings), and the per-iteration metrics they compare.
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/run_command.hpp"

namespace megatron::cli {

// gpt-tiny shrunk to 8 layers of width 32 (8 layers: pp4 x 2 virtual stages gets one each).
// vocab 256 pads to the same 256 rows at tensor 1 and 2, so every layout has the same model;
// 4 micro-batches per iteration fill a 4-stage pipeline. Buckets of 5000 gradients make about
// 25 data-parallel reductions per iteration, started while backward runs.
inline const std::string kModel =
    "recipes/gpt-tiny.yaml model.num_layers=8 model.hidden_size=32 model.num_attention_heads=4 "
    "model.vocab_size=256 data.seq_length=16 training.micro_batch_size=2 "
    "training.global_batch_size=8 training.lr_warmup_iters=1 training.train_iters=10 "
    "logging.interval=1 eval.interval=5 eval.iters=1 parallel.timeout_minutes=2 "
    "parallel.ddp_bucket_size=5000 ";
inline const std::string kDropout = "model.hidden_dropout=0.1 model.attention_dropout=0.1 ";

struct Iteration {
  int64_t iteration = 0;
  double loss = 0, grad_norm = 0;
  int64_t skipped = 0;
  double sop_loss = NAN;  // models with a binary head
};

// Under the sanitizers, Open MPI's own allocations would read as leaks when a rank exits: the
// suppressions name its libraries only (see tests/dist/lsan.supp). Harmless in other builds.
inline std::string mpi_sanitizer_env() {
  return std::string("LSAN_OPTIONS=suppressions=") + MEGATRON_SOURCE_DIR +
         "/tests/dist/lsan.supp:print_suppressions=0 ASAN_OPTIONS=fast_unwind_on_malloc=0";
}

inline CommandResult run_job(const std::string& args) {
  return run_megatron_with_env(mpi_sanitizer_env(), args);
}

// `megatron run` arguments for N processes: one thread for one process, else --nproc.
inline std::string launch_args(int nproc) {
  return nproc == 1 ? "--threads 1 " : "--nproc " + std::to_string(nproc) + " ";
}

// The training lines of a run directory's metrics.jsonl (logging.interval=1: every iteration).
inline std::vector<Iteration> read_metrics(const std::filesystem::path& run_dir) {
  std::vector<Iteration> out;
  std::ifstream in(run_dir / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const auto m = nlohmann::json::parse(line);
    if (!m.contains("lm_loss")) continue;
    out.push_back({.iteration = m["iteration"].get<int64_t>(),
                   .loss = m["lm_loss"].get<double>(),
                   .grad_norm = m["grad_norm"].is_number() ? m["grad_norm"].get<double>() : NAN,
                   .skipped = m["skipped_iterations"].get<int64_t>(),
                   .sop_loss = m.contains("sop_loss") ? m["sop_loss"].get<double>() : NAN});
  }
  return out;
}

}  // namespace megatron::cli
