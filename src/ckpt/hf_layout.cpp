#include "ckpt/hf_layout.hpp"

#include <array>
#include <cmath>
#include <tuple>

#include "model/parameter_names.hpp"

namespace megatron::ckpt {

std::string_view architecture_name(HfArch arch) {
  switch (arch) {
    case HfArch::Gpt2: return "GPT2LMHeadModel";
    case HfArch::Llama: return "LlamaForCausalLM";
    case HfArch::Qwen2: return "Qwen2ForCausalLM";
    case HfArch::Qwen3: return "Qwen3ForCausalLM";
    case HfArch::Mistral: return "MistralForCausalLM";
    case HfArch::MegatronBert: return "MegatronBertForPreTraining";
    case HfArch::T5: return "T5ForConditionalGeneration";
  }
  return "?";
}

namespace {

class Builder {
 public:
  explicit Builder(HfArch arch) { layout_.arch = arch; }

  size_t hf(std::string name, std::vector<int64_t> shape, bool transposed = false) {
    layout_.hf.push_back(
        {.name = std::move(name), .shape = std::move(shape), .transposed = transposed});
    return layout_.hf.size() - 1;
  }
  // A megatron tensor that is one Hugging Face tensor whole (`rows` of it: the vocabulary).
  void same(std::string name, std::vector<int64_t> shape, Split split, size_t hf_index) {
    add(std::move(name), std::move(shape), split, 1, {{hf_index, 0, layout_.hf[hf_index].rows()}});
  }
  void add(std::string name, std::vector<int64_t> shape, Split split, int64_t parts,
           std::vector<HfRows> blocks) {
    layout_.megatron.push_back({.name = std::move(name),
                                .shape = std::move(shape),
                                .split = split,
                                .parts = parts,
                                .blocks = std::move(blocks)});
  }
  HfLayout take() { return std::move(layout_); }

