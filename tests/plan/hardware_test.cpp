// Hardware profiles: lookup by name, aliases, and the error for unknown names.
#include "plan/hardware.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/error.hpp"

namespace megatron::plan {
namespace hardware_test {

using ::testing::HasSubstr;

TEST(Hardware, ShipsA100H100H200AndCpuProfiles) {
  std::vector<std::string> names;
  for (const HardwareProfile& profile : hardware_profiles()) names.push_back(profile.name);
  EXPECT_THAT(names, ::testing::ElementsAre("a100-80gb", "h100-sxm", "h200", "cpu"));
}

TEST(Hardware, NamesAreCaseInsensitive) { EXPECT_EQ(find_hardware("H100-SXM").name, "h100-sxm"); }

TEST(Hardware, ShortAliasesFindTheirProfile) {
  EXPECT_EQ(find_hardware("a100").name, "a100-80gb");
  EXPECT_EQ(find_hardware("H100").name, "h100-sxm");
}

TEST(Hardware, UnknownNameIsAUserErrorListingTheKnownOnes) {
  try {
    find_hardware("tpu-v5");
    FAIL() << "expected UserError";
  } catch (const UserError& error) {
    EXPECT_THAT(error.what(), HasSubstr("'tpu-v5'"));
    EXPECT_THAT(error.what(), HasSubstr("a100-80gb, h100-sxm, h200, cpu"));
  }
}

TEST(Hardware, EveryProfileHasPositiveRatesAndSizes) {
  for (const HardwareProfile& p : hardware_profiles()) {
    SCOPED_TRACE(p.name);
    EXPECT_GT(p.peak_flops_16bit, 0);
    EXPECT_GT(p.peak_flops_32bit, 0);
    EXPECT_GT(p.achievable_fraction, 0);
    EXPECT_LE(p.achievable_fraction, 1);
    EXPECT_GT(p.memory_bytes, 0);
    EXPECT_GT(p.intra_node_bandwidth, 0);
    EXPECT_GT(p.inter_node_bandwidth, 0);
    EXPECT_GE(p.dp_overlap, 0);
    EXPECT_LT(p.dp_overlap, 1);
  }
}

TEST(Hardware, H200HasWhatTheDriverReportsNotTheMarketingGigabytes) {
  // nvidia-smi reports 143771 MiB (140.4 GiB); "141 GB" read as 141e9 bytes would be 131.3 GiB.
  EXPECT_DOUBLE_EQ(find_hardware("h200").memory_bytes, 143771.0 * 1024 * 1024);
}

}  // namespace hardware_test
}  // namespace megatron::plan
