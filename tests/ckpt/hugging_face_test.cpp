// Hugging Face export and import on tiny random models: each Hugging Face tensor checked
// element by element against index arithmetic written here (not hf_layout's), the import
// giving every checkpoint tensor back bitwise, and a second export identical byte for byte.
#include "ckpt/hugging_face.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <limits>
#include <set>
#include <tuple>

#include "ckpt/checkpoint_reader.hpp"
#include "ckpt/hf_config.hpp"
#include "ckpt/hf_recipe.hpp"
#include "ckpt/rewrite.hpp"
#include "core/error.hpp"
#include "hf_fixtures.hpp"
#include "plan/model_config.hpp"
#include "recipe/compile.hpp"
#include "support/bytes.hpp"
#include "support/temp_dir.hpp"

namespace megatron::ckpt {
namespace {

namespace fs = std::filesystem;
using tensor::DType;
using test_support::MemorySource;

std::vector<float> floats(const std::vector<std::byte>& bytes) {
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

std::vector<float> hf_floats(const SafetensorsFile& f, const std::string& name) {
  const SafetensorsEntry* e = f.find(name);
  if (!e) throw std::runtime_error("no " + name + " in the export");
  EXPECT_EQ(e->dtype_name, "F32");
  std::vector<std::byte> bytes(size_t(e->end - e->begin));
  f.read(*e, 0, bytes);
  return floats(bytes);
}

// Checkpoint of `src`, exported to dir/hf; returns the checkpoint directory.
fs::path checkpoint_and_export(const MemorySource& src, const model::ModelConfig& c, DType dtype,
                               const fs::path& dir) {
  const fs::path ckpt = rewrite_checkpoint(src, test_support::hf_meta(c, dtype), {}, dir / "ckpt");
  export_hugging_face(CheckpointReader(ckpt), c, dir / "hf", std::nullopt);
  return ckpt;
}

std::set<std::string> names_in(const SafetensorsFile& f) {
  std::set<std::string> out;
  for (const SafetensorsEntry& e : f.entries()) out.insert(e.name);
  return out;
}

// The import of `hf_dir` holds src's tensors (same names, shapes, splits, dtype) with the same
// bytes, except the padding rows of the vocabulary, which are zeros.
void expect_import_matches(const fs::path& hf_dir, const MemorySource& src,
                           const model::ModelConfig& c) {
  const HuggingFaceSource hf(hf_dir);
  ASSERT_EQ(hf.tensors().size(), src.tensors().size());
  for (size_t i = 0; i < src.tensors().size(); ++i) {
    const TensorInfo& want = src.tensors()[i];
    const TensorInfo& got = hf.tensors()[i];
    EXPECT_EQ(got.name, want.name);
    EXPECT_EQ(got.kind, kModel);
    EXPECT_EQ(got.shape, want.shape) << want.name;
    EXPECT_EQ(got.split, want.split) << want.name;
    EXPECT_EQ(got.parts, want.parts) << want.name;
    EXPECT_EQ(got.dtype, want.dtype) << want.name;
    const int64_t rows = want.shape[0], cols = want.shape.size() > 1 ? want.shape[1] : 1;
    std::vector<std::byte> bytes(src.bytes(want.name).size());
    hf.read_raw(got, {{.row0 = 0, .rows = rows, .col0 = 0, .cols = cols}}, bytes);
    std::vector<std::byte> expected = src.bytes(want.name);
    if (want.name == "embedding.word_embeddings.weight" || want.name == "output_layer.weight") {
      const size_t keep = size_t(c.vocab * cols) * tensor::size_of(want.dtype);
      std::fill(expected.begin() + std::ptrdiff_t(keep), expected.end(), std::byte{0});
    }
    EXPECT_TRUE(bytes == expected) << want.name << " differs after export and import";
  }
}

// Import, write a checkpoint from it, export that (the same model `c`): the same files byte for
// byte.
void expect_second_export_identical(const fs::path& dir, const model::ModelConfig& c) {
  const HuggingFaceSource hf(dir / "hf");
  const fs::path again = rewrite_checkpoint(hf, hf.meta(), {}, dir / "ckpt2");
  export_hugging_face(CheckpointReader(again), c, dir / "hf2", std::nullopt);
  EXPECT_TRUE(test_support::slurp(dir / "hf" / "model.safetensors") ==
              test_support::slurp(dir / "hf2" / "model.safetensors"));
  EXPECT_EQ(test_support::slurp(dir / "hf" / "config.json"),
            test_support::slurp(dir / "hf2" / "config.json"));
}

nlohmann::json config_json(const fs::path& hf_dir) {
  std::ifstream in(hf_dir / "config.json");
  return nlohmann::json::parse(in);
}

TEST(HfLayout, MegatronSideIsTheModelsParameterListForEveryShape) {
  for (model::ModelConfig c : {test_support::hf_tiny_gpt2(), test_support::hf_tiny_llama()}) {
    for (bool tie : {true, false}) {
      c.tie_embeddings = tie;
      const MemorySource model_params(c, DType::F32);  // built from model::LanguageModel
      const HfArch arch = hf_architecture(c);
      const HfLayout layout = hf_layout(arch, c);
      ASSERT_EQ(layout.megatron.size(), model_params.tensors().size());
      for (size_t i = 0; i < layout.megatron.size(); ++i) {
        const MegatronTensor& m = layout.megatron[i];
        const TensorInfo& p = model_params.tensors()[i];
        EXPECT_EQ(m.name, p.name);
        EXPECT_EQ(m.shape, p.shape) << m.name;
        EXPECT_EQ(m.split, p.split) << m.name;
        EXPECT_EQ(m.parts, p.parts) << m.name;
      }
    }
  }
}

TEST(HuggingFaceExport, Gpt2WeightsLandWhereGpt2LMHeadModelReadsThem) {
  test_support::TempDir dir;
  const model::ModelConfig c = test_support::hf_tiny_gpt2();
  const MemorySource src(c, DType::F32);
  checkpoint_and_export(src, c, DType::F32, dir.path());

  const nlohmann::json j = config_json(dir.path() / "hf");
  EXPECT_EQ(j["architectures"], nlohmann::json({"GPT2LMHeadModel"}));
  EXPECT_EQ(j["model_type"], "gpt2");
  EXPECT_EQ(j["vocab_size"], 50);
  EXPECT_EQ(j["n_positions"], 9);
  EXPECT_EQ(j["n_embd"], 16);
  EXPECT_EQ(j["n_layer"], 2);
  EXPECT_EQ(j["n_head"], 4);
  EXPECT_EQ(j["n_inner"], 24);
  EXPECT_EQ(j["activation_function"], "gelu_new");
  EXPECT_EQ(j["tie_word_embeddings"], true);
  EXPECT_EQ(j["torch_dtype"], "float32");

  const SafetensorsFile f(dir.path() / "hf" / "model.safetensors");
  std::set<std::string> want{"transformer.wte.weight", "transformer.wpe.weight",
                             "transformer.ln_f.weight", "transformer.ln_f.bias"};
  for (const char* l : {"0", "1"}) {
    for (const char* n :
         {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
          "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight",
          "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"}) {
      want.insert(std::string("transformer.h.") + l + "." + n);
    }
  }
  EXPECT_EQ(names_in(f), want);  // tied: no lm_head.weight

  const int64_t H = c.hidden, HD = c.head_dim, F = c.ffn;
  const auto wte = hf_floats(f, "transformer.wte.weight");
  const auto emb = floats(src.bytes("embedding.word_embeddings.weight"));
  ASSERT_EQ(wte.size(), size_t(c.vocab * H));
  EXPECT_TRUE(std::equal(wte.begin(), wte.end(), emb.begin())) << "wte = the first vocab rows";
  EXPECT_EQ(hf_floats(f, "transformer.wpe.weight"),
            floats(src.bytes("embedding.position_embeddings.weight")));

  const std::string m = "decoder.layers.1.", t = "transformer.h.1.";
  // c_attn is Conv1D [in H, out 3H] with out = [all q | all k | all v]; megatron's rows go head
  // by head, [q_h; k_h; v_h].
  const auto c_attn = hf_floats(f, t + "attn.c_attn.weight");
  const auto c_attn_b = hf_floats(f, t + "attn.c_attn.bias");
  const auto qkv = floats(src.bytes(m + "self_attention.linear_qkv.weight"));
  const auto qkv_b = floats(src.bytes(m + "self_attention.linear_qkv.bias"));
  for (int64_t j = 0; j < 3 * H; ++j) {
    const int64_t part = j / H, head = (j % H) / HD, d = j % HD;
    const int64_t row = head * 3 * HD + part * HD + d;
    EXPECT_EQ(c_attn_b[size_t(j)], qkv_b[size_t(row)]) << j;
    for (int64_t i = 0; i < H; ++i) {
      ASSERT_EQ(c_attn[size_t(i * 3 * H + j)], qkv[size_t(row * H + i)]) << i << "," << j;
    }
  }
  const auto transposed = [&](const std::string& hf_name, const std::string& m_name, int64_t in,
                              int64_t out) {
    const auto a = hf_floats(f, hf_name), b = floats(src.bytes(m_name));
    for (int64_t i = 0; i < in; ++i)
      for (int64_t o = 0; o < out; ++o)
        ASSERT_EQ(a[size_t(i * out + o)], b[size_t(o * in + i)]) << hf_name;
  };
  transposed(t + "attn.c_proj.weight", m + "self_attention.linear_proj.weight", H, H);
  transposed(t + "mlp.c_fc.weight", m + "mlp.linear_fc1.weight", H, F);
  transposed(t + "mlp.c_proj.weight", m + "mlp.linear_fc2.weight", F, H);
  EXPECT_EQ(hf_floats(f, t + "mlp.c_fc.bias"), floats(src.bytes(m + "mlp.linear_fc1.bias")));
  EXPECT_EQ(hf_floats(f, t + "ln_2.weight"), floats(src.bytes(m + "pre_mlp_layernorm.weight")));
  EXPECT_EQ(hf_floats(f, "transformer.ln_f.bias"),
            floats(src.bytes("decoder.final_layernorm.bias")));

  expect_import_matches(dir.path() / "hf", src, c);
  expect_second_export_identical(dir.path(), c);
}

TEST(HuggingFaceExport, LlamaWithGroupedQueryAttentionSplitsQkvAndGateUp) {
  test_support::TempDir dir;
  const model::ModelConfig c = test_support::hf_tiny_llama();
  const MemorySource src(c, DType::F32);
  checkpoint_and_export(src, c, DType::F32, dir.path());

  const nlohmann::json j = config_json(dir.path() / "hf");
  EXPECT_EQ(j["architectures"], nlohmann::json({"LlamaForCausalLM"}));
  EXPECT_EQ(j["num_attention_heads"], 6);
  EXPECT_EQ(j["num_key_value_heads"], 2);
  EXPECT_EQ(j["intermediate_size"], 20);
  EXPECT_EQ(j["hidden_act"], "silu");
  EXPECT_EQ(j["rope_theta"], 500.0);
  EXPECT_EQ(j["rms_norm_eps"], 1e-6);
  EXPECT_EQ(j["max_position_embeddings"], 32);
  EXPECT_EQ(j["tie_word_embeddings"], false);

  const SafetensorsFile f(dir.path() / "hf" / "model.safetensors");
  std::set<std::string> want{"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"};
  for (const char* l : {"0", "1"}) {
    for (const char* n :
         {"input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.k_proj.weight",
          "self_attn.v_proj.weight", "self_attn.o_proj.weight", "post_attention_layernorm.weight",
          "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"}) {
      want.insert(std::string("model.layers.") + l + "." + n);
    }
  }
  EXPECT_EQ(names_in(f), want);

  const int64_t H = c.hidden, HD = c.head_dim, per = c.heads / c.groups, F = c.ffn;
  const std::string m = "decoder.layers.0.", t = "model.layers.0.";
  const auto qkv = floats(src.bytes(m + "self_attention.linear_qkv.weight"));
  const auto row_of = [&](int64_t megatron_row) {
    return std::vector<float>(qkv.begin() + megatron_row * H, qkv.begin() + (megatron_row + 1) * H);
  };
  const auto hf_row = [&](const std::vector<float>& w, int64_t r) {
    return std::vector<float>(w.begin() + r * H, w.begin() + (r + 1) * H);
  };
  // Megatron: group g's rows are [its `per` query heads; its key head; its value head].
  const auto q = hf_floats(f, t + "self_attn.q_proj.weight");
  const auto k = hf_floats(f, t + "self_attn.k_proj.weight");
  const auto v = hf_floats(f, t + "self_attn.v_proj.weight");
  ASSERT_EQ(q.size(), size_t(c.heads * HD * H));
  ASSERT_EQ(k.size(), size_t(c.groups * HD * H));
  for (int64_t r = 0; r < c.heads * HD; ++r) {
    const int64_t head = r / HD, g = head / per;
    EXPECT_EQ(hf_row(q, r), row_of((g * (per + 2) + head % per) * HD + r % HD)) << "q row " << r;
  }
  for (int64_t r = 0; r < c.groups * HD; ++r) {
    const int64_t g = r / HD;
    EXPECT_EQ(hf_row(k, r), row_of((g * (per + 2) + per) * HD + r % HD)) << "k row " << r;
    EXPECT_EQ(hf_row(v, r), row_of((g * (per + 2) + per + 1) * HD + r % HD)) << "v row " << r;
  }
  // fc1 = [gate; up]: the backend's swiglu is silu(first half) * second half.
  const auto fc1 = floats(src.bytes(m + "mlp.linear_fc1.weight"));
  const auto gate = hf_floats(f, t + "mlp.gate_proj.weight");
  const auto up = hf_floats(f, t + "mlp.up_proj.weight");
  EXPECT_TRUE(std::equal(gate.begin(), gate.end(), fc1.begin()));
  EXPECT_TRUE(std::equal(up.begin(), up.end(), fc1.begin() + F * H));
  EXPECT_EQ(hf_floats(f, t + "self_attn.o_proj.weight"),
            floats(src.bytes(m + "self_attention.linear_proj.weight")));
  EXPECT_EQ(hf_floats(f, t + "mlp.down_proj.weight"),
            floats(src.bytes(m + "mlp.linear_fc2.weight")));
  EXPECT_EQ(hf_floats(f, "model.norm.weight"), floats(src.bytes("decoder.final_layernorm.weight")));
  const auto head = hf_floats(f, "lm_head.weight");
  const auto out = floats(src.bytes("output_layer.weight"));
  ASSERT_EQ(head.size(), size_t(c.vocab * H));
  EXPECT_TRUE(std::equal(head.begin(), head.end(), out.begin()));

  expect_import_matches(dir.path() / "hf", src, c);
  expect_second_export_identical(dir.path(), c);
}

TEST(HuggingFaceExport, Bf16StaysBitwiseAndConvertsToF32OnRequest) {
  test_support::TempDir dir;
  model::ModelConfig c = test_support::hf_tiny_llama();
  c.tie_embeddings = true;
  const MemorySource src(c, DType::Bf16);
  const fs::path ckpt = checkpoint_and_export(src, c, DType::Bf16, dir.path());
  const SafetensorsFile f(dir.path() / "hf" / "model.safetensors");
  for (const SafetensorsEntry& e : f.entries()) EXPECT_EQ(e.dtype_name, "BF16") << e.name;
  EXPECT_EQ(f.find("lm_head.weight"), nullptr);
  EXPECT_EQ(config_json(dir.path() / "hf")["torch_dtype"], "bfloat16");
  expect_import_matches(dir.path() / "hf", src, c);
  expect_second_export_identical(dir.path(), c);

  export_hugging_face(CheckpointReader(ckpt), c, dir.path() / "hf32", DType::F32);
  const SafetensorsFile f32(dir.path() / "hf32" / "model.safetensors");
  const auto norm = hf_floats(f32, "model.layers.1.input_layernorm.weight");
  const auto& raw = src.bytes("decoder.layers.1.input_layernorm.weight");
  ASSERT_EQ(norm.size() * 2, raw.size());
  for (size_t i = 0; i < norm.size(); ++i) {
    tensor::bf16 b;
    std::memcpy(&b.bits, &raw[2 * i], 2);
    EXPECT_EQ(norm[i], tensor::to_float(b));
  }
}

TEST(HuggingFaceImport, MetaDescribesTheModelAndItsRecipeCompilesToTheSameModel) {
  for (const model::ModelConfig& c : {test_support::hf_tiny_gpt2(), test_support::hf_tiny_llama()}) {
    test_support::TempDir dir;
    const MemorySource src(c, DType::F32);
    checkpoint_and_export(src, c, DType::F32, dir.path());
    const HuggingFaceSource hf(dir.path() / "hf");
    const CheckpointMeta meta = hf.meta();
    EXPECT_EQ(meta.state.iteration, 0);
    EXPECT_EQ(meta.optimizer, "none");
    EXPECT_EQ(meta.dtype, "f32");
    EXPECT_EQ(meta.layout.tensor, 1);
    EXPECT_EQ(meta.layout.pipeline, 1);
    EXPECT_EQ(meta.model, model_fields(c));

    const fs::path recipe_file = dir.write("imported.yaml", meta.recipe);
    const recipe::CompiledRecipe compiled =
        recipe::compile(recipe_file, {.world_from_layout = true});
    const model::ModelConfig built = plan::model_config(compiled.recipe, compiled.derived);
    EXPECT_EQ(model_fields(built), meta.model) << meta.recipe;
    EXPECT_EQ(built.padded_vocab, c.padded_vocab);
    EXPECT_EQ(built.norm_eps, c.norm_eps);
    EXPECT_TRUE(compiled.recipe.data.mock);
  }
}

TEST(HuggingFaceImport, TensorParallelRewriteHoldsTheSameWeights) {
  test_support::TempDir dir;
  const model::ModelConfig c = test_support::hf_tiny_llama();
  const MemorySource src(c, DType::F32);
  checkpoint_and_export(src, c, DType::F32, dir.path());
  const HuggingFaceSource hf(dir.path() / "hf");
  const fs::path tp1 = rewrite_checkpoint(hf, hf.meta(), {}, dir.path() / "tp1");
  const fs::path tp2 =
      rewrite_checkpoint(hf, hf.meta(), {.tensor = 2, .pipeline = 2}, dir.path() / "tp2");
  const CheckpointReader a(tp1), b(tp2);
  for (const TensorInfo& t : a.tensors()) {
    const TensorInfo* u = b.find(t.kind, t.name);
    ASSERT_NE(u, nullptr) << t.name;
    const Box all{
        .row0 = 0, .rows = t.shape[0], .col0 = 0, .cols = t.shape.size() > 1 ? t.shape[1] : 1};
    std::vector<float> x(size_t(all.numel())), y(x.size());
    a.read_f32(t, {all}, x);
    b.read_f32(*u, {all}, y);
    EXPECT_EQ(x, y) << t.name;
  }
}

// A GPT2Model save (no "transformer." prefix) with its causal-mask buffers, in two shards.
TEST(HuggingFaceImport, ReadsShardsUnprefixedNamesAndSkipsMaskBuffers) {
  test_support::TempDir dir;
  const model::ModelConfig c = test_support::hf_tiny_gpt2();
  const MemorySource src(c, DType::F32);
  checkpoint_and_export(src, c, DType::F32, dir.path());
  const SafetensorsFile whole(dir.path() / "hf" / "model.safetensors");
  const fs::path sharded = dir.path() / "sharded";
  fs::create_directories(sharded);
  fs::copy_file(dir.path() / "hf" / "config.json", sharded / "config.json");
  nlohmann::json map;
  const size_t half = whole.entries().size() / 2;
  for (int shard = 0; shard < 2; ++shard) {
    const std::string file = "model-0000" + std::to_string(shard + 1) + "-of-00002.safetensors";
    std::vector<SafetensorsTensor> declared;
    std::vector<const SafetensorsEntry*> entries;
    for (size_t i = shard == 0 ? 0 : half; i < (shard == 0 ? half : whole.entries().size()); ++i) {
      const SafetensorsEntry& e = whole.entries()[i];
      const std::string name = e.name.substr(12);  // without "transformer."
      declared.push_back({name, *e.dtype, e.shape});
      entries.push_back(&e);
      map[name] = file;
    }
    declared.push_back({"h.0.attn.bias", DType::F32, {1, 1, 9, 9}});
    map["h.0.attn.bias"] = file;
    SafetensorsWriter w(sharded / file, declared, {{"format", "pt"}});
    for (const SafetensorsEntry* e : entries) {
      std::vector<std::byte> bytes(size_t(e->end - e->begin));
      whole.read(*e, 0, bytes);
      w.append(bytes);
    }
    w.append(std::vector<std::byte>(81 * 4));
    w.finish();
  }
  std::ofstream(sharded / "model.safetensors.index.json")
      << nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", map}}.dump();
  expect_import_matches(sharded, src, c);
}

void expect_user_error(const std::function<void()>& f, const std::vector<std::string>& words) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one saying " << words.front();
  } catch (const UserError& e) {
    for (const std::string& w : words) {
      EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << e.what();
    }
  }
}

// The recipe's vocabulary must fit the checkpoint's embedding: a recipe damaged to a larger
// one would read rows past the tensor.
TEST(HuggingFaceExport, ARecipeVocabularyLargerThanTheEmbeddingIsRefusedAndNothingIsWritten) {
  test_support::TempDir dir;
  const model::ModelConfig c = test_support::hf_tiny_llama();
  const MemorySource src(c, DType::F32);
  const fs::path ckpt = rewrite_checkpoint(src, test_support::hf_meta(c, DType::F32), {},
                                           dir.path() / "ckpt");
  model::ModelConfig damaged = c;
  damaged.vocab = c.padded_vocab + 1;
  expect_user_error(
      [&] { export_hugging_face(CheckpointReader(ckpt), damaged, dir.path() / "hf", {}); },
      {"the word embedding has 128 rows, fewer than the recipe's model.vocab_size 129"});
  EXPECT_FALSE(fs::exists(dir.path() / "hf" / "model.safetensors"));
}

// A NaN or infinite weight in a downloaded model is damage: the import names the tensor and
// writes no checkpoint, rather than one whose every output is NaN.
TEST(HuggingFaceImport, ANonFiniteWeightIsRefusedNamingItsTensor) {
  test_support::TempDir dir;
  const model::ModelConfig c = test_support::hf_tiny_gpt2();
  const MemorySource src(c, DType::F32);
  checkpoint_and_export(src, c, DType::F32, dir.path());
  const fs::path file = dir.path() / "hf" / "model.safetensors";
  std::string name;
  int64_t at = 0;
  {
    const SafetensorsFile f(file);
    const SafetensorsEntry& e = f.entries().back();
    name = e.name;
    uint64_t header = 0;
    std::ifstream in(file, std::ios::binary);
    in.read(reinterpret_cast<char*>(&header), 8);
    at = 8 + int64_t(header) + e.begin + 2 * 4;  // its third element
  }
  {
    std::fstream out(file, std::ios::binary | std::ios::in | std::ios::out);
    out.seekp(at);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    out.write(reinterpret_cast<const char*>(&nan), 4);
  }
  const HuggingFaceSource hf(dir.path() / "hf");
  expect_user_error([&] { rewrite_checkpoint(hf, hf.meta(), {}, dir.path() / "imported"); },
                    {file.string() + ": tensor " + name + " holds a non-finite value (NaN or "
                     "infinity) at element 2"});
  EXPECT_FALSE(fs::exists(dir.path() / "imported" / "latest"));
}

TEST(HuggingFaceExport, ModelsNoArchitectureMatchesAreUserErrorsNamingTheField) {
  model::ModelConfig rms_learned = test_support::hf_tiny_gpt2();
  rms_learned.norm = recipe::Norm::RmsNorm;
  expect_user_error([&] { hf_architecture(rms_learned); },
                    {"no Hugging Face architecture", "model.normalization is rmsnorm",
                     "GPT2LMHeadModel", "layernorm"});
  model::ModelConfig gqa_learned = test_support::hf_tiny_gpt2();
  gqa_learned.groups = 2;
  expect_user_error([&] { hf_architecture(gqa_learned); }, {"model.num_query_groups is 2"});
  model::ModelConfig gelu_rotary = test_support::hf_tiny_llama();
  gelu_rotary.activation = recipe::Activation::Gelu;
  expect_user_error([&] { hf_architecture(gelu_rotary); },
                    {"model.activation is gelu", "LlamaForCausalLM", "swiglu"});
  model::ModelConfig partial = test_support::hf_tiny_llama();
  partial.rotary_percent = 0.5;
  expect_user_error([&] { hf_architecture(partial); }, {"model.rotary_percent is 0.5"});
  // Biases on every linear layer: neither Llama (none) nor Qwen2 (query/key/value only).
  model::ModelConfig biased = test_support::hf_tiny_llama();
  biased.qkv_bias = biased.linear_bias = true;
  expect_user_error([&] { hf_architecture(biased); }, {"model.add_bias_linear is true"});

  // The same through a whole export, with nothing written.
  test_support::TempDir dir;
  const MemorySource src(rms_learned, DType::F32);
  const fs::path ckpt = rewrite_checkpoint(src, test_support::hf_meta(rms_learned, DType::F32), {},
                                           dir.path() / "ckpt");
  expect_user_error([&] { export_hugging_face(CheckpointReader(ckpt), rms_learned, dir.path() / "hf", {}); },
                    {"model.normalization is rmsnorm"});
  EXPECT_FALSE(fs::exists(dir.path() / "hf" / "model.safetensors"));
}

TEST(HuggingFaceImport, WhatTheEngineCannotComputeIsAUserError) {
  test_support::TempDir dir;
  const model::ModelConfig c = test_support::hf_tiny_llama();
  const MemorySource src(c, DType::F32);
  checkpoint_and_export(src, c, DType::F32, dir.path());
  const fs::path hf = dir.path() / "hf";
  const nlohmann::json original = config_json(hf);
  const auto with = [&](const std::string& key, const nlohmann::json& value) {
    nlohmann::json j = original;
    j[key] = value;
    std::ofstream(hf / "config.json") << j.dump();
  };
  with("model_type", "bert");
  expect_user_error([&] { HuggingFaceSource s(hf); }, {"model_type \"bert\"", "gpt2, llama, qwen2, qwen3, mistral, megatron-bert and t5"});
  with("rope_scaling", nlohmann::json{{"type", "dynamic"}, {"factor", 2.0}});
  expect_user_error([&] { HuggingFaceSource s(hf); }, {"rope_scaling"});
  with("hidden_act", "gelu");
  expect_user_error([&] { HuggingFaceSource s(hf); }, {"hidden_act"});
  with("intermediate_size", 21);
  expect_user_error([&] { HuggingFaceSource s(hf); },
                    {"model.layers.0.mlp.gate_proj.weight has shape [20, 24]", "[21, 24]"});
  with("tie_word_embeddings", true);  // then lm_head.weight is ignored, not an error
  EXPECT_NO_THROW(HuggingFaceSource s(hf));
  with("num_hidden_layers", 1);  // layer 1's tensors are left over
  expect_user_error([&] { HuggingFaceSource s(hf); }, {"model.layers.1.", "has no place"});
}

// A Llama export of the tiny model, and a way to rewrite its config.json key by key.
struct HfConfig : ::testing::Test {
  void SetUp() override {
    checkpoint_and_export(src, c, DType::F32, dir.path());
    original = config_json(hf());
  }
  fs::path hf() const { return dir.path() / "hf"; }
  void with(const std::string& key, const nlohmann::json& value) const {
    nlohmann::json j = original;
    j[key] = value;
    std::ofstream(hf() / "config.json") << j.dump();
  }
  void expect_refused(const std::vector<std::string>& words) const {
    expect_user_error([&] { HuggingFaceSource s(hf()); }, words);
  }
  test_support::TempDir dir;
  const model::ModelConfig c = test_support::hf_tiny_llama();
  const MemorySource src{c, DType::F32};
  nlohmann::json original;
};

TEST_F(HfConfig, ABillionLayersIsRefusedBeforeAnythingIsSizedFromIt) {
  with("num_hidden_layers", 1000000000);
  expect_refused({"config.json: num_hidden_layers = 1000000000 is out of range: expected 1 to 10000"});
}

TEST_F(HfConfig, EverySizeIsCheckedAgainstItsLimit) {
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, int64_t>>{{"hidden_size", int64_t(1) << 40},
                                                    {"num_attention_heads", 0},
                                                    {"num_key_value_heads", 7},
                                                    {"head_dim", -4},
                                                    {"intermediate_size", int64_t(1) << 23},
                                                    {"vocab_size", -3},
                                                    {"max_position_embeddings", int64_t(1) << 30}}) {
    SCOPED_TRACE(key);
    with(key, value);
    expect_refused({"config.json: " + key + " = " + std::to_string(value) + " is out of range"});
  }
}

