#include "train/host_batch.hpp"

#include <string>

#include "core/error.hpp"
#include "tensor/host_io.hpp"

namespace megatron::train {

HostBatch assemble_batch(const data::SampleSource& source, int64_t first, int64_t count,
                         const BatchSpec& spec) {
  HostBatch out{.batch = count};
  for (int64_t i = first; i < first + count; ++i) {
    data::Sample s = source.sample(i % source.size());
    out.seq = static_cast<int64_t>(s.tokens.size());
    for (size_t t = 0; t < s.tokens.size(); ++t) {
      for (int32_t id : {s.tokens[t], s.labels[t]}) {
        if (id < 0 || id >= spec.vocab_size) {
          throw UserError("sample " + std::to_string(i) + " holds token id " + std::to_string(id) +
                          ", outside model.vocab_size " + std::to_string(spec.vocab_size) +
                          ": the dataset was made with another tokenizer, or vocab_size is wrong");
        }
      }
    }
    out.tokens.insert(out.tokens.end(), s.tokens.begin(), s.tokens.end());
    out.labels.insert(out.labels.end(), s.labels.begin(), s.labels.end());
    out.positions.insert(out.positions.end(), s.position_ids.begin(), s.position_ids.end());
    out.loss_mask.insert(out.loss_mask.end(), s.loss_mask.begin(), s.loss_mask.end());
    if (spec.token_types) {
      if (s.token_types.size() != s.tokens.size()) s.token_types.assign(s.tokens.size(), 0);
      out.types.insert(out.types.end(), s.token_types.begin(), s.token_types.end());
    }
    const int64_t valid = s.valid_length > 0 ? s.valid_length : int64_t(s.tokens.size());
    if (spec.padding_mask) out.key_lengths.push_back(valid);
    if (spec.sentence_order) out.sentence_order.push_back(s.sentence_order);
    if (spec.valid_lengths) out.valid_lengths.push_back(valid);
  }
  return out;
}

model::Batch upload_batch(tensor::Backend& backend, const HostBatch& host, const BatchSpec& spec) {
  model::Batch out{.batch = host.batch,
                   .seq = host.seq,
                   .key_lengths = host.key_lengths,
                   .sentence_order = host.sentence_order,
                   .valid_lengths = host.valid_lengths};
  const tensor::Shape shape{host.batch * host.seq};
  out.tokens = tensor::from_ints(backend, host.tokens, shape);
  out.labels = tensor::from_ints(backend, host.labels, shape);
  out.loss_mask = tensor::from_floats(backend, host.loss_mask, shape);
  out.positions = tensor::from_ints(backend, host.positions, shape);
  if (spec.token_types) out.token_types = tensor::from_ints(backend, host.types, shape);
  return out;
}

}  // namespace megatron::train
