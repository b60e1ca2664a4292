#include "plan/stages.hpp"

#include <numeric>

#include "core/checked.hpp"

namespace megatron::plan {
namespace {

std::vector<int64_t> even_split(int64_t layers, int64_t chunks) {
  std::vector<int64_t> out(chunks, layers / chunks);
  for (int64_t i = 0; i < layers % chunks; ++i) ++out[i];
  return out;
}

}  // namespace

Chunks model_chunks(const ModelShape& x, const std::vector<int64_t>& layers_per_chunk) {
  const int64_t count = checked_mul(x.p, x.v, "the model chunks (pipeline x virtual_pipeline)");
  std::vector<int64_t> sizes = layers_per_chunk;
  const bool describes_model =
      static_cast<int64_t>(sizes.size()) == count &&
      std::accumulate(sizes.begin(), sizes.end(), int64_t{0}) == x.total_layers();
  if (!describes_model) sizes = even_split(x.total_layers(), count);

  // Index c*p + s is already model order (chunk 0 of every stage first), so numbering the
  // chunks in index order numbers the layers as Megatron's interleaving does.
  Chunks chunks(count);
  int64_t next = 0;
  for (int64_t i = 0; i < count; ++i)
    for (int64_t k = 0; k < sizes[i]; ++k) chunks[i].push_back(next++);
  return chunks;
}

std::vector<Stage> assign_stages(const ModelShape& x, const Chunks& chunks) {
  std::vector<Stage> stages(x.p);
  for (int64_t s = 0; s < x.p; ++s) {
    Stage& stage = stages[s];
    stage.index = s;
    for (int64_t c = 0; c < x.v; ++c) {
      const auto& layers = chunks[c * x.p + s];
      stage.chunks.push_back(layers);
      stage.layers.insert(stage.layers.end(), layers.begin(), layers.end());
    }
    stage.has_embedding = s == 0;
    stage.has_output_layer = s == x.p - 1;
  }
  return stages;
}

}  // namespace megatron::plan
