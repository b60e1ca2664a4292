// The op harness's cases for the model's layers: a TransformerBlock of each family (GPT, the
// fused-GeLU GPT, Llama-style, BERT, T5's encoder and decoder), the embedding, the LM head with
// its loss, the binary head and classifier, T5's relative position bias. Each differentiates its
// input hidden states (and a decoder's memory, a block's score bias) and every parameter.
#include <memory>
#include <vector>

#include "model/binary_head.hpp"
#include "model/embedding.hpp"
#include "model/lm_head.hpp"
#include "model/relative_position.hpp"
#include "model/transformer_block.hpp"
#include "ops/layer_setup.hpp"
#include "ops/op_case.hpp"
#include "tensor/host_io.hpp"

namespace megatron::ops_test {

void randomise_parameters(tensor::Backend& backend, const model::ParameterSet& params,
                          uint32_t seed) {
  for (const auto& p : params.all()) {
    const bool ones = p->init == model::Init::Ones;
    std::vector<float> v = normal_values(size_t(p->value.numel()), seed++, ones ? 0.2f : 0.3f);
    if (ones) {
      for (float& x : v) x += 1.0f;
    }
    tensor::write_floats(backend, p->value, v);
  }
}

namespace {

using model::Batch;
using model::ModelConfig;
using model::ParameterSet;
using model::Pass;
using tensor::Backend;
using tensor::DType;
using tensor::Tensor;

// A layer chains a dozen ops, and the central differences see their rounding summed: as in
// tests/model/gpt_gradient_test.cpp, 3e-3 of the largest gradient element (noise ~1e-4 from
// outputs of size ~2 rounded at 6e-8 over a step of 1e-2). On CUDA each op may differ from the
// CPU by 1e-5 of its values, and a block passes about ten of them on: 1e-4.
constexpr Tolerance kLayerTolerance{
    .fd_rtol = 3e-3,
    .fd_atol = 1e-4,
    .fd_step = 1e-2f,
    .gpu_rtol = 1e-4,
    .why = "a dozen f32 ops chained: 3e-3 of the largest element, as gpt_gradient_test"};

// A head on whole sequences reports one f32 sum (~1.4, rounded at ~1e-7), so its differences
// carry only ~5e-6 of noise: an absolute floor of 1e-5 keeps its small gradients (the classifier
// bias's, ~0.01) checked to better than 1%.
constexpr Tolerance kSequenceHeadTolerance{
    .fd_rtol = 3e-3,
    .fd_atol = 1e-5,
    .fd_step = 1e-2f,
    .gpu_rtol = 1e-4,
    .why = "one f32 sum as the output: ~5e-6 of noise, so a 1e-5 floor"};

// What a layer case keeps alive: the config the layers refer to, its parameters, its batch.
struct LayerState {
  LayerState(Backend& backend, const ModelConfig& c) : config(c), params(backend, DType::F32) {}
  ModelConfig config;
  ParameterSet params;
  Batch batch;
};

// The inputs a case differentiates: its own tensors, then every parameter.
std::vector<Named> with_parameters(std::vector<Named> inputs, const ParameterSet& params) {
  for (const auto& p : params.all()) inputs.push_back({p->name, p->value});
  return inputs;
}
void append_parameter_grads(std::vector<Tensor>& grads, const ParameterSet& params) {
  for (const auto& p : params.all()) grads.push_back(p->grad);
}

// Every other sequence shorter (the padding mask), as the BERT and T5 batches are.
std::vector<int64_t> alternating_lengths(int64_t batch, int64_t full, int64_t short_length) {
  std::vector<int64_t> lengths;
  for (int64_t b = 0; b < batch; ++b) lengths.push_back(b % 2 == 1 ? short_length : full);
  return lengths;
}

Tensor token_ids(Backend& backend, int64_t n, int64_t below, uint32_t seed) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = int32_t((i * 5 + seed) % uint64_t(below));
  return tensor::from_ints(backend, v, {n});
}

// --- transformer blocks -----------------------------------------------------------------------

enum class BlockKind { Gpt, GptFusedGelu, Llama, Bert, T5Encoder, T5Decoder };

ModelConfig block_config(BlockKind kind) {
  switch (kind) {
    case BlockKind::Gpt: return gpt_config();
    case BlockKind::GptFusedGelu: {
      ModelConfig c = gpt_config();
      c.activation = model::Activation::GeluTanh;  // with fc1's bias: the fused GEMM path
      return c;
    }
    case BlockKind::Llama: return llama_config();
    case BlockKind::Bert: return bert_config();
    case BlockKind::T5Encoder:
    case BlockKind::T5Decoder: return t5_config();
  }
  return gpt_config();
}

// x [B*S, H] -> y [B*S, H] through one block, B 2 (times scale). A T5 block adds the score bias
// [S*S, NH] of its self-attention as an input, and a decoder block its memory [B*5, H] (key
// lengths 5 and 3) with cross-attention over it.
OpCase block_case(std::string name, std::string what, BlockKind kind) {
  return {std::move(name), std::move(what), kLayerTolerance,
          [kind](Backend& be, uint32_t seed, int64_t scale) {
    auto state = std::make_shared<LayerState>(be, block_config(kind));
    const ModelConfig& c = state->config;
    const bool decoder = kind == BlockKind::T5Decoder;
    const int64_t layer = decoder ? c.num_layers : 0;
    auto block = std::make_shared<model::TransformerBlock>(state->params, c, layer,
                                                           block_spec_for(c, layer));
    randomise_parameters(be, state->params, seed);
    Batch& batch = state->batch;
    batch.batch = 2 * scale;
    batch.seq = decoder ? c.decoder_seq_length : c.seq_length;
    if (!c.causal && !decoder) batch.key_lengths = alternating_lengths(batch.batch, batch.seq, 2);
    std::vector<Named> own;
    Tensor x = random_tensor(be, {batch.rows(), c.hidden}, seed + 100);
    own.push_back({"x", x});
    auto memory = std::make_shared<model::EncoderMemory>();
    if (decoder) {
      memory->seq = c.seq_length;
      memory->states = random_tensor(be, {batch.batch * memory->seq, c.hidden}, seed + 101);
      memory->key_lengths = alternating_lengths(batch.batch, memory->seq, 3);
      own.push_back({"memory", memory->states});
    }
    if (c.position == model::PositionEmbedding::Relative) {
      batch.score_bias = random_tensor(be, {batch.seq * batch.seq, c.heads}, seed + 102);
      batch.score_bias_grad = be.zeros(batch.score_bias.shape(), DType::F32);
      own.push_back({"score_bias", batch.score_bias});
    }
    const model::EncoderMemory* mem = decoder ? memory.get() : nullptr;
    OpRun run{.inputs = with_parameters(std::move(own), state->params)};
    run.forward = [&be, state, block, memory, mem, x] {
      model::BlockActivations saved;
      return std::vector<Tensor>{block->forward(Pass{.backend = be, .training = false}, x,
                                                state->batch, saved, model::Keep::Nothing, mem)};
    };
    run.backward = [&be, state, block, memory, mem, x](std::span<const Tensor> w) {
      const Pass pass{.backend = be, .training = false};
      state->params.zero_grads();
      Batch& batch = state->batch;
      if (batch.score_bias_grad.defined()) be.fill(batch.score_bias_grad, 0.0);
      model::BlockActivations saved;
      block->forward(pass, x, batch, saved, model::Keep::Everything, mem);
      Tensor dmemory;
      if (mem) dmemory = be.zeros(mem->states.shape(), DType::F32);
      std::vector<Tensor> grads{
          block->backward(pass, w[0], batch, saved, mem, mem ? &dmemory : nullptr)};
      if (mem) grads.push_back(dmemory);
      if (batch.score_bias_grad.defined()) grads.push_back(batch.score_bias_grad);
      append_parameter_grads(grads, state->params);
      return grads;
    };
    return run;
  }};
}

// --- embedding and heads ----------------------------------------------------------------------

// BERT's embedding: words (vocab 16 rows), learned positions and token types -> x [B*S, H].
OpCase embedding_layer_case() {
  return {"embedding_layer",
          "x [B*S, H] = words[tokens] + positions[t] + token_types[type]; B 2, S 4, H 8",
          kLayerTolerance, [](Backend& be, uint32_t seed, int64_t scale) {
    auto state = std::make_shared<LayerState>(be, bert_config());
    const ModelConfig& c = state->config;
    model::Parameter& word = state->params.add("embedding.word_embeddings.weight",
                                               {c.padded_vocab, c.hidden}, model::Init::Normal,
                                               model::TpSplit::Rows, true);
    auto embedding = std::make_shared<model::Embedding>(state->params, c, word);
    randomise_parameters(be, state->params, seed);
    Batch& batch = state->batch;
    batch.batch = 2 * scale;
    batch.seq = c.seq_length;
    const int64_t n = batch.rows();
    std::vector<int32_t> positions(static_cast<size_t>(n)), types(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      positions[size_t(i)] = int32_t(i % batch.seq);
      types[size_t(i)] = int32_t((i % batch.seq) * 2 >= batch.seq);
    }
    batch.tokens = token_ids(be, n, c.vocab, seed);
    batch.positions = tensor::from_ints(be, positions, {n});
    batch.token_types = tensor::from_ints(be, types, {n});
    OpRun run{.inputs = with_parameters({}, state->params)};
    run.forward = [&be, state, embedding] {
      return std::vector<Tensor>{
          embedding->forward(Pass{.backend = be, .training = false}, state->batch)};
    };
    run.backward = [&be, state, embedding](std::span<const Tensor> w) {
      state->params.zero_grads();
      Tensor dx = be.empty(w[0].shape(), DType::F32);
      be.copy(w[0], dx);  // consumed by backward
      embedding->backward(Pass{.backend = be, .training = false}, state->batch, dx);
      std::vector<Tensor> grads;
      append_parameter_grads(grads, state->params);
      return grads;
    };
    return forward_first(std::move(run));
  }};
}

// The LM head: x [B*S, H] -> each token's loss [B*S] (before the mask). The head's backward
// weighs token i by loss_mask[i] * token_grad, so the output weights go in as the loss mask.
OpCase lm_head_case(std::string name, std::string what, const ModelConfig& config) {
  return {std::move(name), std::move(what), kLayerTolerance,
          [config](Backend& be, uint32_t seed, int64_t scale) {
    auto state = std::make_shared<LayerState>(be, config);
    const ModelConfig& c = state->config;
    model::Parameter& output = state->params.add("output_layer.weight", {c.padded_vocab, c.hidden},
                                                 model::Init::Normal, model::TpSplit::Rows, true);
    auto head = std::make_shared<model::LmHead>(state->params, c, output);
    randomise_parameters(be, state->params, seed);
    Batch& batch = state->batch;
    batch.batch = 2 * scale;
    batch.seq = c.seq_length;
    batch.labels = token_ids(be, batch.rows(), c.vocab, seed);
    batch.loss_mask = be.zeros({batch.rows()}, DType::F32);
    Tensor x = random_tensor(be, {batch.rows(), c.hidden}, seed + 100);
    OpRun run{.inputs = with_parameters({{"x", x}}, state->params)};
    run.forward = [&be, state, head, x] {
      model::Losses losses;
      model::HeadOutputs outputs{.want_token_losses = true};
      head->forward(Pass{.backend = be, .training = false}, state->batch, x, nullptr, losses,
                    &outputs);
      return std::vector<Tensor>{outputs.token_losses};
    };
    run.backward = [&be, state, head, x](std::span<const Tensor> w) {
      const Pass pass{.backend = be, .training = false};
      state->params.zero_grads();
      Batch batch = state->batch;
      batch.loss_mask = w[0];
      model::Losses losses;
      model::LmHeadSaved saved;
      head->forward(pass, batch, x, &saved, losses, nullptr);
      std::vector<Tensor> grads{head->backward(pass, batch, saved, 1.0f)};
      append_parameter_grads(grads, state->params);
      return grads;
    };
    return run;
  }};
}

// A head on each sequence: x [B*S, H] -> the summed cross-entropy of the sequences' classes, a
// [1] tensor (the head reports only the sum; its backward takes one weight for all sequences).
OpCase sequence_head_case(std::string name, std::string what, const ModelConfig& config) {
  return {std::move(name), std::move(what), kSequenceHeadTolerance,
          [config](Backend& be, uint32_t seed, int64_t scale) {
    auto state = std::make_shared<LayerState>(be, config);
    const ModelConfig& c = state->config;
    auto head = std::make_shared<model::BinaryHead>(state->params, c);
    randomise_parameters(be, state->params, seed);
    Batch& batch = state->batch;
    batch.batch = 2 * scale;
    batch.seq = c.seq_length;
    const int32_t classes = c.classes > 0 ? int32_t(c.classes) : 2;
    for (int64_t b = 0; b < batch.batch; ++b) {
      batch.sentence_order.push_back(int32_t(b % classes));
      // The last-token classifier reads each sequence's last token before its padding.
      if (c.classes > 0 && !c.pooler) batch.valid_lengths.push_back(b % 2 == 1 ? 2 : batch.seq);
    }
    Tensor x = random_tensor(be, {batch.rows(), c.hidden}, seed + 100);
    OpRun run{.inputs = with_parameters({{"x", x}}, state->params)};
    run.forward = [&be, state, head, x] {
      model::Losses losses;
      head->forward(Pass{.backend = be, .training = false}, state->batch, x, nullptr, losses,
                    nullptr);
      const std::vector<float> sum{float(losses.sop)};
      return std::vector<Tensor>{tensor::from_floats(be, sum, {1})};
    };
    run.backward = [&be, state, head, x](std::span<const Tensor> w) {
      const Pass pass{.backend = be, .training = false};
      state->params.zero_grads();
      model::Losses losses;
      model::BinaryHeadSaved saved;
      head->forward(pass, state->batch, x, &saved, losses, nullptr);
      Tensor dx = be.zeros(x.shape(), DType::F32);  // the head adds into it
      head->backward(pass, state->batch, saved, tensor::to_floats(be, w[0])[0], dx);
      std::vector<Tensor> grads{dx};
      append_parameter_grads(grads, state->params);
      return grads;
    };
    return run;
  }};
}

// T5's relative position bias of the encoder (bidirectional buckets): table [8, NH] -> the
// score bias [S*S, NH] of a sequence of 5 (times scale: longer sequences reach farther buckets).
OpCase relative_position_case() {
  return {"relative_position_bias", "bias [S*S, NH] = table [buckets 8, NH][bucket(j - i)]; S 5",
          kLayerTolerance, [](Backend& be, uint32_t seed, int64_t scale) {
    auto state = std::make_shared<LayerState>(be, t5_config());
    auto bias = std::make_shared<model::RelativePositionBias>(
        state->params, state->config, "encoder_relative_pos_emb.relative_attention_bias.weight",
        true);
    randomise_parameters(be, state->params, seed);
    const int64_t seq = state->config.seq_length * scale;
    OpRun run{.inputs = with_parameters({}, state->params)};
    run.forward = [&be, state, bias, seq] { return std::vector<Tensor>{bias->forward(be, seq)}; };
    run.backward = [&be, state, bias, seq](std::span<const Tensor> w) {
      state->params.zero_grads();
      bias->backward(be, seq, w[0]);
      std::vector<Tensor> grads;
      append_parameter_grads(grads, state->params);
      return grads;
    };
    return forward_first(std::move(run));
  }};
}

}  // namespace

