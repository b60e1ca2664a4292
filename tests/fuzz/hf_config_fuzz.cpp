// Fuzz target: a Hugging Face config.json, read by `megatron convert --from hf` beside a
// model.safetensors that holds no tensors (so a config that passes its checks ends in the
// missing-tensor error, after the layout for its model was built).
#include <cstddef>
#include <cstdint>
#include <string>

#include "ckpt/hugging_face.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace megatron;
  static const bool empty_weights = [] {
    const std::string header = "{}      ";  // 8 bytes: headers are padded to 8
    std::string file(8, '\0');
    file[0] = static_cast<char>(header.size());
    fuzz::write_file("hf/model.safetensors", file + header);
    return true;
  }();
  (void)empty_weights;
  fuzz::write_file("hf/config.json", fuzz::as_text(data, size));
  return fuzz::expect_user_errors_only([&] {
    const ckpt::HuggingFaceSource source(fuzz::scratch() / "hf");
    source.meta();
  });
}
