// `megatron convert` as a call: a checkpoint rewritten offline, tensor by tensor, for another
// tensor/pipeline layout or dtype, or exported to or imported from a Hugging Face directory.
#pragma once

#include <cstdint>
#include <string>

namespace megatron::train {

struct ConvertJob {
  std::string load;   // a checkpoint (iter_NNNNNNN or a save directory); with from "hf", a HF model
  std::string save;   // a save directory; with to "hf", the HF model directory to write
  std::string dtype;  // f32, bf16 or f16; empty: the source's
  std::string to, from;    // "hf" or empty
  int64_t tp = 0, pp = 0;  // 0: as the source
  bool quiet = false;      // no progress line
};

// Writes the converted checkpoint and prints what it wrote on standard output. Refuses (UserError)
// before writing anything when the target layout cannot hold the model or would overwrite a
// checkpoint, or (--from hf) when the model's tokenizer files do not load or have more tokens
// than its vocabulary; on a failure part-way (a Hugging Face weight that is NaN or infinite),
// removes the directories it created. Warns when --save's `latest` named a newer iteration than
// the one written, which it names now.
void convert(const ConvertJob& job);

}  // namespace megatron::train
