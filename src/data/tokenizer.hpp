// The Tokenizer interface every tokenizer implements (GPT-2 BPE, BERT WordPiece,
// SentencePiece), with its special tokens named explicitly, and the factory that builds one.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer_kind.hpp"

namespace megatron::data {

// Special tokens by role; a role the vocabulary does not have is nullopt.
struct SpecialTokens {
  std::optional<int32_t> eod;   // end of document: GPT-2's <|endoftext|>
  std::optional<int32_t> cls;   // BERT [CLS]
  std::optional<int32_t> sep;   // BERT [SEP]
  std::optional<int32_t> mask;  // BERT [MASK]
  std::optional<int32_t> pad;   // BERT [PAD]
  std::optional<int32_t> unk;   // BERT [UNK]
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Text to ids, without adding special tokens. Thread-safe (const, no shared caches
  // without locking), so preprocessing workers can share one tokenizer.
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // Ids to text. For byte-level BPE, decode(encode(x)) == x for any UTF-8 text.
  virtual std::string decode(std::span<const int32_t> ids) const = 0;
  // The token's text as the vocabulary spells it (e.g. "Ġthe", "##ing"); for --show-tokens.
  virtual std::string token_text(int32_t id) const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual const SpecialTokens& special_tokens() const = 0;
  // What the tokenizer's own library puts before a text it encodes for a model (tokenizer.json's
  // post-processor: Llama's <s>, Llama 3's <|begin_of_text|>): prompts start with it, as
  // transformers' tokenizer(prompt) and Megatron's HuggingFaceTokenizer start them.
  virtual std::vector<int32_t> prompt_start() const { return {}; }
};

struct TokenizerFiles {
  std::string vocab_file;       // vocab.json (GPT-2) or vocab.txt (BERT)
  std::string merge_file;       // merges.txt (GPT-2)
  std::string tokenizer_model;  // SentencePiece .model, or tokenizer.json (or its directory)
};

// Throws UserError naming the missing or malformed file.
std::unique_ptr<Tokenizer> make_tokenizer(TokenizerKind kind, const TokenizerFiles& files);

}  // namespace megatron::data
