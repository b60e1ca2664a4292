// Hardware profile files: what `plan --calibrate` writes reads back the same, profiles are
// found by path, and every malformed file is one error naming the file and the key.
#include "plan/hardware_file.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "support/temp_dir.hpp"
#include "support/user_error.hpp"

namespace megatron::plan {
namespace hardware_file_test {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using test_support::TempDir;
using test_support::user_error_of;

HardwareProfile measured_profile() {
  HardwareProfile p = find_hardware("cpu");
  p.name = "cpu-calibrated";
  p.source = "a test";
  p.kernel_overhead_s = 3e-6;
  p.rates_32bit.gemm = {{{64, 256}, {64, 256}, {64, 256}}, {1e9, 2e9, 3e9, 4e9, 5e9, 6e9, 7e9, 8e9}};
  p.rates_16bit.attention_forward = {{{128, 512}, {64}}, {1e10, 2e10}};
  p.rates_16bit.attention_backward = {{{128, 512}, {64}}, {5e9, 9e9}};
  return p;
}

nlohmann::json valid_json() { return hardware_to_json(measured_profile()); }

std::string error_for(const nlohmann::json& json) {
  return user_error_of([&] { hardware_from_json(json, "hw.json"); });
}

TEST(HardwareFile, WrittenProfileReadsBackTheSame) {
  const TempDir dir;
  const std::string path = (dir.path() / "hw.json").string();
  write_hardware_file(measured_profile(), path);
  const HardwareProfile back = read_hardware_file(path);
  EXPECT_EQ(hardware_to_json(back), hardware_to_json(measured_profile()));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(HardwareFile, FindHardwareReadsAPathEndingInJson) {
  const TempDir dir;
  const std::string path = (dir.path() / "measured.JSON").string();
  write_hardware_file(measured_profile(), path);
  const HardwareProfile& found = find_hardware(path);
  EXPECT_EQ(found.name, "cpu-calibrated");
  EXPECT_EQ(found.device, "cpu");
  EXPECT_EQ(&find_hardware(path), &found);  // read once
}

TEST(HardwareFile, AMissingFileNamesThePath) {
  EXPECT_THAT(user_error_of([] { find_hardware("/nonexistent/hw.json"); }),
              StartsWith("/nonexistent/hw.json: cannot read the hardware profile"));
}

TEST(HardwareFile, TextThatIsNotJsonIsRefused) {
  const TempDir dir;
  const auto path = dir.write("hw.json", "{\"format\": ");
  EXPECT_THAT(user_error_of([&] { read_hardware_file(path.string()); }),
              HasSubstr("not valid JSON"));
}

TEST(HardwareFile, RefusesAnotherFormatOrVersion) {
  nlohmann::json format = valid_json();
  format["format"] = "something-else";
  EXPECT_THAT(error_for(format), StartsWith("hw.json: format: must be"));
  nlohmann::json version = valid_json();
  version["version"] = 2;
  EXPECT_THAT(error_for(version), StartsWith("hw.json: version: must be 1"));
}

TEST(HardwareFile, RefusesUnknownAndMissingKeys) {
  nlohmann::json unknown = valid_json();
  unknown["peak_flops"] = 1;
  EXPECT_EQ(error_for(unknown), "hw.json: peak_flops: unknown key");
  nlohmann::json missing = valid_json();
  missing.erase("memory_bandwidth");
  EXPECT_EQ(error_for(missing), "hw.json: memory_bandwidth: missing");
}

TEST(HardwareFile, RefusesNumbersOutOfRange) {
  for (const auto& [key, value] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"peak_flops_16bit", 0}, {"memory_bandwidth", -5}, {"achievable_fraction", 1.5},
           {"dp_overlap", 2}, {"kernel_overhead_s", "fast"}}) {
    nlohmann::json json = valid_json();
    json[key] = value;
    EXPECT_THAT(error_for(json), StartsWith("hw.json: " + key + ": must be")) << key;
  }
}

TEST(HardwareFile, RefusesMagnitudesThatWouldMakeTheEstimateInfinite) {
  for (const auto& [key, value] : std::vector<std::pair<std::string, double>>{
           {"memory_bandwidth", 1e-300}, {"peak_flops_16bit", 1e300}, {"kernel_overhead_s", 1e-12}}) {
    nlohmann::json json = valid_json();
    json[key] = value;
    EXPECT_THAT(error_for(json), StartsWith("hw.json: " + key + ": must be within 1e-9 and 1e18"))
        << key;
  }
}

TEST(HardwareFile, RefusesADeviceOtherThanCpuOrCuda) {
  nlohmann::json json = valid_json();
  json["device"] = "tpu";
  EXPECT_EQ(error_for(json), "hw.json: device: must be \"cpu\" or \"cuda\"");
}

TEST(HardwareFile, RefusesAGridWhoseRatesDoNotFillIt) {
  nlohmann::json json = valid_json();
  json["rates_32bit"]["gemm"]["flops_per_s"].erase(0);
  EXPECT_EQ(error_for(json), "hw.json: rates_32bit.gemm: 7 rates for a grid of 8 points");
}

TEST(HardwareFile, RefusesAGridAxisThatIsNotAListOfPositiveNumbers) {
  nlohmann::json text = valid_json();
  text["rates_16bit"]["attention_forward"]["seq"] = "128";
  EXPECT_EQ(error_for(text), "hw.json: rates_16bit.attention_forward.seq: must be a list of numbers");
  nlohmann::json zero = valid_json();
  zero["rates_16bit"]["attention_forward"]["head_dim"] = {0};
  EXPECT_EQ(error_for(zero),
            "hw.json: rates_16bit.attention_forward.head_dim: must be a finite number > 0");
}

TEST(HardwareFile, RefusesUnknownGridsAndAxes) {
  nlohmann::json grid = valid_json();
  grid["rates_16bit"]["softmax"] = nlohmann::json::object();
  EXPECT_THAT(error_for(grid), StartsWith("hw.json: rates_16bit.softmax: unknown key"));
  nlohmann::json axis = valid_json();
  axis["rates_32bit"]["gemm"]["batch"] = {1};
  EXPECT_EQ(error_for(axis), "hw.json: rates_32bit.gemm.batch: unknown key");
}

TEST(HardwareFile, RefusesAFileOver16MiB) {
  const TempDir dir;
  const auto path = dir.path() / "big.json";
  std::ofstream(path) << std::string((16u << 20) + 1, ' ');
  EXPECT_THAT(user_error_of([&] { read_hardware_file(path.string()); }),
              HasSubstr("a hardware profile is at most 16 MiB"));
}

}  // namespace hardware_file_test
}  // namespace megatron::plan
