#include "parallel/scalar_reduce.hpp"

#include <vector>

#include "tensor/host_io.hpp"

namespace megatron::parallel {

double sum_across(tensor::Backend& backend, dist::Communicator& group, double value) {
  if (group.size() == 1) return value;
  const float high = float(value);
  const float parts[2] = {high, float(value - double(high))};
  tensor::Tensor t = tensor::from_floats(backend, parts, {2});
  group.all_reduce(t);
  const std::vector<float> out = tensor::to_floats(backend, t);
  return double(out[0]) + double(out[1]);
}

}  // namespace megatron::parallel
