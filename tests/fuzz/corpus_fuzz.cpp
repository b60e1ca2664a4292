// Fuzz target: a corpus file through `megatron preprocess` (line reader, .gz/.zst streams,
// JSON lines, sentence splitting, WordPiece, the indexed dataset writer). The first byte picks
// the compression (bits 0-1) and the options (bits 2-6); the rest is the file.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "data/preprocess.hpp"
#include "data/tokenizer.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace megatron;
  static const std::unique_ptr<data::Tokenizer> tokenizer = data::make_tokenizer(
      data::TokenizerKind::BertWordPieceLowerCase,
      {.vocab_file = std::string(MEGATRON_SOURCE_DIR) + "/data/tokenizers/bert-base-uncased/vocab.txt"});
  if (size == 0) return 0;
  const uint8_t choice = data[0];
  static const char* const kExtensions[] = {".jsonl", ".jsonl.gz", ".jsonl.zst"};
  const auto input = fuzz::write_file(std::string("corpus") + kExtensions[(choice & 3) % 3],
                                      fuzz::as_text(data + 1, size - 1));
  data::PreprocessOptions options;
  options.input = input.string();
  options.output_prefix = (fuzz::scratch() / "out").string();
  options.split_sentences = choice & 4;
  options.keep_newlines = choice & 8;
  options.append_eod = choice & 16;
  options.skip_bad_lines = choice & 32;
  if (choice & 64) options.json_keys = {"text", "title"};
  return fuzz::expect_user_errors_only([&] { data::preprocess(options, *tokenizer); });
}
