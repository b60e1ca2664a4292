// The list of every case of the op harness, and the random inputs they share.
#include <ostream>
#include <random>
#include <set>
#include <stdexcept>

#include "ops/op_case.hpp"
#include "tensor/host_io.hpp"

namespace megatron::ops_test {

std::vector<OpCase> all_op_cases() {
  std::vector<OpCase> cases = backend_op_cases();
  for (OpCase& c : layer_op_cases()) cases.push_back(std::move(c));
  // A repeated name would make two GoogleTest cases of one name, and --only ambiguous.
  std::set<std::string> names;
  for (const OpCase& c : cases) {
    if (!names.insert(c.name).second) throw std::logic_error("two op cases named " + c.name);
  }
  return cases;
}

OpRun forward_first(OpRun run) {
  run.backward = [forward = run.forward, backward = run.backward](std::span<const tensor::Tensor> w) {
    forward();
    return backward(w);
  };
  return run;
}

void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name; }

std::vector<float> normal_values(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

tensor::Tensor random_tensor(tensor::Backend& backend, const tensor::Shape& shape, uint32_t seed,
                             float scale) {
  return tensor::from_floats(backend, normal_values(size_t(tensor::numel(shape)), seed, scale),
                             shape);
}

std::vector<tensor::Tensor> output_weights(tensor::Backend& backend,
                                           std::span<const tensor::Tensor> outputs, uint32_t seed) {
  std::vector<tensor::Tensor> weights;
  for (const tensor::Tensor& out : outputs) {
    weights.push_back(random_tensor(backend, out.shape(), seed++));
  }
  return weights;
}

}  // namespace megatron::ops_test
