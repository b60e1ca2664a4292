#include "train/device_setup.hpp"

#include "core/error.hpp"
#include "dist/self_communicator.hpp"
#include "plan/engine_support.hpp"
#include "tensor/make_backend.hpp"
#ifdef MEGATRON_WITH_CUDA
#include "dist/nccl_communicator.hpp"
#include "tensor/cuda_backend.hpp"
#endif

namespace megatron::train {

using plan::run_device;

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
    auto& gpu = static_cast<tensor::CudaBackend&>(backend.underlying());
    return dist::make_nccl_communicator(mpi->world(), gpu.stream(), gpu.device_index());
  }
#endif
  return mpi->world();
}

}  // namespace megatron::train
