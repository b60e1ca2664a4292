// The whole GPT against an independent PyTorch implementation (tests/model/reference_gpt.py):
// the engine writes its weights, inputs, loss and gradients; the script rebuilds the model in
// float64, differentiates it with autograd and compares.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/language_model.hpp"
#include "model/tiny_gpt.hpp"
#include "support/temp_dir.hpp"
#include "tensor/cpu_backend.hpp"

namespace megatron::model {
namespace torch_reference_test {

constexpr const char* kPython = "/usr/bin/python3";

bool torch_available() {
  return std::system((std::string(kPython) + " -c 'import torch' >/dev/null 2>&1").c_str()) == 0;
}

template <typename T>
void write_raw(const std::filesystem::path& path, const std::vector<T>& values) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(values.data()), std::streamsize(values.size() * sizeof(T)));
}

std::string name_of(model::NormKind n) { return n == model::NormKind::LayerNorm ? "layernorm" : "rmsnorm"; }
std::string name_of(model::Activation a) {
  switch (a) {
    case model::Activation::Gelu: return "gelu";
    case model::Activation::GeluTanh: return "gelu_tanh";
    case model::Activation::Swiglu: return "swiglu";
    case model::Activation::Geglu: return "geglu";
  }
  return "?";
}

// Every parameter's value and gradient as raw f32 files; their manifest entries.
nlohmann::json write_parameters(tensor::Backend& b, const LanguageModel& m,
                                const std::filesystem::path& dir) {
  nlohmann::json params = nlohmann::json::array();
  int index = 0;
  for (const auto& p : m.parameters().all()) {
    const std::string stem = "p" + std::to_string(index++);
    write_raw(dir / (stem + ".value.f32"), tensor::to_floats(b, p->value));
    write_raw(dir / (stem + ".grad.f32"), tensor::to_floats(b, p->grad));
    params.push_back({{"name", p->name},
                      {"shape", p->value.shape()},
                      {"value", stem + ".value.f32"},
                      {"grad", stem + ".grad.f32"}});
  }
  return params;
}

// Runs one forward and backward and writes everything the reference needs to `dir`.
void dump(const ModelConfig& c, int64_t batch_size, const std::filesystem::path& dir) {
  tensor::CpuBackend b(2);
  LanguageModel m(b, c);
  m.initialise(1234);
  const Batch batch = test_support::tiny_batch(b, c, batch_size, 99);
  const Pass pass{.backend = b, .training = true, .seed = 1, .iteration = 1};
  Activations saved;
  const Losses sum = m.forward(pass, batch, &saved);
  m.backward(pass, batch, saved,
             {.token = float(1.0 / sum.tokens),
              .sentence = float(1.0 / std::max(sum.sentences, 1.0))});

  const nlohmann::json params = write_parameters(b, m, dir);
  write_raw(dir / "tokens.i32", tensor::to_ints(b, batch.tokens));
  write_raw(dir / "labels.i32", tensor::to_ints(b, batch.labels));
  write_raw(dir / "positions.i32", tensor::to_ints(b, batch.positions));
  write_raw(dir / "loss_mask.f32", tensor::to_floats(b, batch.loss_mask));
  nlohmann::json inputs{{"tokens", "tokens.i32"}, {"labels", "labels.i32"},
                        {"positions", "positions.i32"}, {"loss_mask", "loss_mask.f32"}};
  if (batch.token_types.defined()) {
    write_raw(dir / "token_types.i32", tensor::to_ints(b, batch.token_types));
    inputs["token_types"] = "token_types.i32";
  }
  if (!batch.key_lengths.empty()) {
    write_raw(dir / "key_lengths.i32",
              std::vector<int32_t>(batch.key_lengths.begin(), batch.key_lengths.end()));
    inputs["key_lengths"] = "key_lengths.i32";
  }
  if (!batch.sentence_order.empty()) {
    write_raw(dir / "sentence_order.i32", batch.sentence_order);
    inputs["sentence_order"] = "sentence_order.i32";
  }
  const nlohmann::json manifest{
      {"config",
       {{"num_layers", c.num_layers}, {"hidden", c.hidden}, {"heads", c.heads},
        {"groups", c.groups}, {"head_dim", c.head_dim}, {"ffn", c.ffn}, {"vocab", c.vocab},
        {"padded_vocab", c.padded_vocab}, {"seq_length", c.seq_length},
        {"max_positions", c.max_positions},
        {"position", c.position == model::PositionEmbedding::Learned ? "learned" : "rotary"},
        {"rotary_base", c.rotary_base}, {"rotary_dim", c.rotary_dim()},
        {"norm", name_of(c.norm)}, {"norm_eps", c.norm_eps},
        {"activation", name_of(c.activation)}, {"tie_embeddings", c.tie_embeddings},
        {"linear_bias", c.linear_bias}, {"qkv_bias", c.qkv_bias}, {"causal", c.causal},
        {"token_types", c.token_types}, {"lm_head_transform", c.lm_head_transform},
        {"output_bias", c.output_bias}, {"binary_head", c.binary_head}}},
      {"batch", batch_size},
      {"seq", c.seq_length},
      {"loss", sum.lm / sum.tokens + (sum.sentences > 0 ? sum.sop / sum.sentences : 0.0)},
      {"parameters", params},
      {"inputs", inputs}};
  std::ofstream(dir / "manifest.json") << manifest.dump(1);
}

