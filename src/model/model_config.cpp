#include "model/model_config.hpp"

namespace megatron::model {

int64_t ModelConfig::rotary_dim() const {
  // Megatron rounds the rotary share of the head down to an even number of channels.
  const auto dim = static_cast<int64_t>(double(head_dim) * rotary_percent);
  return dim - dim % 2;
}

}  // namespace megatron::model
