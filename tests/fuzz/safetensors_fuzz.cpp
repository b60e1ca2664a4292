// Fuzz target: a safetensors file (Hugging Face weights) opened, and the start of every tensor
// it lists read back.
#include <cstddef>
#include <cstdint>
#include <vector>
#include <algorithm>

#include "ckpt/safetensors.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace megatron;
  const auto file = fuzz::write_file("model.safetensors", fuzz::as_text(data, size));
  return fuzz::expect_user_errors_only([&] {
    const ckpt::SafetensorsFile st(file);
    std::vector<std::byte> buffer(256);
    int listed = 0;
    for (const ckpt::SafetensorsEntry& e : st.entries()) {
      if (++listed > 64) break;
      const int64_t bytes = std::min<int64_t>(e.end - e.begin, int64_t(buffer.size()));
      st.read(e, 0, std::span<std::byte>(buffer.data(), std::size_t(std::max<int64_t>(bytes, 0))));
    }
  });
}
