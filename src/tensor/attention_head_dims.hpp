// The head dims the CUDA flash-attention kernels are built for (kernels/attention.cu), apart
// from the Backend so that the planner can refuse a wider head without including it.
#pragma once

#include <array>
#include <cstdint>

namespace megatron::tensor {

// The CUDA backend runs a smaller head zero-padded to the next; a wider one is refused before a
// run starts (plan::check_engine_support).
inline constexpr std::array<int64_t, 5> kCudaAttentionHeadDims{32, 64, 80, 96, 128};

}  // namespace megatron::tensor