// f32 engine against an f64 reference: each op rounds to f32 (relative 6e-8) and errors grow
// with depth and with sums over up to a few hundred terms, so 1e-4 of each tensor's largest
// gradient is ample for correct code yet far below any real mistake (a wrong scale, sign,
// transpose or mask changes gradients at order 1).
void expect_matches_torch(const ModelConfig& c) {
  if (!torch_available()) GTEST_SKIP() << "PyTorch is not installed for " << kPython;
  test_support::TempDir dir;
  dump(c, 3, dir.path());
  const std::string command = std::string(kPython) + " " + MEGATRON_SOURCE_DIR +
                              "/tests/model/reference_gpt.py --rtol 1e-4 --atol 1e-6 " +
                              dir.path().string() + " > " + (dir.path() / "report.txt").string() +
                              " 2>&1";
  const int status = std::system(command.c_str());
  std::ifstream report(dir.path() / "report.txt");
  const std::string text((std::istreambuf_iterator<char>(report)), {});
  EXPECT_EQ(status, 0) << text;
}

ModelConfig reference_gpt() {
  ModelConfig c = test_support::tiny_gpt_config();
  c.num_layers = 3;
  c.hidden = 32;
  c.heads = 4;
  c.groups = 4;
  c.head_dim = 8;
  c.ffn = 64;
  c.vocab = 50;
  c.padded_vocab = 64;
  c.seq_length = 24;
  c.max_positions = 32;
  c.init_std = 0.05;
  return c;
}

TEST(GptAgainstPyTorch, GptShapedModelLossAndEveryGradientAgree) {
  expect_matches_torch(reference_gpt());
}

TEST(GptAgainstPyTorch, LlamaShapedModelLossAndEveryGradientAgree) {
  ModelConfig c = reference_gpt();
  c.groups = 2;
  c.position = model::PositionEmbedding::Rotary;
  c.norm = model::NormKind::RmsNorm;
  c.activation = model::Activation::Swiglu;
  c.tie_embeddings = false;
  c.linear_bias = false;
  c.qkv_bias = false;
  expect_matches_torch(c);
}

TEST(GptAgainstPyTorch, GegluMlpAgrees) {
  ModelConfig c = reference_gpt();
  c.activation = model::Activation::Geglu;
  expect_matches_torch(c);
}

TEST(GptAgainstPyTorch, GeluTanhWithQkvBiasOnlyAgrees) {
  ModelConfig c = reference_gpt();
  c.activation = model::Activation::GeluTanh;
  c.linear_bias = false;
  c.qkv_bias = true;
  c.rotary_percent = 0.5;
  c.position = model::PositionEmbedding::Rotary;
  expect_matches_torch(c);
}

TEST(BertAgainstPyTorch, BertShapedModelBothLossesAndEveryGradientAgree) {
  ModelConfig c = test_support::as_bert(reference_gpt());
  c.norm_eps = 1e-12;
  expect_matches_torch(c);
}

TEST(BertAgainstPyTorch, BertWithoutBinaryHeadAgrees) {
  expect_matches_torch(test_support::as_bert(reference_gpt(), false));
}

