// Creating the backend a run asks for (cpu or cuda), and what this build and machine offer.
// The only place outside the CUDA glue that knows whether the build has CUDA.
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include "tensor/attention_head_dims.hpp"
#include "tensor/backend.hpp"

namespace megatron::tensor {

struct BackendOptions {
  int threads = 0;          // cpu: 0 means OMP_NUM_THREADS, else every core
  int cuda_device = 0;      // cuda: the device index (the local rank's GPU)
  bool allow_tf32 = true;   // cuda: f32 GEMMs may use TF32 tensor cores
};

// Whether this build has the CUDA backend; how many CUDA devices the driver shows (0 without
// a driver or a GPU, and in a build without CUDA).
bool cuda_built();
int cuda_device_count();

// Makes CUDA device `index` (of cuda_device_count()) this process's current one; nothing when
// there is none or the build has no CUDA. Called before MPI starts, so that a CUDA-aware MPI
// opens its context on the rank's own GPU instead of on GPU 0.
void select_cuda_device(int index);


// Throws UserError saying what to do when `device` is cuda and this build or machine has none.
std::unique_ptr<Backend> make_backend(Device device, const BackendOptions& options);

}  // namespace megatron::tensor
