#include "ckpt/hf_recipe.hpp"

#include <nlohmann/json.hpp>
#include <optional>

#include "ckpt/hf_tokenizer.hpp"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <charconv>
#include <map>

#include "ckpt/model_limits.hpp"
#include "core/error.hpp"
#include "core/printable.hpp"
#include "recipe/enum_names.hpp"

namespace megatron::ckpt {

using recipe::name_of;

std::string hf_recipe_yaml(const HfModel& m, tensor::DType dtype, const std::string& source) {
  const model::ModelConfig& c = m.config;
  const bool rotary = c.position == recipe::PositionEmbedding::Rotary;
  const bool bert = c.arch == recipe::Arch::Bert;
  const bool t5 = c.arch == recipe::Arch::T5;
  auto b = [](bool v) { return v ? "true" : "false"; };
  std::string y = fmt::format(
      "# Imported from Hugging Face {} ({}). Every model key is explicit; {}\n"
      "# and the schedule a short fine-tuning run: set data.prefixes and training.* to train.\n",
      source, architecture_name(m.arch),
      bert ? "BERT trains on sentence-split data\n# (docs/bert.md): set data.vocab_file too,"
           : "the data is mock");
  y += fmt::format("model:\n  arch: {}\n", name_of(c.arch));
  if (bert) y += fmt::format("  bert_binary_head: {}\n", b(c.binary_head));
  y += fmt::format("  num_layers: {}\n  hidden_size: {}\n  num_attention_heads: {}\n", c.num_layers,
                   c.hidden, c.heads);
  if (t5) y += fmt::format("  decoder_num_layers: {}\n", c.decoder_layers);
  y += fmt::format("  num_query_groups: {}\n  kv_channels: {}\n  ffn_hidden_size: {}\n", c.groups,
                   c.head_dim, c.ffn);
  y += fmt::format("  vocab_size: {}\n  make_vocab_size_divisible_by: 128\n", c.vocab);
  if (t5) {
    y += fmt::format("  position_embedding: relative\n  relative_attention_num_buckets: {}\n"
                     "  relative_attention_max_distance: {}\n",
                     c.relative_buckets, c.relative_max_distance);
  } else {
    y += fmt::format("  max_position_embeddings: {}\n  position_embedding: {}\n", c.max_positions,
                     name_of(c.position));
  }
  if (rotary) {
    y += fmt::format("  rotary_base: {}\n  rotary_percent: {}\n", c.rotary_base, c.rotary_percent);
  }
  y += fmt::format("  normalization: {}\n  norm_epsilon: {}\n  activation: {}\n", name_of(c.norm),
                   c.norm_eps, name_of(c.activation));
  y += fmt::format("  tie_embeddings: {}\n  add_bias_linear: {}\n  add_qkv_bias: {}\n",
                   b(c.tie_embeddings), b(c.linear_bias), b(c.qkv_bias));
  y += fmt::format("  hidden_dropout: {}\n  attention_dropout: {}\n  init_method_std: {}\n",
                   c.hidden_dropout, c.attention_dropout, c.init_std);
  // The directory's own tokenizer files when it has them (as `convert --to hf` writes them), so
  // that eval and generate need no tokenizer flags.
  const std::optional<HfTokenizerFiles> tok = find_hf_tokenizer(source);
  const std::string kind = tok ? std::string(name_of(tok->kind))
                           : bert ? "bert-wordpiece-lowercase"
                           : rotary || t5 ? "sentencepiece" : "gpt2-bpe";
  y += fmt::format("data:\n  seq_length: {}\n  tokenizer: {}\n", c.seq_length, kind);
  if (t5) y += fmt::format("  decoder_seq_length: {}\n", c.decoder_seq_length);
  if (tok && !tok->vocab_file.empty()) y += fmt::format("  vocab_file: {}\n", nlohmann::json(tok->vocab_file).dump());
  if (tok && !tok->merge_file.empty()) y += fmt::format("  merge_file: {}\n", nlohmann::json(tok->merge_file).dump());
  if (tok && !tok->tokenizer_model.empty()) {
    y += fmt::format("  tokenizer_model: {}\n", nlohmann::json(tok->tokenizer_model).dump());
  }
  if (!bert) y += "  mock: true\n";
  y += fmt::format("precision:\n  dtype: {}\n", tensor::name(dtype));
  y += "training:\n"
       "  micro_batch_size: 1\n"
       "  global_batch_size: 8\n"
       "  train_iters: 100\n"
       "  optimizer: adamw\n"
       "  lr: 1.0e-5\n"
       "  min_lr: 1.0e-6\n"
       "  lr_decay_style: cosine\n"
       "  lr_warmup_iters: 10\n"
       "  weight_decay: 0.1\n"
       "  clip_grad: 1.0\n"
       "  seed: 1234\n"
       "cluster:\n"
       "  nodes: 1\n"
       "  gpus_per_node: 1\n"
       "  hardware: cpu\n";
  return y;
}

namespace {

class Fields {
 public:
  explicit Fields(const CheckpointMeta& meta) : fields_(meta.model.begin(), meta.model.end()) {}
  const std::string& text(const std::string& key) const {
    const auto it = fields_.find(key);
    if (it == fields_.end()) throw UserError("checkpoint metadata has no model field " + key);
    return it->second;
  }
  int64_t integer(const std::string& key) const {
    const std::string& t = text(key);
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (ec != std::errc() || end != t.data() + t.size()) {
      throw UserError(fmt::format("checkpoint field {} = \"{}\" is not an integer", key, printable(t)));
    }
    return v;
  }
  // A model size: an integer in [1, max].
  int64_t size(const std::string& key, int64_t max) const {
    return check_size(integer(key), max, "checkpoint", key);
  }
  double number(const std::string& key) const {
    try {
      return std::stod(text(key));
    } catch (const std::logic_error&) {
      throw UserError(
          fmt::format("checkpoint field {} = \"{}\" is not a number", key, printable(text(key))));
    }
  }
  bool flag(const std::string& key) const {
    if (text(key) == "true") return true;
    if (text(key) == "false") return false;
    throw UserError(
        fmt::format("checkpoint field {} = \"{}\" is not true/false", key, printable(text(key))));
  }
  template <class E>
  E choice(const std::string& key) const {
    if (auto v = recipe::parse_enum<E>(text(key))) return *v;
    throw UserError(fmt::format("checkpoint field {} = \"{}\" is not a known value", key,
                                printable(text(key))));
  }

