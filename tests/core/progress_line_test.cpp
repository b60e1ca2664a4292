// The progress line in a log (stderr not a terminal): a line every 10 s, the first one at once
// when asked, and a phase's last line always.
#include "core/progress_line.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

namespace megatron {
namespace {

class ProgressLineInALog : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::isatty(STDERR_FILENO)) GTEST_SKIP() << "stderr is a terminal: the line is live there";
  }
  // What `lines` prints when called at each of `seconds`.
  static std::string printed(ProgressLine& line, std::initializer_list<double> seconds) {
    ::testing::internal::CaptureStderr();
    for (const double s : seconds) line("at " + std::to_string(int(s)), s);
    return ::testing::internal::GetCapturedStderr();
  }
};

TEST_F(ProgressLineInALog, PrintsALineEveryTenSecondsAndNotBefore) {
  ProgressLine line;
  EXPECT_EQ(printed(line, {0, 5, 10, 15, 20}), "at 10\nat 20\n");
}

TEST_F(ProgressLineInALog, AskedForItPrintsItsFirstLineAtOnce) {
  ProgressLine line(/*first_at_once=*/true);
  EXPECT_EQ(printed(line, {0, 5, 10}), "at 0\nat 10\n");
}

TEST_F(ProgressLineInALog, APhasesLastLinePrintsWhateverTheTime) {
  ProgressLine line;
  ::testing::internal::CaptureStderr();
  line.count("read", 3, 3, "files", 1.0);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "read 3/3 files, 3.00 files/s, ETA 0 s\n");
}

TEST_F(ProgressLineInALog, EndingTheLineWritesNothingInALog) {
  const ProgressLine line;
  ::testing::internal::CaptureStderr();
  line.end_line();
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

}  // namespace
}  // namespace megatron
