// The one weight loader: every parameter's shard from a checkpoint of any layout, a vocabulary
// padded further repeating its last row (Megatron's rule), and any other shape refused.
#include "ckpt/model_weights.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "ckpt/hf_fixtures.hpp"
#include "ckpt/rewrite.hpp"
#include "model/tiny_gpt.hpp"
#include "core/error.hpp"
#include "support/temp_dir.hpp"
#include "tensor/host_io.hpp"

namespace megatron::ckpt {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using test_support::MemorySource;

// A GPT-2-shaped model of 50 tokens whose vocabulary is padded to `padded` rows.
model::ModelConfig gpt(int64_t padded) {
  model::ModelConfig c = test_support::hf_tiny_gpt2();
  c.padded_vocab = padded;
  return c;
}

std::vector<float> floats_of(const MemorySource& source, const std::string& name) {
  const std::vector<std::byte>& bytes = source.bytes(name);
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

class ModelWeights : public ::testing::Test {
 protected:
  // Writes `source` (a model of `c`) as a checkpoint split over `tensor` ranks.
  CheckpointReader save(const MemorySource& source, const model::ModelConfig& c, int64_t tensor = 1) {
    return CheckpointReader(rewrite_checkpoint(
        source, test_support::hf_meta(c, tensor::DType::F32), {.tensor = tensor}, dir_.path() / "save"));
  }
  std::vector<float> value(const model::LanguageModel& m, const std::string& name) {
    for (const auto& p : m.parameters().all())
      if (p->name == name) return tensor::to_floats(backend_, p->value);
    ADD_FAILURE() << "no parameter " << name;
    return {};
  }

  tensor::CpuBackend backend_{1};
  test_support::TempDir dir_;
};

TEST_F(ModelWeights, EveryWeightOfACheckpointSplitOverTwoRanksLoadsWhole) {
  const model::ModelConfig c = gpt(128);
  const MemorySource source(c, tensor::DType::F32);
  const CheckpointReader checkpoint = save(source, c, 2);
  model::LanguageModel m(backend_, c);
  EXPECT_THAT(load_model_weights(checkpoint, m, backend_), ::testing::IsEmpty());
  for (const auto& p : m.parameters().all())
    EXPECT_EQ(tensor::to_floats(backend_, p->value), floats_of(source, p->name)) << p->name;
}

TEST_F(ModelWeights, AVocabularyPaddedFurtherRepeatsTheCheckpointsLastRow) {
  const MemorySource source(gpt(64), tensor::DType::F32);
  const CheckpointReader checkpoint = save(source, gpt(64));
  model::LanguageModel m(backend_, gpt(128));
  load_model_weights(checkpoint, m, backend_);
  const std::vector<float> saved = floats_of(source, "embedding.word_embeddings.weight");
  const std::vector<float> loaded = value(m, "embedding.word_embeddings.weight");
  const size_t h = size_t(gpt(64).hidden);
  ASSERT_EQ(loaded.size(), 128 * h);
  EXPECT_EQ(std::vector<float>(loaded.begin(), loaded.begin() + 64 * h), saved);
  const std::vector<float> last(saved.end() - std::ptrdiff_t(h), saved.end());
  for (size_t row = 64; row < 128; ++row)
    EXPECT_EQ(std::vector<float>(loaded.begin() + std::ptrdiff_t(row * h),
                                 loaded.begin() + std::ptrdiff_t((row + 1) * h)),
              last)
        << "row " << row;
}

TEST_F(ModelWeights, BertsVocabularyParallelOutputBiasIsAPaddedVocabularyToo) {
  // Resuming such a checkpoint under another tensor-parallel size once failed on this bias.
  const MemorySource source(test_support::as_bert(gpt(64)), tensor::DType::F32);
  const CheckpointReader checkpoint = save(source, test_support::as_bert(gpt(64)));
  model::LanguageModel m(backend_, test_support::as_bert(gpt(128)));
  load_model_weights(checkpoint, m, backend_);
  const std::vector<float> saved = floats_of(source, "output_layer.bias");
  const std::vector<float> loaded = value(m, "output_layer.bias");
  ASSERT_EQ(loaded.size(), 128u);
  EXPECT_EQ(std::vector<float>(loaded.begin(), loaded.begin() + 64), saved);
  EXPECT_EQ(loaded[127], saved[63]);
}

TEST_F(ModelWeights, AVocabularyWithFewerRowsThanTheModelsTokensIsRefused) {
  // 64 rows cannot hold a vocabulary of 100 tokens: repeating row 63 would be silently wrong.
  const MemorySource source(gpt(64), tensor::DType::F32);
  const CheckpointReader checkpoint = save(source, gpt(64));
  model::ModelConfig larger = gpt(128);
  larger.vocab = 100;
  model::LanguageModel m(backend_, larger);
  try {
    load_model_weights(checkpoint, m, backend_);
    FAIL() << "a checkpoint of 64 vocabulary rows loaded into a model of 100 tokens";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("weight embedding.word_embeddings.weight holds 64 vocabulary "
                                    "rows in the checkpoint but the model's vocabulary has 100 "
                                    "tokens"));
  }
}

TEST_F(ModelWeights, AWeightOfAnotherShapeIsRefusedNamingBothShapes) {
  const MemorySource source(gpt(128), tensor::DType::F32);
  const CheckpointReader checkpoint = save(source, gpt(128));
  model::ModelConfig wider = gpt(128);
  wider.ffn = 32;
  model::LanguageModel m(backend_, wider);
  try {
    load_model_weights(checkpoint, m, backend_);
    FAIL() << "a model of another ffn width loaded";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("fc1.weight is [24, 16] in the checkpoint but [32, 16] in the model"));
  }
}

