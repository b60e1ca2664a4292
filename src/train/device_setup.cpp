#include "train/device_setup.hpp"

#include "core/error.hpp"
#include "dist/self_communicator.hpp"
#include "plan/hardware.hpp"
#include "tensor/make_backend.hpp"
#ifdef MEGATRON_WITH_CUDA
#include "dist/nccl_communicator.hpp"
#include "tensor/cuda_backend.hpp"
#endif

namespace megatron::train {

tensor::Device run_device(const recipe::Recipe& r) {
  switch (r.cluster.device) {
    case recipe::DeviceKind::Cpu: return tensor::Device::Cpu;
    case recipe::DeviceKind::Cuda: return tensor::Device::Cuda;
    case recipe::DeviceKind::Auto: break;
  }
  // Auto: the device the hardware profile describes (a calibrated file records its own). A name
  // this build does not know is a GPU's; the planner reports it.
  const auto device_of = [](const plan::HardwareProfile& p) {
    return p.device == "cpu" ? tensor::Device::Cpu : tensor::Device::Cuda;
  };
  if (plan::is_profile_file(r.cluster.hardware))
    return device_of(plan::find_hardware(r.cluster.hardware));
  for (const plan::HardwareProfile& p : plan::hardware_profiles())
    if (p.name == r.cluster.hardware) return device_of(p);
  return tensor::Device::Cuda;
}

void check_device_limits(const recipe::Recipe& r, int64_t head_dim, const std::string& file) {
  constexpr int64_t kCudaMaxHeadDim = tensor::kCudaAttentionHeadDims.back();
  if (run_device(r) == tensor::Device::Cuda && head_dim > kCudaMaxHeadDim) {
    throw UserError(file + ": model.kv_channels: attention heads of " + std::to_string(head_dim) +
                    " channels are wider than the CUDA attention's " +
                    std::to_string(kCudaMaxHeadDim) +
                    "; use more heads (model.num_attention_heads) or run on the cpu");
  }
}

int run_cuda_device(const recipe::Recipe& r, int local_rank) {
  const int gpus = run_device(r) == tensor::Device::Cuda ? tensor::cuda_device_count() : 0;
  return gpus > 0 ? local_rank % gpus : 0;
}

std::unique_ptr<tensor::Backend> make_run_backend(const recipe::Recipe& r, int threads,
                                                  int local_rank) {
  return tensor::make_backend(run_device(r), {.threads = threads,
                                              .cuda_device = run_cuda_device(r, local_rank),
                                              .allow_tf32 = r.precision.allow_tf32});
}

std::unique_ptr<dist::Communicator> make_world(dist::MpiRuntime* mpi, tensor::Backend& backend) {
  if (!mpi) return std::make_unique<dist::SelfCommunicator>("world", &backend);
#ifdef MEGATRON_WITH_CUDA
  if (backend.device() == tensor::Device::Cuda) {
    auto& gpu = static_cast<tensor::CudaBackend&>(backend);
    return dist::make_nccl_communicator(mpi->world(), gpu.stream(), gpu.device_index());
  }
#endif
  return mpi->world();
}

}  // namespace megatron::train
