// `megatron plan --calibrate`: measures this machine into a profile file that `plan` and
// cluster.hardware then use; misuse of its flags is one line and exit code 2.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "run_command.hpp"

namespace megatron::cli {
namespace calibrate_cli_test {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

TEST(Calibrate, QuickCalibrationWritesAProfileThatPlanUses) {
  const test_support::TempDir dir;
  const std::string file = (dir.path() / "measured.json").string();
  const auto r = run_megatron("plan recipes/gpt-tiny.yaml --calibrate --quick --threads 1 "
                              "--output '" + file + "' --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("f32 GEMMs: 8 shapes"));
  EXPECT_THAT(r.err, HasSubstr("wrote " + file));

  const auto profile = nlohmann::json::parse(slurp(file));
  EXPECT_EQ(profile["name"], "cpu-calibrated");
  EXPECT_EQ(profile["device"], "cpu");
  EXPECT_THAT(profile["source"].get<std::string>(), StartsWith("megatron plan --calibrate --quick on "));
  EXPECT_EQ(profile["rates_32bit"]["gemm"]["flops_per_s"].size(), 8u);
  EXPECT_EQ(profile["rates_16bit"]["attention_backward"]["flops_per_s"].size(), 2u);
  EXPECT_GT(profile["memory_bandwidth"].get<double>(), 1e8);

  // The plan printed after calibrating used the new profile; so does a later plan naming it.
  const auto plan = nlohmann::json::parse(r.out);
  EXPECT_EQ(plan["estimate"]["hardware"], "cpu-calibrated");
  const auto again = run_megatron("plan recipes/gpt-tiny.yaml --json cluster.hardware='" + file + "'");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(nlohmann::json::parse(again.out)["estimate"]["step_time_s"],
            plan["estimate"]["step_time_s"]);
}

TEST(Calibrate, AnExistingProfileIsNotReplacedWithoutForce) {
  const test_support::TempDir dir;
  const auto file = dir.write("kept.json", "mine");
  const auto r = run_megatron("plan --calibrate --quick --output '" + file.string() + "'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("kept.json exists; --force replaces it"));
  EXPECT_EQ(slurp(file), "mine");
}

TEST(Calibrate, AnOutputThatCannotBeWrittenIsRefusedBeforeMeasuring) {
  const test_support::TempDir dir;
  const auto file = dir.write("file.txt", "in the way");
  const auto under_a_file =
      run_megatron("plan --calibrate --quick --output '" + file.string() + "/hw.json'");
  EXPECT_EQ(under_a_file.exit_code, 2);
  EXPECT_THAT(under_a_file.err, HasSubstr("--output " + file.string() + ": cannot create this "
                                          "directory"));
  EXPECT_THAT(under_a_file.err, Not(HasSubstr("GEMMs")));  // nothing was measured
  std::filesystem::create_directory(dir.path() / "dir.json");
  const auto a_directory = run_megatron("plan --calibrate --quick --force --output '" +
                                        (dir.path() / "dir.json").string() + "'");
  EXPECT_EQ(a_directory.exit_code, 2);
  EXPECT_THAT(a_directory.err, HasSubstr("dir.json is a directory; name the profile file"));
  EXPECT_THAT(a_directory.err, Not(HasSubstr("GEMMs")));
}

TEST(Calibrate, CalibrationFlagsWithoutCalibrateAreRefused) {
  const auto r = run_megatron("plan recipes/gpt-tiny.yaml --quick");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "megatron: error: plan: --quick goes with --calibrate\n");
}

TEST(Calibrate, AnOutputNotEndingInJsonIsRefusedBeforeMeasuring) {
  const auto r = run_megatron("plan --calibrate --output hw.txt");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--output hw.txt: a hardware profile file's name ends in .json"));
}

TEST(Calibrate, PlanWithoutARecipeOrCalibrateSaysWhatItNeeds) {
  const auto r = run_megatron("plan");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("a recipe is required (or --calibrate"));
}

TEST(Calibrate, AProfileFileThatIsNotAProfileIsOneLine) {
  const test_support::TempDir dir;
  const auto file = dir.write("bad.json", "{\"format\": \"megatron-hardware-profile\", \"version\": 1}");
  const auto r = run_megatron("plan recipes/gpt-tiny.yaml --hardware '" + file.string() + "'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr(file.string() + ": name: missing"));
}

}  // namespace calibrate_cli_test
}  // namespace megatron::cli