 private:
  std::map<std::string, std::string> fields_;
};

// A scalar of the stored recipe, or `fallback` where it is absent or null (older recipes).
template <class T>
T recipe_value(const YAML::Node& recipe, const char* section, const char* key, T fallback) {
  const YAML::Node node = recipe[section] ? recipe[section][key] : YAML::Node();
  if (!node || node.IsNull()) return fallback;
  try {
    return node.as<T>();
  } catch (const YAML::Exception&) {
    throw UserError(fmt::format("checkpoint recipe: {}.{} = {} is not readable", section, key,
                                printable(YAML::Dump(node))));
  }
}

}  // namespace

model::ModelConfig gpt_config_from_meta(const CheckpointMeta& meta, int64_t padded_vocab) {
  const Fields f(meta);
  YAML::Node recipe;
  try {
    recipe = YAML::Load(meta.recipe);
  } catch (const YAML::Exception& e) {
    throw UserError("checkpoint recipe is not YAML: " + printable(e.what()));
  }
  if (!recipe.IsMap()) recipe = YAML::Node(YAML::NodeType::Map);
  model::ModelConfig c;
  const std::string arch = model_field(meta, "model.arch").value_or("gpt");
  if (arch == "bert") {
    c.arch = recipe::Arch::Bert;
    c.causal = false;
    c.lm_head_transform = true;
    c.output_bias = true;
    c.binary_head = f.flag("model.bert_binary_head");
    c.token_types = c.binary_head ? 2 : 0;
  } else if (arch == "t5") {
    c.arch = recipe::Arch::T5;
    c.causal = false;
    c.encoder_decoder = true;
    c.decoder_layers = f.size("model.decoder_num_layers", kMaxLayers);
    c.decoder_seq_length = recipe_value<int64_t>(recipe, "data", "decoder_seq_length", 0);
  } else if (arch != "gpt") {
    throw UserError(fmt::format("checkpoint field model.arch = \"{}\": only gpt, bert and t5 "
                                "checkpoints convert", printable(arch)));
  }
  c.num_layers = f.size("model.num_layers", kMaxLayers);
  c.hidden = f.size("model.hidden_size", kMaxHidden);
  c.heads = f.size("model.num_attention_heads", kMaxHeads);
  c.groups = f.size("model.num_query_groups", c.heads);
  if (c.heads % c.groups != 0) {
    throw UserError(fmt::format("checkpoint field model.num_query_groups = {} does not divide "
                                "model.num_attention_heads = {}",
                                c.groups, c.heads));
  }
  c.head_dim = f.size("model.kv_channels", kMaxHeadDim);
  c.ffn = f.size("model.ffn_hidden_size", kMaxFfn);
  c.vocab = f.size("model.vocab_size", kMaxVocab);
  c.padded_vocab = padded_vocab;
  c.position = f.choice<recipe::PositionEmbedding>("model.position_embedding");
  c.seq_length = recipe_value<int64_t>(recipe, "data", "seq_length", 0);
  if (c.position == recipe::PositionEmbedding::Learned) {
    c.max_positions = f.size("model.max_position_embeddings", kMaxPositions);
  } else if (c.position == recipe::PositionEmbedding::Relative) {
    c.relative_buckets = f.size("model.relative_attention_num_buckets", 1024);
    c.relative_max_distance = f.size("model.relative_attention_max_distance", kMaxPositions);
    c.max_positions = c.seq_length > 0 ? c.seq_length : 512;
  } else {
    c.rotary_percent = f.number("model.rotary_percent");
    c.rotary_base = f.number("model.rotary_base");
    // Rotary positions have no table: the recipe's limit (else its sequence length) is what
    // Hugging Face's max_position_embeddings means.
    c.max_positions =
        recipe_value<int64_t>(recipe, "model", "max_position_embeddings", c.seq_length);
    if (c.max_positions <= 0) c.max_positions = 2048;  // a recipe-less checkpoint: Llama's default
  }
  c.norm = f.choice<recipe::Norm>("model.normalization");
  c.activation = f.choice<recipe::Activation>("model.activation");
  c.tie_embeddings = f.flag("model.tie_embeddings");
  c.output_bias = c.arch == recipe::Arch::Bert || (c.arch == recipe::Arch::T5 && c.tie_embeddings);
  c.linear_bias = f.flag("model.add_bias_linear");
  c.qkv_bias = f.flag("model.add_qkv_bias");
  c.norm_eps = recipe_value<double>(recipe, "model", "norm_epsilon", 1e-5);
  c.hidden_dropout = recipe_value<double>(recipe, "model", "hidden_dropout", 0.0);
  c.attention_dropout = recipe_value<double>(recipe, "model", "attention_dropout", 0.0);
  c.init_std = recipe_value<double>(recipe, "model", "init_method_std", 0.02);
  if (c.max_positions > kMaxPositions) {
    throw UserError(fmt::format("checkpoint recipe: model.max_position_embeddings = {} is out of "
                                "range: expected 1 to {}",
                                c.max_positions, kMaxPositions));
  }
  checked_parameter_count(c, "checkpoint");
  return c;
}

}  // namespace megatron::ckpt