 private:
  HfLayout layout_;
};

// Megatron's fused qkv rows go group by group: the group's query heads, its key head, then its
// value head (see Layout::query_column in tensor/cpu_attention.cpp). Hugging Face keeps all
// queries, all keys, all values apart (Llama: three tensors; GPT-2: three thirds of c_attn).
std::vector<HfRows> qkv_blocks(const model::ModelConfig& c, HfRows q, HfRows k, HfRows v) {
  const int64_t per_group = c.heads / c.groups, d = c.head_dim;
  std::vector<HfRows> blocks;
  for (int64_t g = 0; g < c.groups; ++g) {
    blocks.push_back({q.hf, q.row0 + g * per_group * d, per_group * d});
    blocks.push_back({k.hf, k.row0 + g * d, d});
    blocks.push_back({v.hf, v.row0 + g * d, d});
  }
  return blocks;
}

std::string layer(int64_t i) { return model::block_prefix(i); }

HfLayout gpt2(const model::ModelConfig& c) {
  Builder b(HfArch::Gpt2);
  const int64_t h = c.hidden, q = c.heads * c.head_dim, kv = c.groups * c.head_dim;
  b.same("embedding.word_embeddings.weight", {c.padded_vocab, h}, Split::Rows,
         b.hf("transformer.wte.weight", {c.vocab, h}));
  b.same("embedding.position_embeddings.weight", {c.max_positions, h}, Split::None,
         b.hf("transformer.wpe.weight", {c.max_positions, h}));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string m = layer(i), t = "transformer.h." + std::to_string(i) + ".";
    b.same(m + "input_layernorm.weight", {h}, Split::None, b.hf(t + "ln_1.weight", {h}));
    b.same(m + "input_layernorm.bias", {h}, Split::None, b.hf(t + "ln_1.bias", {h}));
    const size_t w = b.hf(t + "attn.c_attn.weight", {h, q + 2 * kv}, true);
    b.add(m + "self_attention.linear_qkv.weight", {q + 2 * kv, h}, Split::Rows, 1,
          qkv_blocks(c, {w, 0, q}, {w, q, kv}, {w, q + kv, kv}));
    const size_t bias = b.hf(t + "attn.c_attn.bias", {q + 2 * kv});
    b.add(m + "self_attention.linear_qkv.bias", {q + 2 * kv}, Split::Rows, 1,
          qkv_blocks(c, {bias, 0, q}, {bias, q, kv}, {bias, q + kv, kv}));
    b.same(m + "self_attention.linear_proj.weight", {h, q}, Split::Columns,
           b.hf(t + "attn.c_proj.weight", {q, h}, true));
    b.same(m + "self_attention.linear_proj.bias", {h}, Split::None,
           b.hf(t + "attn.c_proj.bias", {h}));
    b.same(m + "pre_mlp_layernorm.weight", {h}, Split::None, b.hf(t + "ln_2.weight", {h}));
    b.same(m + "pre_mlp_layernorm.bias", {h}, Split::None, b.hf(t + "ln_2.bias", {h}));
    b.same(m + "mlp.linear_fc1.weight", {c.ffn, h}, Split::Rows,
           b.hf(t + "mlp.c_fc.weight", {h, c.ffn}, true));
    b.same(m + "mlp.linear_fc1.bias", {c.ffn}, Split::Rows, b.hf(t + "mlp.c_fc.bias", {c.ffn}));
    b.same(m + "mlp.linear_fc2.weight", {h, c.ffn}, Split::Columns,
           b.hf(t + "mlp.c_proj.weight", {c.ffn, h}, true));
    b.same(m + "mlp.linear_fc2.bias", {h}, Split::None, b.hf(t + "mlp.c_proj.bias", {h}));
  }
  b.same("decoder.final_layernorm.weight", {h}, Split::None, b.hf("transformer.ln_f.weight", {h}));
  b.same("decoder.final_layernorm.bias", {h}, Split::None, b.hf("transformer.ln_f.bias", {h}));
  if (!c.tie_embeddings) {
    b.same("output_layer.weight", {c.padded_vocab, h}, Split::Rows,
           b.hf("lm_head.weight", {c.vocab, h}));
  }
  return b.take();
}

// Llama; Qwen2: Llama with biases on the query, key and value projections (not the output);
// Qwen3: Llama with RMS norms on each query and key head (q_norm, k_norm).
HfLayout llama(HfArch arch, const model::ModelConfig& c) {
  Builder b(arch);
  const int64_t h = c.hidden, q = c.heads * c.head_dim, kv = c.groups * c.head_dim;
  b.same("embedding.word_embeddings.weight", {c.padded_vocab, h}, Split::Rows,
         b.hf("model.embed_tokens.weight", {c.vocab, h}));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string m = layer(i), t = "model.layers." + std::to_string(i) + ".";
    b.same(m + "input_layernorm.weight", {h}, Split::None, b.hf(t + "input_layernorm.weight", {h}));
    const size_t qw = b.hf(t + "self_attn.q_proj.weight", {q, h});
    const size_t kw = b.hf(t + "self_attn.k_proj.weight", {kv, h});
    const size_t vw = b.hf(t + "self_attn.v_proj.weight", {kv, h});
    b.add(m + "self_attention.linear_qkv.weight", {q + 2 * kv, h}, Split::Rows, 1,
          qkv_blocks(c, {qw, 0, q}, {kw, 0, kv}, {vw, 0, kv}));
    if (c.qkv_bias) {
      const size_t qb = b.hf(t + "self_attn.q_proj.bias", {q});
      const size_t kb = b.hf(t + "self_attn.k_proj.bias", {kv});
      const size_t vb = b.hf(t + "self_attn.v_proj.bias", {kv});
      b.add(m + "self_attention.linear_qkv.bias", {q + 2 * kv}, Split::Rows, 1,
            qkv_blocks(c, {qb, 0, q}, {kb, 0, kv}, {vb, 0, kv}));
    }
    if (c.qk_norm) {
      const int64_t d = c.head_dim;
      b.same(m + "self_attention.q_layernorm.weight", {d}, Split::None,
             b.hf(t + "self_attn.q_norm.weight", {d}));
      b.same(m + "self_attention.k_layernorm.weight", {d}, Split::None,
             b.hf(t + "self_attn.k_norm.weight", {d}));
    }
    b.same(m + "self_attention.linear_proj.weight", {h, q}, Split::Columns,
           b.hf(t + "self_attn.o_proj.weight", {h, q}));
    b.same(m + "pre_mlp_layernorm.weight", {h}, Split::None,
           b.hf(t + "post_attention_layernorm.weight", {h}));
    // SwiGLU's fc1 is [gate; up]: the backend's swiglu takes the first half as the gate.
    const size_t gate = b.hf(t + "mlp.gate_proj.weight", {c.ffn, h});
    const size_t up = b.hf(t + "mlp.up_proj.weight", {c.ffn, h});
    b.add(m + "mlp.linear_fc1.weight", {2 * c.ffn, h}, Split::Rows, 2,
          {{gate, 0, c.ffn}, {up, 0, c.ffn}});
    b.same(m + "mlp.linear_fc2.weight", {h, c.ffn}, Split::Columns,
           b.hf(t + "mlp.down_proj.weight", {h, c.ffn}));
  }
  b.same("decoder.final_layernorm.weight", {h}, Split::None, b.hf("model.norm.weight", {h}));
  if (!c.tie_embeddings) {
    b.same("output_layer.weight", {c.padded_vocab, h}, Split::Rows,
           b.hf("lm_head.weight", {c.vocab, h}));
  }
  return b.take();
}

