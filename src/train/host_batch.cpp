#include "train/host_batch.hpp"

#include <stdexcept>
#include <string>

#include "core/error.hpp"
#include "tensor/host_io.hpp"

namespace megatron::train {

HostBatch assemble_batch(const data::SampleSource& source, int64_t first, int64_t count,
                         const BatchSpec& spec) {
  HostBatch out{.batch = count};
  // Each sample's document starts, as first keys per row; made for the whole batch only when
  // some sample packs several documents.
  std::vector<std::vector<int32_t>> starts;
  bool documents = false;
  for (int64_t i = first; i < first + count; ++i) {
    data::Sample s = source.sample(i % source.size());
    documents = documents || s.document_starts.size() > 1;
    starts.push_back(std::move(s.document_starts));
    out.seq = static_cast<int64_t>(s.tokens.size());
    out.decoder_seq = static_cast<int64_t>(s.decoder_tokens.size());
    if (spec.decoder != !s.decoder_tokens.empty() ||
        s.labels.size() != (spec.decoder ? s.decoder_tokens.size() : s.tokens.size())) {
      throw std::logic_error("assemble_batch: sample " + std::to_string(i) +
                             " does not have the model family's layout");
    }
    for (const auto* ids : {&s.tokens, &s.labels, &s.decoder_tokens}) {
      for (const int32_t id : *ids) {
        if (id < 0 || id >= spec.vocab_size) {
          throw UserError("sample " + std::to_string(i) + " holds token id " + std::to_string(id) +
                          ", outside model.vocab_size " + std::to_string(spec.vocab_size) +
                          ": the dataset was made with another tokenizer, or vocab_size is wrong");
        }
      }
    }
    out.decoder_tokens.insert(out.decoder_tokens.end(), s.decoder_tokens.begin(), s.decoder_tokens.end());
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
  if (documents) {
    out.first_keys.reserve(size_t(count * out.seq));
    for (const std::vector<int32_t>& doc : starts) {
      int64_t current = 0;
      size_t next = 0;
      for (int64_t t = 0; t < out.seq; ++t) {
        while (next < doc.size() && doc[next] <= t) current = doc[next++];
        out.first_keys.push_back(current);
      }
    }
  }
  return out;
}

model::Batch upload_batch(tensor::Backend& backend, const HostBatch& host, const BatchSpec& spec) {
  model::Batch out{.batch = host.batch,
                   .seq = host.seq,
                   .key_lengths = host.key_lengths,
                   .first_keys = host.first_keys,
                   .sentence_order = host.sentence_order,
                   .valid_lengths = host.valid_lengths};
  const tensor::Shape shape{host.batch * host.seq};
  // T5's targets are the decoder's; its positions are 0.. in both stacks.
  const tensor::Shape targets{spec.decoder ? host.batch * host.decoder_seq : host.batch * host.seq};
  out.tokens = tensor::from_ints(backend, host.tokens, shape);
  out.labels = tensor::from_ints(backend, host.labels, targets);
  out.loss_mask = tensor::from_floats(backend, host.loss_mask, targets);
  out.positions = tensor::from_ints(backend, host.positions, shape);
  if (spec.decoder) {
    out.decoder_seq = host.decoder_seq;
    out.decoder_tokens = tensor::from_ints(backend, host.decoder_tokens, targets);
    std::vector<int32_t> positions(size_t(host.batch * host.decoder_seq));
    for (size_t r = 0; r < positions.size(); ++r) positions[r] = int32_t(int64_t(r) % host.decoder_seq);
    out.decoder_positions = tensor::from_ints(backend, positions, targets);
  }
  if (spec.token_types) out.token_types = tensor::from_ints(backend, host.types, shape);
  return out;
}

}  // namespace megatron::train
