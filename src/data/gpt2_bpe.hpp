// GPT-2's byte-level BPE tokenizer (vocab.json + merges.txt), id for id what OpenAI's
// encoder.py, tiktoken and Hugging Face produce, fast enough to preprocess corpora with.
#pragma once

#include <memory>
#include <string>

#include "data/tokenizer.hpp"

namespace megatron::data {

// Loads a byte-level BPE vocabulary: `vocab_json` maps each token (bytes spelt with GPT-2's
// byte-to-unicode table, e.g. "Ġthe") to an id, ids 0..V-1 once each; `merges_txt` lists one
// merge per line ("Ġ t"), best first, after an optional "#version" line. The tokenizer never
// treats special-token text such as "<|endoftext|>" specially in encode(); its id is
// special_tokens().eod when the vocabulary has it. decode(encode(x)) == x for any bytes x.
// Throws UserError naming the file and the problem (missing, malformed JSON, a bad merge).
std::unique_ptr<Tokenizer> load_gpt2_bpe(const std::string& vocab_json,
                                         const std::string& merges_txt);

}  // namespace megatron::data
