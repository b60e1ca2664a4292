// Fuzz target: a tokenizer.json, loaded as `--tokenizer huggingface --tokenizer-model FILE`
// does, then (when it loads) used to encode and decode a short text that mixes scripts.
#include <cstddef>
#include <cstdint>
#include <string>

#include "data/hf_tokenizer.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace megatron;
  fuzz::write_file("hf_tokenizer/tokenizer.json", fuzz::as_text(data, size));
  return fuzz::expect_user_errors_only([&] {
    const auto tokenizer = data::load_hf_tokenizer((fuzz::scratch() / "hf_tokenizer").string());
    const auto ids = tokenizer->encode_with_special_tokens("Hello, wörld! 123 <|endoftext|> 中文 \xF0\x9F\x98\x80 \xFF");
    tokenizer->decode(ids);
    tokenizer->decode_skipping_special(ids);
  });
}
