// Fuzz target: a Megatron .idx index beside a .bin of a size the input chooses, opened and
// read as `megatron data inspect`, `data merge` and training read them.
#include <cstddef>
#include <cstdint>
#include <string>
#include <algorithm>

#include "data/indexed_dataset.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace megatron;
  if (size < 2) return 0;
  // Bytes 0-1: the .bin's size (its content is a fixed pattern); the rest is the .idx.
  const std::size_t bin_size = std::size_t(data[0]) | (std::size_t(data[1]) << 8);
  std::string bin(bin_size, '\0');
  // Small ids at every 8th byte, so tokens of every width are plausible ids.
  for (std::size_t i = 0; i < bin_size; i += 8) bin[i] = static_cast<char>((i * 7) & 0x7f);
  fuzz::write_file("set.bin", bin);
  fuzz::write_file("set.idx", fuzz::as_text(data + 2, size - 2));
  return fuzz::expect_user_errors_only([&] {
    const data::IndexedDataset dataset((fuzz::scratch() / "set").string());
    dataset.total_tokens();
    const int64_t n = std::min<int64_t>(dataset.sequences(), 256);
    for (int64_t i = 0; i < n; ++i) dataset.tokens(i);
    const auto docs = dataset.document_indices();
    for (std::size_t d = 0; d < docs.size() && d < 256; ++d) (void)docs[d];
  });
}
