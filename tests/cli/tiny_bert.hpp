// The tiny BERT that the BERT run tests train: a sentence-split dataset made once per test
// binary by `megatron preprocess` from the first chapters of the bundled corpus with the bundled
// WordPiece vocabulary, and the recipe arguments that train on it.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <string>

#include "cli/run_command.hpp"
#include "support/temp_dir.hpp"

namespace megatron::cli {

inline const std::string kBertVocab =
    std::string(MEGATRON_SOURCE_DIR) + "/data/tokenizers/bert-base-uncased/vocab.txt";

// The dataset prefix (made on first use; empty, with a test failure, when preprocess fails).
inline const std::string& bert_dataset() {
  static test_support::TempDir dir;
  static const std::string prefix = [] {
    std::ifstream corpus(std::string(MEGATRON_SOURCE_DIR) + "/data/corpora/austen.jsonl");
    std::ofstream slice(dir.path() / "austen.jsonl");
    std::string line;
    for (int i = 0; i < 12 && std::getline(corpus, line); ++i) slice << line << "\n";
    slice.close();
    const CommandResult r = run_megatron(
        "preprocess --quiet --input " + (dir.path() / "austen.jsonl").string() +
        " --output-prefix " + (dir.path() / "austen").string() +
        " --tokenizer bert-wordpiece-lowercase --vocab-file " + kBertVocab +
        " --split-sentences --workers 1");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? (dir.path() / "austen_text_sentence").string() : std::string();
  }();
  return prefix;
}

// bert-tiny shrunk to 8 layers of width 32 (pp4 x 2 virtual stages gets one each); the
// vocabulary padded to a multiple of 256 x tensor gives 30,720 rows at tensor 1 and 2 alike,
// so every layout has the same model.
inline std::string bert_model() {
  return "recipes/bert-tiny.yaml model.num_layers=8 model.hidden_size=32 "
         "model.num_attention_heads=4 model.make_vocab_size_divisible_by=256 "
         "data.seq_length=32 data.prefixes=[" + bert_dataset() + "] data.vocab_file=" +
         kBertVocab + " training.micro_batch_size=2 training.global_batch_size=8 "
         "training.lr_warmup_fraction=0.1 training.train_iters=10 logging.interval=1 "
         "eval.interval=5 eval.iters=1 parallel.timeout_minutes=2 parallel.ddp_bucket_size=5000 ";
}

}  // namespace megatron::cli
