// The check that every token id of an indexed dataset lies inside a model's vocabulary, run
// over the whole dataset before training starts: one vectorised pass over the .bin per dtype.
#pragma once

#include <cstdint>

#include "data/indexed_dataset.hpp"

namespace megatron::data {

// Throws UserError naming the dataset, the first sequence holding an id outside
// [0, vocab_size), that id and the vocabulary size. Reads every token once (memory or disk
// bandwidth bound), except where the token type cannot hold an id outside the vocabulary
// (uint16 with vocab_size >= 65536, uint8 with vocab_size >= 256): then it reads nothing.
void check_token_ids(const IndexedDataset& dataset, int64_t vocab_size);

}  // namespace megatron::data
