// Fuzz target: the fine-tuning files and what generation tasks score, all text a user hands in.
// The first byte picks the path (bits 0-2) and the sequence length (bits 3-7); the rest is a
// jsonl file read, tokenised and laid out into samples (prompt/response pairs; chat messages
// with the chatml or plain template; source/target pairs for T5) with and without packing, or,
// for the metrics, lines taken as alternating predictions and references and scored with exact
// match, token F1, corpus BLEU and chrF.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/seq2seq_data.hpp"
#include "data/sft_data.hpp"
#include "data/tokenizer.hpp"
#include "eval/text_metrics.hpp"
#include "fuzz_support.hpp"

namespace {

using namespace megatron;

const data::Tokenizer& gpt2() {
  static const std::unique_ptr<data::Tokenizer> t = data::make_tokenizer(
      data::TokenizerKind::Gpt2Bpe,
      {.vocab_file = std::string(MEGATRON_SOURCE_DIR) + "/data/tokenizers/gpt2/vocab.json",
       .merge_file = std::string(MEGATRON_SOURCE_DIR) + "/data/tokenizers/gpt2/merges.txt"});
  return *t;
}

const data::Tokenizer& wordpiece() {
  static const std::unique_ptr<data::Tokenizer> t = data::make_tokenizer(
      data::TokenizerKind::BertWordPieceLowerCase,
      {.vocab_file = std::string(MEGATRON_SOURCE_DIR) + "/data/tokenizers/bert-base-uncased/vocab.txt"});
  return *t;
}

// Every sample of a few epochs of the examples, packed or not.
void lay_out(const std::vector<data::SftExample>& examples, int64_t seq_length) {
  std::vector<data::TokenizedExample> tokenized;
  for (const auto& e : examples) tokenized.push_back(data::tokenize_example(e, gpt2(), 50256));
  for (const bool pack : {false, true}) {
    const data::SftSource source(tokenized, seq_length, pack, 7, 3 * int64_t(tokenized.size()), true, 50256);
    for (int64_t i = 0; i < source.size(); ++i) (void)source.sample(i);
  }
}

void score(std::string_view text) {
  std::vector<std::string> lines;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t end = std::min(text.find('\n', begin), text.size());
    lines.emplace_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  std::vector<std::string> predictions;
  std::vector<std::vector<std::string>> references(1);
  for (size_t i = 0; i + 1 < lines.size(); i += 2) {
    predictions.push_back(lines[i]);
    references[0].push_back(lines[i + 1]);
    (void)eval::exact_match(lines[i], {lines[i + 1]});
    (void)eval::token_f1(lines[i], {lines[i + 1]});
  }
  if (predictions.empty()) return;
  (void)eval::corpus_bleu(predictions, references);
  (void)eval::corpus_chrf(predictions, references);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const uint8_t choice = data[0];
  const int64_t seq_length = 1 + (choice >> 3);  // 1..32
  const std::string_view text = fuzz::as_text(data + 1, size - 1);
  if ((choice & 7) == 4) {
    score(text);
    return 0;
  }
  const std::string path = fuzz::write_file("examples.jsonl", text).string();
  return fuzz::expect_user_errors_only([&] {
    switch (choice & 7) {
      case 0:
        lay_out(data::read_prompt_response_jsonl(path), seq_length);
        break;
      case 1:
      case 2:
        lay_out(data::read_chat_jsonl(path, {}, (choice & 7) == 1 ? data::ChatTemplate::ChatMl
                                                                   : data::ChatTemplate::Plain),
                seq_length);
        break;
      default: {
        const auto pairs = data::read_seq2seq_jsonl(path);
        const data::Seq2SeqSource source(pairs, wordpiece(), {.bos = 30522, .eos = 30523, .pad = 0}, seq_length,
                                         1 + seq_length / 2, 7, 2 * int64_t(pairs.size()), true);
        for (int64_t i = 0; i < source.size(); ++i) (void)source.sample(i);
      }
    }
  });
}
