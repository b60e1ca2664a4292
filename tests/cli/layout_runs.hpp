// What the family run tests (BERT, T5) share to compare layouts: a run of a model under
// overrides, one-process references cached per overrides, and step-for-step comparison.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "cli/run_command.hpp"
#include "cli/tiny_job.hpp"
#include "support/temp_dir.hpp"

namespace megatron::cli {

struct Training {
  CommandResult result;
  std::vector<Iteration> metrics;
};

// `model`: the recipe and its overrides (e.g. bert_model()), then `overrides` on `nproc` ranks.
inline Training train_model(const std::string& model, int nproc, const std::string& overrides) {
  test_support::TempDir dir;
  Training run;
  run.result = run_job("run " + launch_args(nproc) + model + overrides + " --run-dir " +
                       dir.path().string());
  run.metrics = read_metrics(dir.path());
  return run;
}

// The one-process run of `model` + `overrides`, made once per test binary.
inline const std::vector<Iteration>& reference_run(const std::string& model, const std::string& overrides) {
  static std::map<std::string, Training> runs;
  const std::string key = model + "|" + overrides;
  auto it = runs.find(key);
  if (it == runs.end()) it = runs.emplace(key, train_model(model, 1, overrides)).first;
  EXPECT_EQ(it->second.result.exit_code, 0) << it->second.result.err;
  return it->second.metrics;
}

// The same tolerance as GPT's layouts (parallel_run_test.cpp says why).
inline constexpr double kF32Tolerance = 5e-5;

// `many` (iterations first.. of a 10-iteration run) against the one-process `one`: losses (and
// BERT's sentence-order loss) and gradient norms within `tolerance`, relative.
inline void expect_same_run(const std::vector<Iteration>& one, const std::vector<Iteration>& many,
                            double tolerance = kF32Tolerance, size_t first = 1) {
  ASSERT_EQ(one.size(), 10u);
  ASSERT_EQ(many.size(), one.size() - (first - 1));
  for (const Iteration& it : many) {
    SCOPED_TRACE("iteration " + std::to_string(it.iteration));
    const Iteration& s = one[size_t(it.iteration - 1)];
    EXPECT_NEAR(it.loss, s.loss, tolerance * std::abs(s.loss));
    EXPECT_EQ(std::isnan(it.sop_loss), std::isnan(s.sop_loss));  // NaN: no binary head
    if (!std::isnan(s.sop_loss)) EXPECT_NEAR(it.sop_loss, s.sop_loss, tolerance * std::abs(s.sop_loss));
    EXPECT_NEAR(it.grad_norm, s.grad_norm, tolerance * std::abs(s.grad_norm));
  }
}

// Overrides that save a checkpoint every 5 iterations into `dir`.
inline std::string save_to(const std::filesystem::path& dir) {
  return " checkpoint.save=" + dir.string() + " checkpoint.interval=5 ";
}

// `model` trained 10 iterations with dropout, saving at 5, and resumed from iteration 5: the
// resumed iterations are bitwise the straight run's (losses and gradient norms).
inline void expect_bitwise_resume(const std::string& model) {
  test_support::TempDir save;
  const Training straight = train_model(model, 1, kDropout + save_to(save.path()));
  ASSERT_EQ(straight.result.exit_code, 0) << straight.result.err;
  const Training resumed =
      train_model(model, 1, kDropout + " checkpoint.load=" + (save.path() / "iter_0000005").string());
  ASSERT_EQ(resumed.result.exit_code, 0) << resumed.result.err;
  ASSERT_EQ(resumed.metrics.size(), 5u);
  for (const Iteration& it : resumed.metrics) {
    SCOPED_TRACE("iteration " + std::to_string(it.iteration));
    const Iteration& s = straight.metrics[size_t(it.iteration - 1)];
    EXPECT_EQ(it.loss, s.loss);
    EXPECT_EQ(std::isnan(it.sop_loss), std::isnan(s.sop_loss));
    if (!std::isnan(s.sop_loss)) EXPECT_EQ(it.sop_loss, s.sop_loss);
    EXPECT_EQ(it.grad_norm, s.grad_norm);
  }
}

}  // namespace megatron::cli
