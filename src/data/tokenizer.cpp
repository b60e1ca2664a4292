#include "data/tokenizer.hpp"

#include "core/error.hpp"
#include "data/gpt2_bpe.hpp"
#include "data/hf_tokenizer.hpp"
#include "data/sentencepiece.hpp"
#include "data/wordpiece.hpp"

namespace megatron::data {
namespace {

// Named as recipes spell them (data.tokenizer, --tokenizer).
const char* name_of(TokenizerKind kind) {
  switch (kind) {
    case TokenizerKind::Gpt2Bpe: return "gpt2-bpe";
    case TokenizerKind::BertWordPieceLowerCase: return "bert-wordpiece-lowercase";
    case TokenizerKind::BertWordPieceCased: return "bert-wordpiece-cased";
    case TokenizerKind::SentencePiece: return "sentencepiece";
    case TokenizerKind::HuggingFace: return "huggingface";
    case TokenizerKind::Null: return "null";
  }
  return "?";
}

const std::string& require(const std::string& value, const char* flag, TokenizerKind kind) {
  if (value.empty()) throw UserError(std::string("the ") + name_of(kind) + " tokenizer needs " + flag);
  return value;
}

}  // namespace

std::unique_ptr<Tokenizer> make_tokenizer(TokenizerKind kind, const TokenizerFiles& files) {
  switch (kind) {
    case TokenizerKind::Gpt2Bpe:
      return load_gpt2_bpe(require(files.vocab_file, "a vocab file (vocab.json)", kind),
                           require(files.merge_file, "a merge file (merges.txt)", kind));
    case TokenizerKind::BertWordPieceLowerCase:
      return load_wordpiece(require(files.vocab_file, "a vocab file (vocab.txt)", kind), true);
    case TokenizerKind::BertWordPieceCased:
      return load_wordpiece(require(files.vocab_file, "a vocab file (vocab.txt)", kind), false);
    case TokenizerKind::SentencePiece:
      return load_sentencepiece(require(files.tokenizer_model, "a tokenizer model (.model)", kind));
    case TokenizerKind::HuggingFace:
      return load_hf_tokenizer(require(files.tokenizer_model, "a tokenizer model (tokenizer.json or its directory)", kind));
    case TokenizerKind::Null:
      break;
  }
  throw UserError("the null tokenizer has no vocabulary to tokenize text with; choose "
                  "gpt2-bpe, bert-wordpiece-lowercase, bert-wordpiece-cased, sentencepiece or huggingface");
}

}  // namespace megatron::data
