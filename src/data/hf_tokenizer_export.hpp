// tokenizer.json (Hugging Face tokenizers' format) for the vocabularies megatron trains with, as
// transformers 5 writes it when it converts them, so that an exported model loads in every tool
// that reads tokenizer.json alone, with no conversion step.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "data/tokenizer.hpp"

namespace megatron::data {

// GPT-2's byte-level BPE (ByteLevel pre-tokenizer and decoder, <|endoftext|> as a special added
// token): `loaded` is load_gpt2_bpe's tokenizer of vocab.json and `merges_txt`, which it has
// checked, and gives the vocabulary; the merges are read from the file in rank order.
nlohmann::ordered_json gpt2_tokenizer_json(const Tokenizer& loaded, const std::string& merges_txt);

// BERT's WordPiece (BertNormalizer, lowercasing and accent stripping as `lower_case` says;
// [CLS] A [SEP] B [SEP]): `loaded` is load_wordpiece's tokenizer of its vocab.txt.
nlohmann::ordered_json wordpiece_tokenizer_json(const Tokenizer& loaded, bool lower_case);

}  // namespace megatron::data
