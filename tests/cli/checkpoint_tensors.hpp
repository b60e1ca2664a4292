// What the run tests read back from checkpoints: every model tensor, raw, by name (for
// bitwise comparisons across conversions).
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "ckpt/checkpoint_reader.hpp"

namespace megatron::cli {

// Every tensor of a checkpoint's model, raw, by name.
inline std::map<std::string, std::vector<std::byte>> model_tensors(const std::filesystem::path& dir) {
  ckpt::CheckpointReader reader(dir);
  std::map<std::string, std::vector<std::byte>> out;
  for (const ckpt::TensorInfo& t : reader.tensors()) {
    if (t.kind != ckpt::kModel) continue;
    const ckpt::Box whole{0, t.shape[0], 0, t.shape.size() > 1 ? t.shape[1] : 1};
    std::vector<std::byte> bytes(size_t(whole.numel()) * tensor::size_of(t.dtype));
    reader.read_raw(t, {whole}, bytes);
    out[t.name] = std::move(bytes);
  }
  return out;
}

}  // namespace megatron::cli
