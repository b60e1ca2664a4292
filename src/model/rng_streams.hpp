// Names for the Philox streams the model draws from, so that every random number is a pure
// function of (seed, what it is for, where) and never of execution order.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/fnv1a.hpp"
#include "tensor/backend.hpp"

namespace megatron::model {

// Initialisation: one stream per parameter, from its name (FNV-1a, top bit set so it never
// meets a dropout stream).
constexpr uint64_t init_stream(std::string_view name) { return fnv1a64(name) | (1ull << 63); }

enum class DropoutSite : uint64_t {
  Embedding = 0,
  AttentionProbs = 1,
  AttentionOut = 2,
  MlpOut = 3,
  CrossAttentionProbs = 4,  // T5's decoder blocks
  CrossAttentionOut = 5,
  DecoderEmbedding = 6,     // T5's decoder input
};

// Dropout: (iteration, micro-batch, layer, site) packed into the stream; the tensor-parallel
// rank joins it inside tensor-parallel regions (the parallel layers supply it).
constexpr uint64_t dropout_stream(int64_t iteration, int64_t microbatch, int64_t layer,
                                  DropoutSite site, int64_t tp_rank = 0) {
  return (uint64_t(iteration) << 32) ^ (uint64_t(microbatch) << 20) ^ (uint64_t(layer) << 8) ^
         (uint64_t(tp_rank) << 3) ^ static_cast<uint64_t>(site);
}

}  // namespace megatron::model
