// SentencePiece tokenizers (Llama-style recipes) through Debian's libsentencepiece.
// The .model file carries its own vocabulary and normaliser; ids match the Python package's.
#pragma once

#include <memory>
#include <string>

#include "data/tokenizer.hpp"

namespace megatron::data {

// Throws UserError when the model file is missing or is not a SentencePiece model.
std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& model_file);

}  // namespace megatron::data
