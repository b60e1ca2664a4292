// The tokenizers data/ can build (Megatron-LM's --tokenizer-type values): owned here, where
// make_tokenizer builds them; recipes name them (recipe/enum_names.cpp).
#pragma once

namespace megatron::data {

enum class TokenizerKind {
  Gpt2Bpe,
  BertWordPieceLowerCase,
  BertWordPieceCased,
  SentencePiece,
  HuggingFace,  // tokenizer.json (Hugging Face `tokenizers`)
  Null
};

}  // namespace megatron::data
