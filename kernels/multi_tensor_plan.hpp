// How the multi-tensor kernels cut a list of tensors into launches: each block takes one chunk
// of one tensor, and a launch holds at most so many tensors and blocks. Host code only.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace megatron::kernels {

struct MultiTensorLaunch {
  size_t first = 0, last = 0;  // tensors [first, last) are this launch's slots 0, 1, ...
  struct Block {
    int slot = 0;    // tensor first + slot
    int chunk = 0;   // elements [chunk * chunk_size, ...) of it
  };
  std::vector<Block> blocks;
};

// Every chunk of every tensor, in order, exactly once. A tensor whose chunks do not fit the
// current launch continues in the next (it is then a slot of both); empty tensors get no block.
inline std::vector<MultiTensorLaunch> plan_multi_tensor_launches(std::span<const int64_t> sizes,
                                                                 int64_t chunk_size,
                                                                 int max_tensors, int max_blocks) {
  std::vector<MultiTensorLaunch> launches;
  MultiTensorLaunch current;
  auto flush = [&](size_t last) {
    current.last = std::min(last, current.first + size_t(max_tensors));
    if (!current.blocks.empty()) launches.push_back(current);
    current.blocks.clear();
  };
  for (size_t i = 0; i < sizes.size(); ++i) {
    const int64_t chunks = (sizes[i] + chunk_size - 1) / chunk_size;
    for (int64_t c = 0; c < chunks; ++c) {
      const bool table_full = c == 0 && i - current.first >= size_t(max_tensors);
      if (int(current.blocks.size()) == max_blocks || table_full) {
        flush(c > 0 ? i + 1 : i);
        current.first = i;
      }
      current.blocks.push_back({int(i - current.first), int(c)});
    }
  }
  flush(sizes.size());
  return launches;
}

}  // namespace megatron::kernels
