#include "ckpt/describe.hpp"

#include <fmt/format.h>

#include <sstream>

#include "ckpt/shard_geometry.hpp"
#include "tensor/tensor.hpp"

namespace megatron::ckpt {

std::string describe(const CheckpointReader& reader) {
  const CheckpointMeta& m = reader.meta();
  std::ostringstream out;
  const auto& l = m.layout;
  out << fmt::format("checkpoint {}\n", reader.dir().string());
  out << fmt::format("  iteration {}, {} samples consumed, {} skipped, {} optimizer steps\n",
                     m.state.iteration, m.state.consumed_samples, m.state.skipped_iterations,
                     m.state.optimizer_steps);
  out << fmt::format(
      "  saved under tensor {} x pipeline {}{} x data {}{}{} ({} ranks)\n", l.tensor, l.pipeline,
      l.virtual_pipeline > 1 ? fmt::format(" (x{} virtual)", l.virtual_pipeline) : "", l.data,
      l.sequence_parallel ? ", sequence parallel" : "",
      l.distributed_optimizer ? ", distributed optimizer" : "", l.world);
  out << fmt::format("  weights {}, optimizer {}, loss scale {}, seed {}\n", m.dtype, m.optimizer,
                     m.state.loss_scale, m.seed);
  out << fmt::format("  written {} by megatron {}\n", m.created, m.version);
  out << "model:\n";
  for (const auto& [k, v] : m.model) out << fmt::format("  {}: {}\n", k, v);
  if (!m.overrides.empty()) {
    out << "overrides:\n";
    size_t at = 0;
    while (at < m.overrides.size()) {
      const size_t end = m.overrides.find('\n', at);
      out << "  " << m.overrides.substr(at, end - at) << "\n";
      at = end == std::string::npos ? m.overrides.size() : end + 1;
    }
  }
  out << "tensors:\n";
  int64_t bytes = 0;
  for (const TensorInfo& t : reader.tensors()) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    bytes += n * int64_t(tensor::size_of(t.dtype));
    out << fmt::format("  {}/{} {} {} (split {}{})\n", t.kind, t.name, tensor::to_string(t.shape),
                       tensor::name(t.dtype), split_name(t.split),
                       t.parts > 1 ? fmt::format(", {} parts", t.parts) : "");
  }
  out << fmt::format(
      "{} tensors, {:.1f} MiB (megatron ckpt inspect --recipe prints the "
      "recipe)\n",
      reader.tensors().size(), double(bytes) / 1048576.0);
  return out.str();
}

}  // namespace megatron::ckpt