TEST_F(HfConfig, SizesThatAreNotIntegersAreRefused) {
  with("hidden_size", 24.0);
  expect_refused({"config.json: hidden_size = 24.0: expected an integer from 1 to 1048576"});
  with("vocab_size", nlohmann::json::number_unsigned_t(18446744073709551615ull));
  expect_refused({"vocab_size = 18446744073709551615: expected an integer"});
}

TEST_F(HfConfig, SizesEachInRangeButTooLargeTogetherAreRefused) {
  nlohmann::json j = original;
  j["hidden_size"] = int64_t(1) << 20;
  j["intermediate_size"] = int64_t(1) << 22;
  j["num_hidden_layers"] = 10000;
  std::ofstream(hf() / "config.json") << j.dump();
  expect_refused({"config.json: these sizes make a model of", "parameters, more than the"});
}

TEST_F(HfConfig, RealNumbersOutsideTheirRangeAreRefused) {
  with("rms_norm_eps", -1.0);
  expect_refused({"config.json: rms_norm_eps = -1.0: expected a positive number"});
  with("attention_dropout", 1.5);
  expect_refused({"attention_dropout = 1.5: expected a probability in [0, 1)"});
}

TEST_F(HfConfig, ADuplicateKeyKeepsTheLastValueAsPythonsJsonDoes) {
  std::string text = original.dump();
  text.insert(1, "\"num_hidden_layers\": 1000000000, ");  // the real value comes after
  std::ofstream(hf() / "config.json") << text;
  EXPECT_EQ(HuggingFaceSource(hf()).config().num_layers, c.num_layers);
}

