// ckpt inspect and ckpt verify as calls: a path that holds no checkpoint is refused with what
// to pass instead, before anything is read.
#include "ckpt/inspect_job.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "ckpt/directory.hpp"
#include "support/temp_dir.hpp"
#include "support/user_error.hpp"

namespace megatron::ckpt {
namespace {

using ::testing::HasSubstr;

TEST(ExistingCheckpoint, ADirectoryWithoutOneSaysWhatToPass) {
  test_support::TempDir dir;
  EXPECT_THAT(test_support::user_error_of([&] { existing_checkpoint(dir.path().string()); }),
              HasSubstr("not a checkpoint (no checkpoint.h5, no latest); pass an iter_NNNNNNN "
                        "directory or a save directory"));
}

TEST(VerifyCheckpoint, RefusesADirectoryWithoutACheckpoint) {
  test_support::TempDir dir;
  std::ostringstream out;
  EXPECT_THAT(test_support::user_error_of([&] { verify_checkpoint(dir.path().string(), out); }),
              HasSubstr("not a checkpoint"));
  EXPECT_EQ(out.str(), "");
}

}  // namespace
}  // namespace megatron::ckpt
