#include "dist/broadcast_text.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace megatron::dist {

std::string broadcast_text(Communicator& group, tensor::Backend& backend, const std::string& text,
                           int root) {
  const bool sending = group.rank() == root;
  tensor::Tensor length = backend.empty({1}, tensor::DType::I64);
  int64_t n = sending ? int64_t(text.size()) : 0;
  if (sending) backend.write(length, &n);
  group.broadcast(length, root);
  backend.read(length, &n);
  if (n <= 0) return {};
  tensor::Tensor bytes = backend.zeros({(n + 3) / 4}, tensor::DType::I32);
  std::vector<char> packed(bytes.bytes(), '\0');
  if (sending) {
    std::copy(text.begin(), text.end(), packed.begin());
    backend.write(bytes, packed.data());
  }
  group.broadcast(bytes, root);
  backend.read(bytes, packed.data());
  return std::string(packed.data(), size_t(n));
}

}  // namespace megatron::dist