TEST_F(HfConfig, AShardIndexNamingAFileOutsideTheDirectoryIsRefused) {
  std::ofstream(hf() / "model.safetensors.index.json")
      << R"({"weight_map": {"lm_head.weight": "../model.safetensors"}})";
  expect_refused({"weight_map names the file \"../model.safetensors\"", "no directories"});
  std::ofstream(hf() / "model.safetensors.index.json") << R"({"weight_map": {"lm_head.weight": 3}})";
  expect_refused({"weight_map[\"lm_head.weight\"] = 3: expected a file name"});
}

}  // namespace
}  // namespace megatron::ckpt

namespace megatron::ckpt {
namespace {

// A T5 v1.1 config.json as transformers 4 writes it.
nlohmann::json t5_v11_config() {
  return {{"model_type", "t5"}, {"d_model", 16}, {"d_kv", 4}, {"d_ff", 24}, {"num_layers", 2},
          {"num_decoder_layers", 3}, {"num_heads", 4}, {"vocab_size", 50},
          {"relative_attention_num_buckets", 8}, {"relative_attention_max_distance", 12},
          {"feed_forward_proj", "gated-gelu"}, {"tie_word_embeddings", false},
          {"layer_norm_epsilon", 1e-6}, {"dropout_rate", 0.0}};
}

// What importing `config` is refused with ("" when it imports).
std::string import_refusal(const nlohmann::json& config) {
  try {
    hf_model_from_config(config, "dir/config.json");
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(HuggingFaceT5Config, T5v11IsTheEnginesEncoderDecoderShape) {
  const HfModel m = hf_model_from_config(t5_v11_config(), "dir/config.json");
  EXPECT_EQ(m.arch, HfArch::T5);
  EXPECT_TRUE(m.config.encoder_decoder);
  EXPECT_EQ(m.config.num_layers, 2);
  EXPECT_EQ(m.config.decoder_layers, 3);
  EXPECT_EQ(m.config.position, recipe::PositionEmbedding::Relative);
  EXPECT_EQ(m.config.relative_buckets, 8);
  EXPECT_EQ(m.config.activation, recipe::Activation::Geglu);
  EXPECT_EQ(m.config.norm, recipe::Norm::RmsNorm);
  EXPECT_FALSE(m.config.tie_embeddings);
  EXPECT_FALSE(m.head_from_embedding);
}

TEST(HuggingFaceT5Config, Transformers5sAlwaysTiedUnscaledHeadImportsAsACopy) {
  nlohmann::json c = t5_v11_config();
  c["tie_word_embeddings"] = true;
  c["scale_decoder_outputs"] = false;
  const HfModel m = hf_model_from_config(c, "dir/config.json");
  EXPECT_TRUE(m.head_from_embedding);
  EXPECT_FALSE(m.config.tie_embeddings);
}

TEST(HuggingFaceT5Config, WhatTheEngineDoesNotComputeIsOneLineNamingTheFile) {
  const auto with = [](const char* key, const nlohmann::json& value) {
    nlohmann::json c = t5_v11_config();
    if (value.is_null()) {
      c.erase(key);
    } else {
      c[key] = value;
    }
    return import_refusal(c);
  };
  for (const auto& [key, value, says] :
       std::vector<std::tuple<const char*, nlohmann::json, std::string>>{
           {"feed_forward_proj", nullptr, "feed_forward_proj is missing"},
           {"feed_forward_proj", "relu", "only T5 v1.1's gated-gelu"},
           {"feed_forward_proj", 7, "feed_forward_proj has the wrong type"},
           {"tie_word_embeddings", true, "the original T5's head"},
           {"relative_attention_num_buckets", 2, "expected at least 4"},
           {"relative_attention_max_distance", 4, "must exceed half the buckets"},
           {"num_heads", -1, "num_heads"},
           {"d_kv", "64", "d_kv"},
           {"vocab_size", 1e20, "vocab_size"},
           {"num_decoder_layers", 0, "num_decoder_layers"}}) {
    const std::string error = with(key, value);
    EXPECT_NE(error.find("dir/config.json: "), std::string::npos) << key << ": " << error;
    EXPECT_NE(error.find(says), std::string::npos) << key << ": " << error;
  }
}

}  // namespace
}  // namespace megatron::ckpt

namespace megatron::ckpt {
namespace {

// config.json files with every key the Hub's files carry (the sizes shrunk): GPT-2
// (openai-community/gpt2), a Llama with unscaled rotary positions (TinyLlama-1.1B's keys),
// Llama 3.1 as transformers 4.43 writes it and as transformers 5 does, and megatron-bert
// (nvidia/megatron-bert-cased-345m's keys). No silent import: each key is read, known to be
// harmless, or refused.
nlohmann::json hub_gpt2() {
  return nlohmann::json::parse(R"({"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"],
    "attn_pdrop": 0.1, "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256,
    "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 64,
    "n_embd": 16, "n_head": 4, "n_layer": 2, "n_positions": 64, "resid_pdrop": 0.1,
    "summary_activation": null, "summary_first_dropout": 0.1, "summary_proj_to_labels": true,
    "summary_type": "cls_index", "summary_use_proj": true,
    "task_specific_params": {"text-generation": {"do_sample": true, "max_length": 50}},
    "vocab_size": 50})");
}

nlohmann::json hub_llama() {
  return nlohmann::json::parse(R"({"architectures": ["LlamaForCausalLM"], "attention_bias": false,
    "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 24,
    "initializer_range": 0.02, "intermediate_size": 20, "max_position_embeddings": 64,
    "model_type": "llama", "num_attention_heads": 6, "num_hidden_layers": 2,
    "num_key_value_heads": 2, "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": null,
    "rope_theta": 10000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    "transformers_version": "4.35.0", "use_cache": true, "vocab_size": 50})");
}

nlohmann::json hub_llama31_transformers4() {
  nlohmann::json c = hub_llama();
  c["eos_token_id"] = {128001, 128008, 128009};
  c["rope_theta"] = 500000.0;
  c["mlp_bias"] = false;
  c["attention_dropout"] = 0.0;
  c["rope_scaling"] = {{"factor", 8.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192}, {"rope_type", "llama3"}};
  return c;
}

nlohmann::json hub_llama31_transformers5() {
  nlohmann::json c = hub_llama31_transformers4();
  c.erase("rope_scaling");
  c.erase("rope_theta");
  c.erase("torch_dtype");
  c["dtype"] = "bfloat16";
  c["rope_parameters"] = {{"rope_theta", 500000.0}, {"rope_type", "llama3"}, {"factor", 8.0},
                          {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                          {"original_max_position_embeddings", 8192}};
  return c;
}

nlohmann::json hub_megatron_bert() {
  return nlohmann::json::parse(R"({"architectures": ["MegatronBertForMaskedLM"],
    "attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
    "hidden_size": 16, "initializer_range": 0.02, "intermediate_size": 64, "layer_norm_eps": 1e-12,
    "max_position_embeddings": 64, "model_type": "megatron-bert", "num_attention_heads": 4,
    "num_hidden_layers": 2, "pad_token_id": 0, "position_embedding_type": "absolute",
    "tie_word_embeddings": true, "transformers_version": "4.48.0", "type_vocab_size": 2,
    "use_cache": true, "vocab_size": 50})");
}

TEST(HuggingFaceConfigKeys, EveryKeyOfTheHubsGpt2LlamaBertAndT5ConfigsIsUnderstood) {
  EXPECT_EQ(import_refusal(hub_gpt2()), "");
  EXPECT_EQ(import_refusal(hub_llama()), "");
  EXPECT_EQ(import_refusal(hub_megatron_bert()), "");
  nlohmann::json bert5 = hub_megatron_bert();  // transformers 5.25 writes these too
  bert5["add_cross_attention"] = false;
  bert5["is_decoder"] = false;
  bert5["bos_token_id"] = nullptr;
  EXPECT_EQ(import_refusal(bert5), "");
  nlohmann::json t5 = t5_v11_config();  // google/t5-v1_1's further keys
  const nlohmann::json more = nlohmann::json::parse(R"({"architectures": ["T5ForConditionalGeneration"],
      "decoder_start_token_id": 0, "dense_act_fn": "gelu_new", "eos_token_id": 1,
      "initializer_factor": 1.0, "is_encoder_decoder": true, "is_gated_act": true,
      "output_past": true, "pad_token_id": 0, "torch_dtype": "float32",
      "transformers_version": "4.27.0", "use_cache": true})");
  t5.update(more);
  EXPECT_EQ(import_refusal(t5), "");
}

TEST(HuggingFaceConfigKeys, AnUnknownKeyIsRefusedWithItsNameAndValue) {
  nlohmann::json c = hub_llama();
  c["sliding_window"] = 4096;
  EXPECT_EQ(import_refusal(c),
            "dir/config.json: sliding_window = 4096 is not understood by the import, and it may "
            "change what the model computes: the import refuses rather than drop it (if it does "
            "not change the model, remove it from config.json)");
  // The model's own code (trust_remote_code) may compute anything under a known model_type.
  nlohmann::json custom = hub_llama();
  custom["auto_map"] = {{"AutoModelForCausalLM", "modeling_custom.CustomLlama"}};
  EXPECT_THAT(import_refusal(custom), ::testing::HasSubstr("auto_map = {\"AutoModelForCausalLM\""));
  nlohmann::json g = hub_gpt2();
  g["scale_attn_by_inverse_layer_idx"] = true;
  EXPECT_THAT(import_refusal(g), ::testing::HasSubstr("scale_attn_by_inverse_layer_idx = true is not supported"));
}

TEST(HuggingFaceConfigKeys, Llama31sScaledRotaryPositionsImportInBothConfigLayouts) {
  for (const nlohmann::json& c : {hub_llama31_transformers4(), hub_llama31_transformers5()}) {
    EXPECT_EQ(import_refusal(c), "");
    const model::ModelConfig m = hf_model_from_config(c, "dir/config.json").config;
    EXPECT_EQ(m.rope_scaling, model::RopeScaling::Llama3);
    EXPECT_DOUBLE_EQ(m.rotary_base, 500000.0);
    EXPECT_DOUBLE_EQ(m.rope_scaling_factor, 8.0);
    EXPECT_DOUBLE_EQ(m.rope_low_freq_factor, 1.0);
    EXPECT_DOUBLE_EQ(m.rope_high_freq_factor, 4.0);
    EXPECT_EQ(m.rope_original_max_positions, 8192);
    // Exported again, the same scaling in transformers 4's layout (which 5 reads too).
    const nlohmann::json out = hf_config_json(HfArch::Llama, m, tensor::DType::F32);
    EXPECT_EQ(out["rope_scaling"]["rope_type"], "llama3");
    EXPECT_EQ(out["rope_scaling"]["original_max_position_embeddings"], 8192);
  }
}

TEST(HuggingFaceConfigKeys, RotaryScalingsTheEngineDoesNotComputeAreRefused) {
  nlohmann::json dynamic = hub_llama();
  dynamic["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 4.0}};
  EXPECT_THAT(import_refusal(dynamic), ::testing::HasSubstr("rope_type \"dynamic\" is not supported yet"));
  nlohmann::json odd = hub_llama31_transformers4();
  odd["rope_scaling"]["mscale"] = 1.2;
  EXPECT_THAT(import_refusal(odd), ::testing::HasSubstr("mscale = 1.2 is not understood"));
  nlohmann::json missing = hub_llama31_transformers4();
  missing["rope_scaling"].erase("low_freq_factor");
  EXPECT_THAT(import_refusal(missing), ::testing::HasSubstr("needs low_freq_factor"));
}

TEST(HuggingFaceConfigKeys, Transformers5sUnscaledRopeParametersGiveTheRotaryBase) {
  nlohmann::json c = hub_llama();
  c.erase("rope_theta");
  c.erase("rope_scaling");
  c["rope_parameters"] = {{"rope_theta", 500000.0}, {"rope_type", "default"}};
  EXPECT_DOUBLE_EQ(hf_model_from_config(c, "dir/config.json").config.rotary_base, 500000.0);
  c["rope_theta"] = 10000.0;  // both layouts, disagreeing
  EXPECT_THAT(import_refusal(c), ::testing::HasSubstr("rope_theta differs from the top-level rope_theta"));
  c.erase("rope_theta");
  c["rope_parameters"]["mrope_section"] = {16, 24, 24};
  EXPECT_THAT(import_refusal(c), ::testing::HasSubstr("mrope_section = [16,24,24] is not understood"));
}

// Qwen/Qwen2.5-0.5B's config.json keys (sizes shrunk), as transformers 4.43 wrote them, and as
// transformers 5 writes a Qwen2 (rope_parameters, layer_types, dtype).
nlohmann::json hub_qwen25() {
  return nlohmann::json::parse(R"({"architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0,
    "bos_token_id": 151643, "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 24,
    "initializer_range": 0.02, "intermediate_size": 20, "max_position_embeddings": 64,
    "max_window_layers": 24, "model_type": "qwen2", "num_attention_heads": 6,
    "num_hidden_layers": 2, "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
    "sliding_window": 32768, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
    "transformers_version": "4.40.1", "use_cache": true, "use_mrope": false,
    "use_sliding_window": false, "vocab_size": 50})");
}

TEST(HuggingFaceConfigKeys, Qwen2sKeysInBothLayoutsImportWithQkvBiases) {
  nlohmann::json c = hub_qwen25();
  EXPECT_EQ(import_refusal(c), "");
  const HfModel m = hf_model_from_config(c, "dir/config.json");
  EXPECT_EQ(m.arch, HfArch::Qwen2);
  EXPECT_TRUE(m.config.qkv_bias);
  EXPECT_FALSE(m.config.linear_bias);
  EXPECT_TRUE(m.config.tie_embeddings);
  EXPECT_DOUBLE_EQ(m.config.rotary_base, 1000000.0);
  nlohmann::json five = c;
  five.erase("rope_theta");
  five.erase("torch_dtype");
  five["dtype"] = "bfloat16";
  five["rope_parameters"] = {{"rope_theta", 1000000.0}, {"rope_type", "default"}};
  five["layer_types"] = {"full_attention", "full_attention"};
  EXPECT_EQ(import_refusal(five), "");
}

// Qwen2.5's long-context setting (its model cards: factor 4 over 32768 positions), in both layouts,
// and DeepSeek-V3-style mscale / mscale_all_dim; exported again with every setting spelled out.
TEST(HuggingFaceConfigKeys, YarnRopeScalingImportsWithItsAttentionFactorAndExportsAgain) {
  nlohmann::json c = hub_qwen25();
  c["rope_scaling"] = {{"factor", 4.0}, {"original_max_position_embeddings", 32768}, {"type", "yarn"}};
  EXPECT_EQ(import_refusal(c), "");
  const model::ModelConfig m = hf_model_from_config(c, "dir/config.json").config;
  EXPECT_EQ(m.rope_scaling, recipe::RopeScaling::Yarn);
  EXPECT_DOUBLE_EQ(m.rope_scaling_factor, 4.0);
  EXPECT_EQ(m.rope_original_max_positions, 32768);
  EXPECT_DOUBLE_EQ(m.rope_beta_fast, 32.0);
  EXPECT_DOUBLE_EQ(m.rope_beta_slow, 1.0);
  EXPECT_TRUE(m.rope_truncate);
  EXPECT_DOUBLE_EQ(m.rope_attention_factor, 0.1 * std::log(4.0) + 1.0);
  const nlohmann::json out = hf_config_json(HfArch::Qwen2, m, tensor::DType::F32);
  EXPECT_EQ(out["rope_scaling"]["rope_type"], "yarn");
  EXPECT_EQ(import_refusal(nlohmann::json(out)), "");
  nlohmann::json five = c;
  five.erase("rope_scaling");
  five.erase("rope_theta");
  five["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 1000000.0}, {"factor", 40.0},
                             {"original_max_position_embeddings", 4096}, {"mscale", 1.0},
                             {"mscale_all_dim", 1.0}, {"beta_fast", 32}, {"beta_slow", 1}};
  EXPECT_DOUBLE_EQ(hf_model_from_config(five, "dir/config.json").config.rope_attention_factor, 1.0);
  five["rope_parameters"]["mscale_all_dim"] = 0.5;
  EXPECT_DOUBLE_EQ(hf_model_from_config(five, "dir/config.json").config.rope_attention_factor,
                   (0.1 * std::log(40.0) + 1.0) / (0.05 * std::log(40.0) + 1.0));
  five["rope_parameters"]["truncate"] = "no";
  EXPECT_THAT(import_refusal(five), ::testing::HasSubstr("truncate: expected true or false"));
}

TEST(HuggingFaceConfigKeys, Qwen2WithSlidingWindowsOnIsRefused) {
  nlohmann::json c = hub_qwen25();
  c["use_sliding_window"] = true;
  EXPECT_THAT(import_refusal(c), ::testing::HasSubstr("use_sliding_window = true is not supported"));
  c["use_sliding_window"] = false;
  c["layer_types"] = {"sliding_attention", "full_attention"};
  EXPECT_THAT(import_refusal(c), ::testing::HasSubstr("layer_types"));
  // Multimodal rotary sections (Qwen2-VL) are another model.
  nlohmann::json m = hub_qwen25();
  m["use_mrope"] = true;
  EXPECT_THAT(import_refusal(m), ::testing::HasSubstr("use_mrope = true is not supported"));
}

// Qwen/Qwen3-0.6B's config.json keys (sizes shrunk; head_dim apart from hidden / heads as there),
// as transformers 4.51 wrote them.
nlohmann::json hub_qwen3() {
  return nlohmann::json::parse(R"({"architectures": ["Qwen3ForCausalLM"], "attention_bias": false,
    "attention_dropout": 0.0, "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 8,
    "hidden_act": "silu", "hidden_size": 24, "initializer_range": 0.02, "intermediate_size": 20,
    "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
    "num_attention_heads": 6, "num_hidden_layers": 2, "num_key_value_heads": 2,
    "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
    "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
    "use_cache": true, "use_sliding_window": false, "vocab_size": 50})");
}