// Pre-LayerNorm BERT as Megatron trains it; Hugging Face keeps query, key and value apart and
// ties cls.predictions.decoder to the word embedding (so the file holds it once).
HfLayout megatron_bert(const model::ModelConfig& c) {
  Builder b(HfArch::MegatronBert);
  const int64_t h = c.hidden, q = c.heads * c.head_dim, kv = c.groups * c.head_dim;
  const auto norm = [&](const std::string& m, const std::string& t) {
    b.same(m + ".weight", {h}, Split::None, b.hf(t + ".weight", {h}));
    b.same(m + ".bias", {h}, Split::None, b.hf(t + ".bias", {h}));
  };
  const auto linear = [&](const std::string& m, const std::string& t, int64_t out, int64_t in,
                          Split split) {
    b.same(m + ".weight", {out, in}, split, b.hf(t + ".weight", {out, in}));
    b.same(m + ".bias", {out}, split == Split::Rows ? Split::Rows : Split::None,
           b.hf(t + ".bias", {out}));
  };
  b.same("embedding.word_embeddings.weight", {c.padded_vocab, h}, Split::Rows,
         b.hf("bert.embeddings.word_embeddings.weight", {c.vocab, h}));
  b.same("embedding.position_embeddings.weight", {c.max_positions, h}, Split::None,
         b.hf("bert.embeddings.position_embeddings.weight", {c.max_positions, h}));
  b.same("embedding.tokentype_embeddings.weight", {c.token_types, h}, Split::None,
         b.hf("bert.embeddings.token_type_embeddings.weight", {c.token_types, h}));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string m = layer(i), t = "bert.encoder.layer." + std::to_string(i) + ".";
    norm(m + "input_layernorm", t + "attention.ln");
    const size_t qw = b.hf(t + "attention.self.query.weight", {q, h});
    const size_t kw = b.hf(t + "attention.self.key.weight", {kv, h});
    const size_t vw = b.hf(t + "attention.self.value.weight", {kv, h});
    b.add(m + "self_attention.linear_qkv.weight", {q + 2 * kv, h}, Split::Rows, 1,
          qkv_blocks(c, {qw, 0, q}, {kw, 0, kv}, {vw, 0, kv}));
    const size_t qb = b.hf(t + "attention.self.query.bias", {q});
    const size_t kb = b.hf(t + "attention.self.key.bias", {kv});
    const size_t vb = b.hf(t + "attention.self.value.bias", {kv});
    b.add(m + "self_attention.linear_qkv.bias", {q + 2 * kv}, Split::Rows, 1,
          qkv_blocks(c, {qb, 0, q}, {kb, 0, kv}, {vb, 0, kv}));
    linear(m + "self_attention.linear_proj", t + "attention.output.dense", h, q, Split::Columns);
    norm(m + "pre_mlp_layernorm", t + "ln");
    linear(m + "mlp.linear_fc1", t + "intermediate.dense", c.ffn, h, Split::Rows);
    linear(m + "mlp.linear_fc2", t + "output.dense", h, c.ffn, Split::Columns);
  }
  norm("decoder.final_layernorm", "bert.encoder.ln");
  linear("lm_head.dense", "cls.predictions.transform.dense", h, h, Split::None);
  norm("lm_head.layer_norm", "cls.predictions.transform.LayerNorm");
  b.same("output_layer.bias", {c.padded_vocab}, Split::Rows,
         b.hf("cls.predictions.bias", {c.vocab}));
  linear("pooler.dense", "bert.pooler.dense", h, h, Split::None);
  linear("binary_head", "cls.seq_relationship", 2, h, Split::None);
  return b.take();
}

