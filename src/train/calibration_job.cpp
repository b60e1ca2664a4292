#include "train/calibration_job.hpp"

#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "dist/launcher.hpp"
#include "dist/mpi_communicator.hpp"
#include "plan/hardware.hpp"
#include "plan/hardware_file.hpp"
#include "tensor/make_backend.hpp"
#include "train/calibration.hpp"
#include "train/device_setup.hpp"

namespace megatron::train {

std::string calibrate_to_file(const CalibrationJob& job) {
  const plan::HardwareProfile& base = plan::find_hardware(job.base);
  const tensor::Device device =
      job.device == "cuda" || (job.device.empty() && base.name != "cpu") ? tensor::Device::Cuda
                                                                          : tensor::Device::Cpu;
  const dist::LaunchInfo launch = dist::launch_info();
  if (device == tensor::Device::Cuda) tensor::select_cuda_device(launch.local_rank);
  std::unique_ptr<dist::MpiRuntime> mpi;
  if (launch.world_size > 1) mpi = std::make_unique<dist::MpiRuntime>();
  auto backend = tensor::make_backend(device, {.threads = job.threads,
                                               .cuda_device = launch.local_rank});
  auto world = make_world(mpi.get(), *backend);
  const bool writer = world->rank() == 0;
  if (writer)
    std::cerr << fmt::format("calibrating {} from the {} profile's datasheet numbers{}\n",
                             backend->description(), base.name,
                             world->size() > 1 ? fmt::format(", {} ranks", world->size()) : "");
  CalibrationOptions options;
  options.quick = job.quick;
  options.progress = [](const std::string& line) { std::cerr << "  " << line << std::endl; };
  plan::HardwareProfile profile = calibrate(base, *backend, world.get(), options);
  profile.name = base.name + "-calibrated";
  profile.description = base.description + ", calibrated";
  if (writer) {
    plan::write_hardware_file(profile, job.output);
    std::cerr << fmt::format("wrote {}: use it with `megatron plan RECIPE --hardware {}` or "
                             "cluster.hardware: {}\n",
                             job.output, job.output, job.output);
  }
  world->barrier();
  return job.output;
}

}  // namespace megatron::train