TEST(HuggingFaceConfigKeys, Qwen3sKeysInBothLayoutsImportWithQkNormsAndExportAgain) {
  const nlohmann::json c = hub_qwen3();
  EXPECT_EQ(import_refusal(c), "");
  const HfModel m = hf_model_from_config(c, "dir/config.json");
  EXPECT_EQ(m.arch, HfArch::Qwen3);
  EXPECT_TRUE(m.config.qk_norm);
  EXPECT_FALSE(m.config.qkv_bias);
  EXPECT_EQ(m.config.head_dim, 8);
  EXPECT_DOUBLE_EQ(m.config.rotary_base, 1000000.0);
  EXPECT_EQ(hf_architecture(m.config), HfArch::Qwen3);
  const nlohmann::json out = hf_config_json(HfArch::Qwen3, m.config, tensor::DType::F32);
  EXPECT_EQ(out["model_type"], "qwen3");
  EXPECT_EQ(out["head_dim"], 8);
  EXPECT_EQ(import_refusal(nlohmann::json(out)), "");
  // What transformers 5.25 writes for the same model.
  nlohmann::json five = c;
  for (const char* key : {"rope_theta", "rope_scaling", "torch_dtype"}) five.erase(key);
  five["dtype"] = "bfloat16";
  five["pad_token_id"] = nullptr;
  five["rope_parameters"] = {{"rope_theta", 1000000.0}, {"rope_type", "default"}};
  five["layer_types"] = {"full_attention", "full_attention"};
  EXPECT_EQ(import_refusal(five), "");
  nlohmann::json biased = c;
  biased["attention_bias"] = true;  // biases on q, k, v and o: no Qwen3 has them
  EXPECT_THAT(import_refusal(biased), ::testing::HasSubstr("attention_bias = true is not supported"));
  nlohmann::json windowed = c;
  windowed["use_sliding_window"] = true;
  EXPECT_THAT(import_refusal(windowed), ::testing::HasSubstr("use_sliding_window = true is not supported"));
}