// T5 v1.1 (gated-gelu, relative positions, RMS norms, no biases, untied head): one shared
// embedding, query/key/value/output per attention, and the relative-bias table in each stack's
// first block. Megatron's scores divide by sqrt(head_dim) and Hugging Face's do not, so the
// queries carry that factor here.
HfLayout t5(const model::ModelConfig& c, bool head_from_embedding) {
  Builder b(HfArch::T5);
  const int64_t h = c.hidden, q = c.heads * c.head_dim, kv = c.groups * c.head_dim;
  const double query_scale = std::sqrt(double(c.head_dim));
  const auto norm = [&](const std::string& m, const std::string& t) {
    b.same(m + ".weight", {h}, Split::None, b.hf(t + ".weight", {h}));
  };
  const auto attention = [&](const std::string& t) {
    return std::array<size_t, 4>{b.hf(t + ".q.weight", {q, h}), b.hf(t + ".k.weight", {kv, h}),
                                 b.hf(t + ".v.weight", {kv, h}), b.hf(t + ".o.weight", {h, q})};
  };
  const auto mlp = [&](const std::string& m, const std::string& t) {
    const size_t gate = b.hf(t + "DenseReluDense.wi_0.weight", {c.ffn, h});
    const size_t up = b.hf(t + "DenseReluDense.wi_1.weight", {c.ffn, h});
    b.add(m + "mlp.linear_fc1.weight", {2 * c.ffn, h}, Split::Rows, 2,
          {{gate, 0, c.ffn}, {up, 0, c.ffn}});
    b.same(m + "mlp.linear_fc2.weight", {h, c.ffn}, Split::Columns,
           b.hf(t + "DenseReluDense.wo.weight", {h, c.ffn}));
  };
  const auto self_attention = [&](const std::string& m, const std::string& t) {
    const auto [qw, kw, vw, ow] = attention(t + "SelfAttention");
    std::vector<HfRows> blocks = qkv_blocks(c, {qw, 0, q}, {kw, 0, kv}, {vw, 0, kv});
    for (HfRows& r : blocks) {
      if (r.hf == qw) r.scale = query_scale;
    }
    b.add(m + "self_attention.linear_qkv.weight", {q + 2 * kv, h}, Split::Rows, 1, std::move(blocks));
    b.same(m + "self_attention.linear_proj.weight", {h, q}, Split::Columns, ow);
  };
  const size_t shared = b.hf("shared.weight", {c.vocab, h});
  b.same("embedding.word_embeddings.weight", {c.padded_vocab, h}, Split::Rows, shared);
  for (const auto& [stack, layers, first] :
       {std::tuple{std::string("encoder"), c.num_layers, int64_t{0}},
        std::tuple{std::string("decoder"), c.decoder_layers, c.num_layers}}) {
    b.same(stack + "_relative_pos_emb.relative_attention_bias.weight",
           {c.relative_buckets, c.heads}, Split::Columns,
           b.hf(stack + ".block.0.layer.0.SelfAttention.relative_attention_bias.weight",
                {c.relative_buckets, c.heads}));
    for (int64_t i = 0; i < layers; ++i) {
      const std::string m = model::block_prefix(first + i, c.num_layers);
      const std::string t = stack + ".block." + std::to_string(i) + ".layer.";
      norm(m + "input_layernorm", t + "0.layer_norm");
      self_attention(m, t + "0.");
      if (stack == "decoder") {
        norm(m + "pre_cross_attn_layernorm", t + "1.layer_norm");
        const auto [qw, kw, vw, ow] = attention(t + "1.EncDecAttention");
        b.add(m + "cross_attention.linear_q.weight", {q, h}, Split::Rows, 1,
              {{.hf = qw, .row0 = 0, .rows = q, .scale = query_scale}});
        // linear_kv's rows go group by group: the group's key, then its value.
        std::vector<HfRows> blocks;
        for (int64_t g = 0; g < c.groups; ++g) {
          blocks.push_back({kw, g * c.head_dim, c.head_dim});
          blocks.push_back({vw, g * c.head_dim, c.head_dim});
        }
        b.add(m + "cross_attention.linear_kv.weight", {2 * kv, h}, Split::Rows, 1, std::move(blocks));
        b.same(m + "cross_attention.linear_proj.weight", {h, q}, Split::Columns, ow);
      }
      const std::string ff = t + (stack == "decoder" ? "2." : "1.");
      norm(m + "pre_mlp_layernorm", ff + "layer_norm");
      mlp(m, ff);
    }
    if (stack == "encoder") norm("encoder.final_layernorm", "encoder.final_layer_norm");
  }
  norm("decoder.final_layernorm", "decoder.final_layer_norm");
  b.same("output_layer.weight", {c.padded_vocab, h}, Split::Rows,
         head_from_embedding ? shared : b.hf("lm_head.weight", {c.vocab, h}));
  return b.take();
}

}  // namespace

HfLayout hf_layout(HfArch arch, const model::ModelConfig& c, bool head_from_embedding) {
  switch (arch) {
    case HfArch::T5: return t5(c, head_from_embedding);
    case HfArch::Gpt2: return gpt2(c);
    case HfArch::Llama:
    case HfArch::Qwen2:
    case HfArch::Qwen3:
    case HfArch::Mistral: return llama(arch, c);
    case HfArch::MegatronBert: return megatron_bert(c);
  }
  return gpt2(c);
}

}  // namespace megatron::ckpt
