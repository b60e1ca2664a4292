// BERT's WordPiece tokenizer (bert-base-uncased / -cased vocab.txt), reproducing Hugging Face's
// BertWordPieceTokenizer id for id: BERT normalisation, pre-tokenisation, greedy WordPiece.
#pragma once

#include <memory>
#include <string>

#include "data/tokenizer.hpp"

namespace megatron::data {

// Loads vocab.txt: one token per line, id = line index (trailing whitespace, including a CR,
// is not part of the token). lower_case selects the uncased pipeline (strip accents, then
// lowercase); false keeps case and accents, as bert-base-cased needs. Special tokens [CLS],
// [SEP], [MASK], [PAD] and [UNK] are found by name; [UNK] is required.
//
// The tokenizer's encode() splits each word greedily into the longest vocabulary piece, then
// the longest "##" continuation, and so on; a word that cannot be split to the end, or that is
// longer than 100 code points, becomes a single [UNK]. It adds no [CLS]/[SEP].
// decode() is Hugging Face's WordPiece decoder with cleanup off: a "##" piece is glued to the
// text before it (its "##" dropped, except on the very first token), any other token follows
// a space; special tokens are written out like any other. An id outside the vocabulary
// throws UserError.
//
// Throws UserError naming vocab_txt when it cannot be read, is empty, has an empty line or a
// duplicate token (with both line numbers), or has no [UNK].
std::unique_ptr<Tokenizer> load_wordpiece(const std::string& vocab_txt, bool lower_case);

}  // namespace megatron::data
