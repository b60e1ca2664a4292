#include "tensor/make_backend.hpp"

#include "core/error.hpp"
#include "tensor/cpu_backend.hpp"
#ifdef MEGATRON_WITH_CUDA
#include "kernels/device.hpp"
#include "tensor/cuda_backend.hpp"
#endif

namespace megatron::tensor {

#ifdef MEGATRON_WITH_CUDA
bool cuda_built() { return true; }
int cuda_device_count() { return kernels::device_count(); }
void select_cuda_device(int index) { kernels::select_device(index); }
#else
bool cuda_built() { return false; }
int cuda_device_count() { return 0; }
void select_cuda_device(int) {}
#endif

std::unique_ptr<Backend> make_backend(Device device, const BackendOptions& options) {
  if (device == Device::Cpu) return std::make_unique<CpuBackend>(options.threads);
#ifdef MEGATRON_WITH_CUDA
  return std::make_unique<CudaBackend>(
      CudaOptions{.device = options.cuda_device, .allow_tf32 = options.allow_tf32});
#else
  throw UserError("this megatron was built without CUDA (nvcc was not found when it was "
                  "configured): rebuild with the cuda preset, or run on the cpu with "
                  "--device cpu");
#endif
}

}  // namespace megatron::tensor
