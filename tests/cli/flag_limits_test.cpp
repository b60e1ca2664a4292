// Numeric flags out of range, and error lines that quote hostile input: one short, readable,
// terminal-safe line and exit 2.
#include <gtest/gtest.h>

#include <string>

#include "cli/run_command.hpp"
#include "support/temp_dir.hpp"

namespace megatron::cli {
namespace flag_limits_test {

TEST(FlagLimits, MoreThreadsThanTheMachineCanRunIsRefusedSayingTheLimit) {
  const auto r = run_megatron("run recipes/gpt-tiny.yaml --threads 100000");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--threads: 100000 threads is more than this machine can run: at most "),
            std::string::npos) << r.err;
}

TEST(FlagLimits, MoreLocalProcessesThanTheMachineCanRunIsRefused) {
  const auto r = run_megatron("run recipes/gpt-tiny.yaml --nproc 100000");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("100000 processes is more than this machine can run"), std::string::npos) << r.err;
}

TEST(FlagLimits, ARangeErrorIsShortAndNamesTheValue) {
  for (const std::string& flag : {"--threads 1e400", "--threads -5", "--threads 2.5"}) {
    const auto r = run_megatron("run recipes/gpt-tiny.yaml " + flag);
    EXPECT_EQ(r.exit_code, 2) << flag;
    EXPECT_NE(r.err.find("is not a whole number of threads"), std::string::npos) << r.err;
    EXPECT_LT(r.err.size(), 200u) << r.err;  // once 309 digits of a double's range
  }
  const auto t = run_megatron("run recipes/gpt-tiny.yaml --time-limit -1");
  EXPECT_EQ(t.exit_code, 2);
  EXPECT_NE(t.err.find("--time-limit: -1 is not a positive number"), std::string::npos) << t.err;
}

TEST(FlagLimits, AnEscapeSequenceFromAFileIsEscapedInTheErrorLine) {
  test_support::TempDir dir;
  const auto recipe = dir.write("r.yaml", "model:\n  \"hid\x1b[31mden\x07\": 5\n  \xff: 1\n");
  const auto r = run_megatron("plan " + recipe.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\x07'), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("hid\\x1b[31mden\\x07"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;  // one line
}

}  // namespace flag_limits_test
}  // namespace megatron::cli
