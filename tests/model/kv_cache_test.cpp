// Generation's path through the model (LanguageModel::decode with a key/value cache) against the
// full forward pass over the same tokens: a prefill and then one token per step must give each
// position the logits the whole sequence gives it, for GPT (learned positions) and the Llama
// shape (rotary positions with an offset, GQA, SwiGLU, RMSNorm, untied head).
#include <gtest/gtest.h>

#include "model/language_model.hpp"
#include "model/tiny_gpt.hpp"
#include "tensor/cpu_backend.hpp"
#include "tensor/host_io.hpp"

namespace megatron::model {
namespace {

std::vector<int32_t> tokens_of(tensor::Backend& b, const Batch& batch) {
  std::vector<int32_t> out(size_t(batch.rows()));
  b.read(batch.tokens, out.data());
  return out;
}

// The whole forward's logits of every row over the unpadded vocabulary.
std::vector<float> full_logits(tensor::Backend& b, const LanguageModel& m, const Batch& batch) {
  HeadOutputs full{.want_logits = true};
  m.forward({.backend = b, .training = false}, batch, nullptr, &full);
  const std::vector<float> padded = tensor::to_floats(b, full.logits);
  const ModelConfig& c = m.config();
  std::vector<float> out;
  for (int64_t r = 0; r < batch.rows(); ++r) {
    out.insert(out.end(), padded.begin() + r * c.padded_vocab, padded.begin() + r * c.padded_vocab + c.vocab);
  }
  return out;
}

void expect_decode_matches_forward(const ModelConfig& c, int64_t prefill) {
  tensor::CpuBackend b(1);
  LanguageModel m(b, c);
  m.initialise(3);
  const Batch batch = test_support::tiny_batch(b, c, 2);
  const std::vector<int32_t> tokens = tokens_of(b, batch);
  const std::vector<float> want = full_logits(b, m, batch);
  const int64_t seq = batch.seq, vocab = c.vocab;

  KvCache cache = m.make_cache(b, batch.batch, seq);
  for (int64_t start = 0; start < seq;) {
    const int64_t n = start == 0 ? prefill : 1;
    std::vector<int32_t> step, rows;
    for (int64_t s = 0; s < batch.batch; ++s) {
      for (int64_t t = 0; t < n; ++t) {
        step.push_back(tokens[size_t(s * seq + start + t)]);
        rows.push_back(int32_t(s * n + t));
      }
    }
    const std::vector<float> got = m.decode(b, step, n, start, cache, rows, vocab);
    for (int64_t s = 0; s < batch.batch; ++s) {
      for (int64_t t = 0; t < n; ++t) {
        for (int64_t v = 0; v < vocab; ++v) {
          // f32 throughout; the two attention paths sum in different orders: ~1e-6 of logits ~1.
          ASSERT_NEAR(got[size_t((s * n + t) * vocab + v)], want[size_t((s * seq + start + t) * vocab + v)], 2e-5)
              << "sequence " << s << ", position " << start + t << ", token " << v;
        }
      }
    }
    start += n;
  }
}

TEST(KvCacheDecode, GptLogitsMatchTheFullForwardAtEveryPosition) {
  expect_decode_matches_forward(test_support::tiny_gpt_config(), 2);
}

TEST(KvCacheDecode, LlamaShapeWithRotaryOffsetsMatchesTheFullForward) {
  expect_decode_matches_forward(test_support::tiny_llama_config(), 1);
}

TEST(KvCacheDecode, APrefillOfTheWholeSequenceMatchesTheFullForward) {
  const ModelConfig c = test_support::tiny_llama_config();
  expect_decode_matches_forward(c, c.seq_length);
}

TEST(KvCacheDecode, RefusesAModelThatIsNotCausal) {
  tensor::CpuBackend b(1);
  const ModelConfig c = test_support::tiny_bert_config();
  LanguageModel m(b, c);
  EXPECT_THROW(m.make_cache(b, 1, 4), std::logic_error);
}

// A prompt's log-probabilities take the logits a chunk of rows at a time: the chunks come in
// order, each within its byte budget, and together they are decode's whole block.
TEST(KvCache, LogitsByChunkArriveInOrderWithinTheBudgetAndMakeTheWholeBlock) {
  const ModelConfig c = test_support::tiny_gpt_config();
  tensor::CpuBackend b(1);
  LanguageModel m(b, c);
  m.initialise(3);
  const Batch batch = test_support::tiny_batch(b, c, 2);
  const std::vector<int32_t> tokens = tokens_of(b, batch);
  std::vector<int32_t> rows(size_t(batch.rows()));
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = int32_t(i);
  KvCache whole_cache = m.make_cache(b, batch.batch, batch.seq);
  const std::vector<float> whole = m.decode(b, tokens, batch.seq, 0, whole_cache, rows, c.vocab);
  // A budget of three rows of the padded vocabulary (the widest block a chunk makes).
  const int64_t budget = 3 * 4 * c.padded_vocab;
  std::vector<float> joined;
  std::vector<int64_t> firsts;
  KvCache cache = m.make_cache(b, batch.batch, batch.seq);
  m.decode_by_chunk(b, tokens, batch.seq, 0, cache, rows, c.vocab,
                    [&](int64_t first, std::span<const float> chunk) {
                      EXPECT_EQ(first * c.vocab, int64_t(joined.size()));
                      EXPECT_LE(int64_t(chunk.size()), 3 * c.vocab);
                      firsts.push_back(first);
                      joined.insert(joined.end(), chunk.begin(), chunk.end());
                    },
                    budget);
  EXPECT_EQ(firsts.size(), size_t((batch.rows() + 2) / 3));
  ASSERT_EQ(joined.size(), whole.size());
  // The same f32 dot products; a GEMM of 3 rows may block them differently from one of all the
  // rows (OpenBLAS picks kernels by shape): the last bits of logits ~1, so 1e-6.
  for (size_t i = 0; i < whole.size(); ++i) ASSERT_NEAR(joined[i], whole[i], 1e-6) << "element " << i;
}

}  // namespace
}  // namespace megatron::model
