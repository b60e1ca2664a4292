// Test data shared by the masked datasets' tests (BERT, T5): a tiny WordPiece-like vocabulary,
// sentence-split indexed datasets written from a seed, and the Python the references run on.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "data/indexed_dataset.hpp"
#include "support/temp_dir.hpp"

namespace megatron::data {

inline constexpr const char* kPython = "/usr/bin/python3";

// [PAD] [UNK] [CLS] [SEP] [MASK], then words w5..w24 and continuations ##p25..##p39.
inline std::vector<std::string> tiny_vocab() {
  std::vector<std::string> v{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  for (int i = 5; i < 25; ++i) v.push_back("w" + std::to_string(i));
  for (int i = 25; i < 40; ++i) v.push_back("##p" + std::to_string(i));
  return v;
}

// Documents of sentences: one sentence documents, ordinary ones, and one with a sentence too
// long for Megatron (skipped whole).
inline std::string write_sentences(const test_support::TempDir& dir, uint32_t seed, int documents,
                            bool one_sentence_each = false) {
  const std::string prefix = (dir.path() / ("sentences" + std::to_string(seed))).string();
  IndexedDatasetWriter writer(prefix, TokenType::U16);
  std::mt19937 rng(seed);
  for (int d = 0; d < documents; ++d) {
    const int sentences = one_sentence_each ? 1 : (d % 7 == 3 ? 1 : 2 + int(rng() % 6));
    for (int s = 0; s < sentences; ++s) {
      const int length = d == 5 && s == 0 ? 600 : 1 + int(rng() % 14);
      std::vector<int32_t> tokens;
      for (int t = 0; t < length; ++t) {
        // A word, then sometimes continuation pieces.
        tokens.push_back(t == 0 || rng() % 3 ? int32_t(5 + rng() % 20) : int32_t(25 + rng() % 15));
      }
      writer.add_sequence(tokens);
    }
    writer.end_document();
  }
  writer.finish();
  return prefix;
}

inline bool python_with_numpy() {
  return std::system((std::string(kPython) + " -c 'import numpy' >/dev/null 2>&1").c_str()) == 0;
}

}  // namespace megatron::data