// T5: one forward and backward of an encoder-decoder model, dumped for reference_t5.py, which
// rebuilds Megatron-Core's T5 in float64; the tolerances are the GPT test's, for the same reason.
void expect_t5_matches_torch(const ModelConfig& c) {
  if (!torch_available()) GTEST_SKIP() << "PyTorch is not installed for " << kPython;
  test_support::TempDir dir;
  tensor::CpuBackend b(2);
  LanguageModel m(b, c);
  m.initialise(1234);
  const Batch batch = test_support::tiny_batch(b, c, 3, 99);
  ASSERT_EQ(batch.key_lengths.size(), 3u);
  const Pass pass{.backend = b, .training = true, .seed = 1, .iteration = 1};
  Activations saved;
  const Losses sum = m.forward(pass, batch, &saved);
  m.backward(pass, batch, saved, {.token = float(1.0 / sum.tokens)});
  const nlohmann::json params = write_parameters(b, m, dir.path());
  const auto& p = dir.path();
  write_raw(p / "tokens.i32", tensor::to_ints(b, batch.tokens));
  write_raw(p / "positions.i32", tensor::to_ints(b, batch.positions));
  write_raw(p / "key_lengths.i32", std::vector<int32_t>(batch.key_lengths.begin(), batch.key_lengths.end()));
  write_raw(p / "decoder_tokens.i32", tensor::to_ints(b, batch.decoder_tokens));
  write_raw(p / "labels.i32", tensor::to_ints(b, batch.labels));
  write_raw(p / "loss_mask.f32", tensor::to_floats(b, batch.loss_mask));
  const nlohmann::json manifest{
      {"config",
       {{"num_layers", c.num_layers}, {"decoder_layers", c.decoder_layers}, {"hidden", c.hidden},
        {"heads", c.heads}, {"groups", c.groups}, {"head_dim", c.head_dim}, {"ffn", c.ffn},
        {"seq_length", c.seq_length}, {"decoder_seq_length", c.decoder_seq_length},
        {"position", c.position == model::PositionEmbedding::Learned  ? "learned"
                     : c.position == model::PositionEmbedding::Rotary ? "rotary"
                                                                       : "relative"},
        {"relative_buckets", c.relative_buckets}, {"relative_max_distance", c.relative_max_distance},
        {"rotary_base", c.rotary_base}, {"rotary_dim", c.rotary_dim()}, {"norm", name_of(c.norm)},
        {"norm_eps", c.norm_eps}, {"activation", name_of(c.activation)},
        {"tie_embeddings", c.tie_embeddings}, {"output_bias", c.output_bias}}},
      {"batch", 3},
      {"loss", sum.lm / sum.tokens},
      {"parameters", params},
      {"inputs",
       {{"tokens", "tokens.i32"}, {"positions", "positions.i32"}, {"key_lengths", "key_lengths.i32"},
        {"decoder_tokens", "decoder_tokens.i32"}, {"labels", "labels.i32"},
        {"loss_mask", "loss_mask.f32"}}}};
  std::ofstream(p / "manifest.json") << manifest.dump(1);
  const std::string command = std::string(kPython) + " " + MEGATRON_SOURCE_DIR +
                              "/tests/model/reference_t5.py --rtol 1e-4 --atol 1e-6 " + p.string() +
                              " > " + (p / "report.txt").string() + " 2>&1";
  const int status = std::system(command.c_str());
  std::ifstream report(p / "report.txt");
  EXPECT_EQ(status, 0) << std::string((std::istreambuf_iterator<char>(report)), {});
}

// Encoder 24 tokens (the second sequence padded), decoder 9, learned positions, LayerNorm, GeLU:
// Megatron's T5 shape.
ModelConfig reference_t5() {
  ModelConfig c = test_support::as_t5(reference_gpt(), 2, 9);
  c.num_layers = 2;
  return c;
}

TEST(T5AgainstPyTorch, LearnedPositionsLossAndEveryGradientAgree) {
  expect_t5_matches_torch(reference_t5());
}

TEST(T5AgainstPyTorch, RotaryRmsNormSwigluGroupedUntiedWithoutBiasesAgree) {
  ModelConfig c = reference_t5();
  c.groups = 2;
  c.position = model::PositionEmbedding::Rotary;
  c.norm = model::NormKind::RmsNorm;
  c.activation = model::Activation::Swiglu;
  c.tie_embeddings = false;
  c.output_bias = false;
  c.linear_bias = false;
  c.qkv_bias = false;
  expect_t5_matches_torch(c);
}

TEST(T5AgainstPyTorch, RelativePositionsLossAndEveryGradientAgree) {
  ModelConfig c = reference_t5();
  c.position = model::PositionEmbedding::Relative;
  // 8 buckets over distance 12: exact, logarithmic and clipped buckets within 24 and 9 tokens.
  c.relative_buckets = 8;
  c.relative_max_distance = 12;
  expect_t5_matches_torch(c);
}

TEST(T5AgainstPyTorch, T5v11ShapeRelativeRmsNormGegluUntiedWithoutBiasesAgrees) {
  ModelConfig c = reference_t5();
  c.position = model::PositionEmbedding::Relative;
  c.norm = model::NormKind::RmsNorm;
  c.activation = model::Activation::Geglu;
  c.tie_embeddings = false;
  c.output_bias = false;
  c.linear_bias = false;
  c.qkv_bias = false;
  c.attention_dropout = 0.0;
  expect_t5_matches_torch(c);
}

TEST(T5AgainstPyTorch, DeeperDecoderThanEncoderAgrees) {
  ModelConfig c = reference_t5();
  c.num_layers = 1;
  c.decoder_layers = 3;
  c.decoder_seq_length = 30;  // longer than the encoder's 24
  c.max_positions = 32;
  expect_t5_matches_torch(c);
}

}  // namespace torch_reference_test
}  // namespace megatron::model
