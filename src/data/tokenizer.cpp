#include "data/tokenizer.hpp"

#include "core/error.hpp"
#include "data/gpt2_bpe.hpp"
#include "data/sentencepiece.hpp"
#include "data/wordpiece.hpp"
#include "recipe/enum_names.hpp"

namespace megatron::data {
namespace {

const std::string& require(const std::string& value, const char* flag, recipe::Tokenizer kind) {
  if (value.empty())
    throw UserError(std::string("the ") + std::string(recipe::name_of(kind)) +
                    " tokenizer needs " + flag);
  return value;
}

}  // namespace

std::unique_ptr<Tokenizer> make_tokenizer(recipe::Tokenizer kind, const TokenizerFiles& files) {
  switch (kind) {
    case recipe::Tokenizer::Gpt2Bpe:
      return load_gpt2_bpe(require(files.vocab_file, "a vocab file (vocab.json)", kind),
                           require(files.merge_file, "a merge file (merges.txt)", kind));
    case recipe::Tokenizer::BertWordPieceLowerCase:
      return load_wordpiece(require(files.vocab_file, "a vocab file (vocab.txt)", kind), true);
    case recipe::Tokenizer::BertWordPieceCased:
      return load_wordpiece(require(files.vocab_file, "a vocab file (vocab.txt)", kind), false);
    case recipe::Tokenizer::SentencePiece:
      return load_sentencepiece(require(files.tokenizer_model, "a tokenizer model (.model)", kind));
    case recipe::Tokenizer::Null:
      break;
  }
  throw UserError("the null tokenizer has no vocabulary to tokenize text with; choose "
                  "gpt2-bpe, bert-wordpiece-lowercase, bert-wordpiece-cased or sentencepiece");
}

}  // namespace megatron::data