TEST_F(ModelWeights, AWeightTheCheckpointLacksIsRefusedUnlessItMayBeLacking) {
  const MemorySource source(gpt(128), tensor::DType::F32);  // tied: no output layer
  const CheckpointReader checkpoint = save(source, gpt(128));
  model::ModelConfig untied = gpt(128);
  untied.tie_embeddings = false;
  model::LanguageModel m(backend_, untied);
  EXPECT_THROW(
      {
        try {
          load_model_weights(checkpoint, m, backend_);
        } catch (const UserError& e) {
          EXPECT_THAT(e.what(), HasSubstr("the checkpoint has no weight output_layer.weight"));
          throw;
        }
      },
      UserError);
  EXPECT_THAT(load_model_weights(checkpoint, m, backend_,
                                 [](const std::string& name) { return name == "output_layer.weight"; }),
              ElementsAre("output_layer.weight"));
}

// A model overridden to a width no memory holds (10^6 x 10^6 weights) is refused from its
// description, as a small mismatch is, before any tensor of it exists.
TEST_F(ModelWeights, AHugeModelIsRefusedFromItsShapesBeforeAnythingIsAllocated) {
  const MemorySource source(gpt(128), tensor::DType::F32);
  const CheckpointReader checkpoint = save(source, gpt(128));
  model::ModelConfig huge = gpt(128);
  huge.hidden = 1'000'000;
  huge.ffn = 4'000'000;
  try {
    check_model_shapes(checkpoint, model::LanguageModel::describe(huge), huge.vocab);
    FAIL() << "a model of hidden size 10^6 matched a checkpoint of 16";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("weight embedding.word_embeddings.weight is [128, 16] in the "
                                    "checkpoint but [128, 1000000] in the model"));
  }
}

TEST_F(ModelWeights, TheShapeCheckNamesWhatLoadingWouldRefuse) {
  const MemorySource source(gpt(128), tensor::DType::F32);
  const CheckpointReader checkpoint = save(source, gpt(128));
  model::ModelConfig more_tokens = gpt(128);
  more_tokens.vocab = 1'000'000;
  more_tokens.padded_vocab = 1'000'064;
  model::ModelConfig untied = gpt(128);
  untied.tie_embeddings = false;
  EXPECT_NO_THROW(check_model_shapes(checkpoint, model::LanguageModel::describe(gpt(128)), 50));
  EXPECT_THROW(check_model_shapes(checkpoint, model::LanguageModel::describe(more_tokens),
                                  more_tokens.vocab),
               UserError);
  EXPECT_THROW(check_model_shapes(checkpoint, model::LanguageModel::describe(untied), 50), UserError);
}

TEST(DescribedModel, ListsTheBuiltModelsParametersWithoutTheirTensors) {
  tensor::CpuBackend backend(1);
  const model::ModelConfig c = test_support::hf_tiny_llama();
  const model::LanguageModel built(backend, c);
  const std::vector<model::Parameter> described = model::LanguageModel::describe(c);
  ASSERT_EQ(described.size(), built.parameters().all().size());
  for (size_t i = 0; i < described.size(); ++i) {
    const model::Parameter& p = *built.parameters().all()[i];
    EXPECT_EQ(described[i].name, p.name);
    EXPECT_EQ(described[i].global_shape, p.global_shape) << p.name;
    EXPECT_EQ(described[i].split, p.split) << p.name;
    EXPECT_EQ(described[i].padded_vocab, p.padded_vocab) << p.name;
    EXPECT_FALSE(described[i].value.defined()) << p.name;
  }
}

}  // namespace
}  // namespace megatron::ckpt