std::vector<OpCase> layer_op_cases() {
  ModelConfig gpt_classifier = gpt_config();
  gpt_classifier.classes = 3;
  return {
      block_case("gpt_block", "GPT block: LayerNorm, erf-GeLU, causal; B 2, S 4, H 8, NH 2, F 12",
                 BlockKind::Gpt),
      block_case("gpt_block_fused_gelu",
                 "GPT block with the tanh-GeLU MLP on the fused GEMMs; B 2, S 4, H 8, NH 2, F 12",
                 BlockKind::GptFusedGelu),
      block_case("llama_block",
                 "Llama-style block: RMSNorm, SwiGLU, rotary, GQA (NH 4, G 2), no biases; B 2, S 4",
                 BlockKind::Llama),
      block_case("bert_block", "BERT block: bidirectional over key lengths 4 and 2; B 2, S 4, H 8",
                 BlockKind::Bert),
      block_case("t5_encoder_block",
                 "T5 encoder block: bidirectional, key lengths 5 and 2, relative score bias, "
                 "RMSNorm, GeGLU; B 2, S 5",
                 BlockKind::T5Encoder),
      block_case("t5_decoder_block",
                 "T5 decoder block: causal self-attention with score bias, cross-attention over "
                 "memory [B*5, H] (key lengths 5 and 3); B 2, S 4",
                 BlockKind::T5Decoder),
      embedding_layer_case(),
      lm_head_case("lm_head_gpt", "GPT LM head: x @ output^T, token losses; B 2, S 4, V 16",
                   gpt_config()),
      lm_head_case("lm_head_bert",
                   "BERT LM head: dense, GeLU, LayerNorm, output with bias, token losses",
                   bert_config()),
      sequence_head_case("binary_head", "BERT binary head: pooler (tanh) on token 0, 2 classes",
                         bert_config()),
      sequence_head_case("classifier_last_token",
                         "GPT classifier: 3 classes on each sequence's last real token",
                         gpt_classifier),
      relative_position_case(),
  };
}

}  // namespace megatron::ops_test