// mistralai/Mistral-7B-v0.1's config.json keys (sizes shrunk), and v0.3's (no window).
nlohmann::json hub_mistral_v01() {
  return nlohmann::json::parse(R"({"architectures": ["MistralForCausalLM"], "bos_token_id": 1,
    "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 24, "initializer_range": 0.02,
    "intermediate_size": 20, "max_position_embeddings": 32768, "model_type": "mistral",
    "num_attention_heads": 6, "num_hidden_layers": 2, "num_key_value_heads": 2, "rms_norm_eps": 1e-05,
    "rope_theta": 10000.0, "sliding_window": 4096, "tie_word_embeddings": false,
    "torch_dtype": "bfloat16", "transformers_version": "4.34.0.dev0", "use_cache": true,
    "vocab_size": 50})");
}

TEST(HuggingFaceConfigKeys, MistralsWindowBecomesTheLongestSequenceAndExportsAgain) {
  EXPECT_EQ(import_refusal(hub_mistral_v01()), "");
  const HfModel m = hf_model_from_config(hub_mistral_v01(), "dir/config.json");
  EXPECT_EQ(m.arch, HfArch::Mistral);
  EXPECT_EQ(m.config.sliding_window, 4096);
  EXPECT_EQ(m.config.longest_sequence(), 4096);
  EXPECT_LE(m.config.seq_length, 4096);
  EXPECT_EQ(hf_architecture(m.config), HfArch::Mistral);
  const nlohmann::json out = hf_config_json(HfArch::Mistral, m.config, tensor::DType::F32);
  EXPECT_EQ(out["model_type"], "mistral");
  EXPECT_EQ(out["sliding_window"], 4096);
  nlohmann::json v03 = hub_mistral_v01();  // v0.2 on: no window, a larger base
  v03["sliding_window"] = nullptr;
  v03["rope_theta"] = 1000000.0;
  v03["head_dim"] = 4;
  v03["attention_dropout"] = 0.0;
  const HfModel full = hf_model_from_config(v03, "dir/config.json");
  EXPECT_EQ(full.config.sliding_window, 0);
  EXPECT_EQ(full.config.longest_sequence(), 32768);
  nlohmann::json odd = hub_mistral_v01();
  odd["attention_bias"] = true;
  EXPECT_THAT(import_refusal(odd), ::testing::HasSubstr("attention_bias = true is not understood"));
}

TEST(HuggingFaceConfigKeys, Gpt2sNctxMustBeItsPositions) {
  nlohmann::json c = hub_gpt2();
  c["n_ctx"] = 32;
  EXPECT_THAT(import_refusal(c), ::testing::HasSubstr("n_ctx = 32: differs from n_positions (64)"));
}

}  // namespace
}  // namespace megatron::ckpt
