// Which device a recipe runs on, and what a run gets for it: cluster.device, auto following
// the hardware profile, and a world of one without MPI.
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "plan/engine_support.hpp"
#include "plan/hardware_file.hpp"
#include "support/temp_dir.hpp"
#include "tensor/make_backend.hpp"
#include "train/device_setup.hpp"

namespace megatron::train {
namespace {

using plan::run_device;

recipe::Recipe with(const std::string& hardware, recipe::DeviceKind device) {
  recipe::Recipe r;
  r.cluster.hardware = hardware;
  r.cluster.device = device;
  return r;
}

TEST(RunDevice, AutoIsCpuForTheCpuHardwareProfile) {
  EXPECT_EQ(run_device(with("cpu", recipe::DeviceKind::Auto)), tensor::Device::Cpu);
}

TEST(RunDevice, AutoIsCudaForAGpuHardwareProfile) {
  EXPECT_EQ(run_device(with("h100-sxm", recipe::DeviceKind::Auto)), tensor::Device::Cuda);
  EXPECT_EQ(run_device(with("a100-80gb", recipe::DeviceKind::Auto)), tensor::Device::Cuda);
}

TEST(RunDevice, AutoFollowsTheDeviceACalibratedProfileWasMeasuredOn) {
  const test_support::TempDir dir;
  for (const std::string device : {"cpu", "cuda"}) {
    plan::HardwareProfile profile = plan::find_hardware("cpu");
    profile.device = device;
    const std::string path = (dir.path() / (device + ".json")).string();
    plan::write_hardware_file(profile, path);
    EXPECT_EQ(run_device(with(path, recipe::DeviceKind::Auto)),
              device == "cpu" ? tensor::Device::Cpu : tensor::Device::Cuda);
  }
}

TEST(RunDevice, AnExplicitDeviceWinsOverTheProfile) {
  EXPECT_EQ(run_device(with("h200", recipe::DeviceKind::Cpu)), tensor::Device::Cpu);
  EXPECT_EQ(run_device(with("cpu", recipe::DeviceKind::Cuda)), tensor::Device::Cuda);
}

// A compiled recipe of `head_dim` channels a head on `hardware`, from file "big.yaml".
recipe::CompiledRecipe with_heads(const std::string& hardware, int64_t head_dim) {
  recipe::CompiledRecipe c;
  c.file = "big.yaml";
  c.recipe = with(hardware, recipe::DeviceKind::Auto);
  c.recipe.model.num_layers = 2;
  c.recipe.training.micro_batch_size = 1;
  c.recipe.training.global_batch_size = 1;
  c.derived.head_dim = head_dim;
  return c;
}

TEST(DeviceLimits, CudaRefusesHeadsWiderThanItsAttentionKernelsNamingTheKey) {
  try {
    plan::check_engine_support(with_heads("h100-sxm", 256));
    FAIL() << "head dim 256 accepted on cuda";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "big.yaml: model.kv_channels: attention heads of 256 channels are wider "
                           "than the CUDA attention's 128; use more heads "
                           "(model.num_attention_heads) or run on the cpu");
  }
}

TEST(DeviceLimits, TheCpuAndHeadsUpTo128PassOnEveryDevice) {
  EXPECT_NO_THROW(plan::check_engine_support(with_heads("cpu", 256)));
  EXPECT_NO_THROW(plan::check_engine_support(with_heads("h200", 128)));
  EXPECT_NO_THROW(plan::check_engine_support(with_heads("h200", 8)));
}

TEST(RunBackend, TheCpuBackendTakesTheThreadCount) {
  const auto backend = make_run_backend(with("cpu", recipe::DeviceKind::Cpu), 1, 0);
  EXPECT_EQ(backend->device(), tensor::Device::Cpu);
  EXPECT_NE(backend->description().find("1 thread"), std::string::npos) << backend->description();
}

TEST(RunBackend, CudaWithoutAGpuIsAUserErrorSayingWhatToDo) {
  if (tensor::cuda_device_count() > 0) GTEST_SKIP() << "a GPU is present: this checks its absence";
  try {
    make_run_backend(with("cpu", recipe::DeviceKind::Cuda), 1, 0);
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("--device cpu"), std::string::npos) << e.what();
  }
}

TEST(RunWorld, ASingleProcessIsAWorldOfOneWithoutMpi) {
  const auto backend = make_run_backend(with("cpu", recipe::DeviceKind::Cpu), 1, 0);
  const auto world = make_world(nullptr, *backend);
  EXPECT_EQ(world->size(), 1);
  EXPECT_EQ(world->rank(), 0);
}

}  // namespace
}  // namespace megatron::train
