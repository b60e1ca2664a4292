// The per-op profile's table: calls summed by op and shapes, each row's share of the steps and
// its rate against the matching peak, the time outside ops, and the Chrome trace of the calls.
#include "train/op_profile.hpp"

#include <gtest/gtest.h>

namespace megatron::train {
namespace {

using tensor::DType;
using tensor::ProfiledCall;

const DevicePeaks kPeaks{.name = "test", .flops_16bit = 100e12, .flops_32bit = 10e12,
                         .bandwidth = 1e12};

tensor::ProfileRecord two_steps() {
  tensor::ProfileRecord r{.device = "cpu (test)", .peak_bytes = 3 << 20};
  r.steps = {{.iteration = 5, .start_ms = 0.0, .ms = 10.0}, {.iteration = 6, .start_ms = 10.0, .ms = 10.0}};
  // Per step: a bf16 GEMM of 1e11 FLOPs in 4 ms (25 TFLOP/s, a quarter of the 16-bit peak), then
  // an f32 add moving 2e9 bytes in 5 ms (400 GB/s); 1 ms of each step is outside ops.
  for (double start : {0.0, 10.0}) {
    r.calls.push_back({.op = "gemm", .shapes = "[a] x [b] bf16", .dtype = DType::Bf16,
                       .flops = 1e11, .bytes = 1e6, .start_ms = start, .ms = 4.0,
                       .allocated_bytes = 1 << 20});
    r.calls.push_back({.op = "add", .shapes = "[n] f32", .dtype = DType::F32, .flops = 0,
                       .bytes = 2e9, .start_ms = start + 4.0, .ms = 5.0,
                       .allocated_bytes = 2 << 20});
  }
  return r;
}

TEST(OpProfile, CallsOfOneOpAndShapeAreOneRowLongestFirst) {
  const OpProfile p = summarize(two_steps(), kPeaks, 3);
  EXPECT_EQ(p.rank, 3);
  ASSERT_EQ(p.rows.size(), 2u);
  EXPECT_EQ(p.rows[0].op, "add");
  EXPECT_EQ(p.rows[0].calls, 2);
  EXPECT_DOUBLE_EQ(p.rows[0].ms, 10.0);
  EXPECT_EQ(p.rows[1].op, "gemm");
  EXPECT_DOUBLE_EQ(p.rows[1].flops, 2e11);
}

TEST(OpProfile, SharesAreOfTheStepsAndTheRestIsOutsideOps) {
  const OpProfile p = summarize(two_steps(), kPeaks, 0);
  EXPECT_DOUBLE_EQ(p.step_ms, 20.0);
  EXPECT_DOUBLE_EQ(p.ops_ms, 18.0);
  EXPECT_DOUBLE_EQ(p.outside_ms(), 2.0);
  EXPECT_DOUBLE_EQ(p.rows[0].share, 0.5);
  EXPECT_DOUBLE_EQ(p.rows[1].share, 0.4);
}

TEST(OpProfile, FlopRowsRateAgainstTheirDtypesPeakAndTheOthersAgainstBandwidth) {
  const OpProfile p = summarize(two_steps(), kPeaks, 0);
  const OpRow& gemm = p.rows[1];
  EXPECT_DOUBLE_EQ(gemm.rate, 2e11 / 8e-3);               // 25 TFLOP/s
  EXPECT_DOUBLE_EQ(gemm.of_peak, 2e11 / 8e-3 / 100e12);  // of the 16-bit peak
  const OpRow& add = p.rows[0];
  EXPECT_DOUBLE_EQ(add.rate, 4e9 / 10e-3);  // 400 GB/s
  EXPECT_DOUBLE_EQ(add.of_peak, 0.4);
}

TEST(OpProfile, TheTableHasAHeadingEveryRowAndTheTimeOutsideOps) {
  const auto lines = profile_table(summarize(two_steps(), kPeaks, 0), 1);
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_NE(lines[0].find("iterations 5-6: 10.00 ms per step, 90.0% in backend ops, peak tensors 3.0 MiB"),
            std::string::npos) << lines[0];
  EXPECT_NE(lines[2].find("add"), std::string::npos);
  EXPECT_NE(lines[2].find("400 GB/s"), std::string::npos) << lines[2];
  EXPECT_NE(lines[3].find("(1 more rows)"), std::string::npos) << lines[3];
  EXPECT_NE(lines[4].find("outside backend ops"), std::string::npos);
}

TEST(OpProfile, TheJsonHoldsEveryRowWithItsRate) {
  const nlohmann::json j = profile_json(summarize(two_steps(), kPeaks, 0));
  ASSERT_EQ(j["ops"].size(), 2u);
  EXPECT_EQ(j["ops"][1]["op"], "gemm");
  EXPECT_DOUBLE_EQ(j["ops"][1]["tflops_per_s"].get<double>(), 25.0);
  EXPECT_DOUBLE_EQ(j["ops"][0]["gb_per_s"].get<double>(), 400.0);
  EXPECT_EQ(j["steps"].size(), 2u);
  EXPECT_EQ(j["peak_tensor_bytes"], 3 << 20);
}

TEST(OpProfile, TheChromeTraceHasEveryStepAndCallInMicrosecondsAndAMemoryCounter) {
  const nlohmann::json t = chrome_trace(two_steps(), 1);
  int steps = 0, calls = 0, counters = 0;
  for (const auto& e : t["traceEvents"]) {
    EXPECT_EQ(e["pid"], 1);
    if (e["ph"] == "X" && e["cat"] == "step") ++steps;
    if (e["ph"] == "X" && e["cat"] == "op") {
      ++calls;
      if (e["name"] == "gemm") EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 4000.0);
    }
    if (e["ph"] == "C") ++counters;
  }
  EXPECT_EQ(steps, 2);
  EXPECT_EQ(calls, 4);
  EXPECT_EQ(counters, 4);
}

}  // namespace
}  // namespace megatron::train
