// A micro-batch in host memory: its samples read, checked against the vocabulary and laid out
// as the model's inputs, before they go to the device. Apart so that it can be built off the
// training thread (batch_prefetch.hpp).
#pragma once

#include <cstdint>
#include <vector>

#include "data/sample.hpp"
#include "model/batch.hpp"
#include "tensor/backend.hpp"
#include "train/train_data.hpp"

namespace megatron::train {

struct HostBatch {
  int64_t batch = 0, seq = 0;
  int64_t decoder_seq = 0;  // T5
  std::vector<int32_t> tokens, labels, positions, types;
  std::vector<int32_t> decoder_tokens;  // T5
  std::vector<float> loss_mask;
  std::vector<int64_t> key_lengths, valid_lengths;
  std::vector<int64_t> first_keys;  // empty unless a sample has packed documents
  std::vector<int32_t> sentence_order;
};

// Samples first .. first + count - 1 of `source` (modulo its size). Throws UserError for a token
// id outside spec.vocab_size. Only reads `source`, so several threads may call it at once.
HostBatch assemble_batch(const data::SampleSource& source, int64_t first, int64_t count,
                         const BatchSpec& spec);

// Copies the host batch to `backend`'s memory.
model::Batch upload_batch(tensor::Backend& backend, const HostBatch& host, const BatchSpec& spec);

}  // namespace megatron::train
