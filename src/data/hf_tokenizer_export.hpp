// tokenizer.json (Hugging Face tokenizers' format) for the vocabularies megatron trains with, as
// transformers 5 writes it when it converts them, so that an exported model loads in every tool
// that reads tokenizer.json alone, with no conversion step.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace megatron::data {

// GPT-2's byte-level BPE from its vocab.json and merges.txt (ByteLevel pre-tokenizer and
// decoder, <|endoftext|> as a special added token). UserError when the files do not load as
// `--tokenizer gpt2-bpe` loads them.
nlohmann::ordered_json gpt2_tokenizer_json(const std::string& vocab_json, const std::string& merges_txt);

// BERT's WordPiece from its vocab.txt (BertNormalizer, lowercasing and accent stripping as
// `lower_case` says; [CLS] A [SEP] B [SEP]). UserError when the file does not load.
nlohmann::ordered_json wordpiece_tokenizer_json(const std::string& vocab_txt, bool lower_case);

}  // namespace megatron::data
