// The ids Megatron's BERT WordPiece tokenizer appends to a vocab.txt: [BOS], [EOS] and
// --vocab-extra-ids sentinels <extra_id_0>.. (T5's span markers), each only when absent.
#pragma once

#include <cstdint>
#include <vector>

#include "data/tokenizer.hpp"

namespace megatron::data {

struct WordPieceExtras {
  int32_t bos = 0;
  int32_t eos = 0;
  std::vector<int32_t> sentinels;  // <extra_id_i> at index i
  int64_t vocab_size = 0;          // the vocabulary with everything appended
};

// Megatron's _BertWordPieceTokenizer: add_token("[BOS]"), add_token("[EOS]"), then
// add_token("<extra_id_i>") for i < extra_ids; add_token gives a token the next id unless the
// vocabulary already holds it.
WordPieceExtras wordpiece_extras(const Tokenizer& tokenizer, int64_t extra_ids);

}  // namespace megatron::data
