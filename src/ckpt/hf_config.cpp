#include "ckpt/hf_config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <set>
#include <string_view>

#include "ckpt/model_limits.hpp"
#include "core/error.hpp"
#include "core/printable.hpp"
#include "recipe/enum_names.hpp"

namespace megatron::ckpt {

using recipe::Activation;
using recipe::Norm;
using recipe::PositionEmbedding;

namespace {

constexpr int64_t kVocabMultiple = 128;  // model.make_vocab_size_divisible_by's default
constexpr int64_t kMaxSeqLength = 2048;  // the imported recipe's data.seq_length at most

// Checks one field of `c` against what `arch` needs; the message names the recipe key.
void need(bool ok, std::string_view key, const std::string& value, HfArch arch,
          std::string_view why, std::string_view wanted) {
  if (ok) return;
  throw UserError(fmt::format(
      "no Hugging Face architecture matches this model: {} is {}, but {} (the architecture for "
      "{}) needs {}",
      key, value, architecture_name(arch), why, wanted));
}

std::string text(bool v) { return v ? "true" : "false"; }

std::string torch_dtype(tensor::DType dtype) {
  switch (dtype) {
    case tensor::DType::Bf16:
      return "bfloat16";
    case tensor::DType::F16:
      return "float16";
    default:
      return "float32";
  }
}

// Reads config.json keys with the defaults transformers' config classes give them.
class Keys {
 public:
  Keys(const nlohmann::json& j, const std::string& where) : j_(j), where_(where) {}
  template <class T>
  T get(const std::string& key, std::optional<T> fallback = std::nullopt) const {
    read_.insert(key);
    if (!j_.contains(key) || j_.at(key).is_null()) {
      if (fallback) return *fallback;
      throw UserError(fmt::format("{}: {} is missing", where_, key));
    }
    try {
      return j_.at(key).get<T>();
    } catch (const nlohmann::json::exception&) {
      throw UserError(
          fmt::format("{}: {} has the wrong type ({})", where_, key, printable(j_.at(key).dump())));
    }
  }
  // A size: a JSON integer (not 768.0, nor a number past int64) in [1, max].
  int64_t size(const std::string& key, int64_t max, std::optional<int64_t> fallback = std::nullopt) const {
    if (!has(key)) return check_size(get<int64_t>(key, fallback), max, where_, key);
    const nlohmann::json& v = j_.at(key);
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX))) {
      throw UserError(fmt::format("{}: {} = {}: expected an integer from 1 to {}", where_, key,
                                  printable(v.dump()), max));
    }
    return check_size(v.get<int64_t>(), max, where_, key);
  }
  // A real number for which `ok` holds (`expected` says which).
  double real(const std::string& key, double fallback, const std::function<bool(double)>& ok,
              std::string_view expected) const {
    const double v = get<double>(key, fallback);
    if (!std::isfinite(v) || !ok(v)) {
      throw UserError(fmt::format("{}: {} = {}: expected {}", where_, key,
                                  printable(j_.at(key).dump()), expected));
    }
    return v;
  }
  bool has(const std::string& key) const {
    read_.insert(key);
    return j_.contains(key) && !j_.at(key).is_null();
  }
  // The value of a key read without the checks above (an object such as rope_parameters).
  const nlohmann::json& raw(const std::string& key) const {
    read_.insert(key);
    return j_.at(key);
  }
  // A setting the engine has no counterpart for: only its neutral value is accepted.
  template <class T>
  void neutral(const std::string& key, const T& value) const {
    if (has(key) && j_.at(key) != nlohmann::json(value)) {
      throw UserError(fmt::format("{}: {} = {} is not supported (the engine computes {} = {})",
                                  where_, key, printable(j_.at(key).dump()), key,
                                  nlohmann::json(value).dump()));
    }
  }
  // No silent import: every key the family's reader did not read must be one known to leave the
  // computed function alone (`harmless`, or the metadata every config carries); any other key
  // might change the model, so it is refused with its name and value, never dropped.
  void refuse_unread(std::initializer_list<std::string_view> harmless) const {
    for (const auto& [key, value] : j_.items()) {
      if (read_.contains(key) || is_metadata(key) ||
          std::find(harmless.begin(), harmless.end(), key) != harmless.end()) {
        continue;
      }
      throw UserError(fmt::format(
          "{}: {} = {} is not understood by the import, and it may change what the model "
          "computes: the import refuses rather than drop it (if it does not change the model, "
          "remove it from config.json)",
          where_, key, printable(value.dump())));
    }
  }
  [[noreturn]] void bad(const std::string& key, const std::string& why) const {
    throw UserError(fmt::format("{}: {} = {}: {}", where_, key, printable(j_.at(key).dump()), why));
  }
  // A model the file describes that the engine does not compute, in one line naming the file.
  [[noreturn]] void refuse(const std::string& why) const {
    throw UserError(fmt::format("{}: {}", where_, why));
  }

 private:
  // What transformers' PretrainedConfig writes into every config.json: names, token ids,
  // generation defaults, task heads and bookkeeping, none of which changes the network's function.
  // Not auto_map: it points transformers at the model's own code, which may compute anything.
  static bool is_metadata(std::string_view key) {
    static constexpr std::string_view kMetadata[] = {
        "_name_or_path", "architectures", "model_type", "transformers_version",
        "torch_dtype", "dtype", "use_cache", "return_dict", "output_hidden_states",
        "output_attentions", "torchscript", "use_bfloat16", "tf_legacy_loss", "pruned_heads",
        "chunk_size_feed_forward", "is_decoder", "bos_token_id", "eos_token_id", "pad_token_id",
        "sep_token_id", "decoder_start_token_id", "id2label", "label2id", "num_labels",
        "problem_type", "finetuning_task", "tokenizer_class", "prefix", "task_specific_params",
        "max_length", "min_length", "do_sample", "early_stopping", "num_beams",
        "num_beam_groups", "diversity_penalty", "temperature", "top_k", "top_p", "typical_p",
        "repetition_penalty", "length_penalty", "no_repeat_ngram_size",
        "encoder_no_repeat_ngram_size", "bad_words_ids", "num_return_sequences", "output_scores",
        "return_dict_in_generate", "forced_bos_token_id", "forced_eos_token_id",
        "remove_invalid_values", "exponential_decay_length_penalty", "suppress_tokens",
        "begin_suppress_tokens", "cross_attention_hidden_size", "tie_encoder_decoder",
        "initializer_range", "initializer_factor", "classifier_dropout"};
    return std::find(std::begin(kMetadata), std::end(kMetadata), key) != std::end(kMetadata);
  }

  const nlohmann::json& j_;
  const std::string& where_;
  mutable std::set<std::string> read_;  // keys a reader looked at, whatever it found
};

int64_t round_up(int64_t n, int64_t multiple) { return (n + multiple - 1) / multiple * multiple; }

bool positive(double v) { return v > 0; }
bool probability(double v) { return v >= 0 && v < 1; }
bool non_negative(double v) { return v >= 0; }

model::ModelConfig gpt2_from(const Keys& k) {
  model::ModelConfig c;
  c.num_layers = k.size("n_layer", kMaxLayers);
  c.hidden = k.size("n_embd", kMaxHidden);
  c.heads = k.size("n_head", kMaxHeads);
  if (c.hidden % c.heads != 0) k.bad("n_head", "must divide n_embd");
  c.groups = c.heads;
  c.head_dim = c.hidden / c.heads;
  c.ffn = k.size("n_inner", kMaxFfn, 4 * c.hidden);
  c.vocab = k.size("vocab_size", kMaxVocab);
  c.max_positions = k.size("n_positions", kMaxPositions);
  c.position = PositionEmbedding::Learned;
  c.norm = Norm::LayerNorm;
  c.norm_eps = k.real("layer_norm_epsilon", 1e-5, positive, "a positive number");
  const auto act = k.get<std::string>("activation_function", std::string("gelu_new"));
  // gelu_new and gelu_pytorch_tanh are both the tanh approximation (different code, same math).
  if (act == "gelu_new" || act == "gelu_pytorch_tanh" || act == "gelu_fast") {
    c.activation = Activation::GeluTanh;
  } else if (act == "gelu") {
    c.activation = Activation::Gelu;
  } else {
    k.bad("activation_function", "the engine computes gelu and gelu_new (tanh) only");
  }
  c.tie_embeddings = k.get<bool>("tie_word_embeddings", true);
  c.linear_bias = c.qkv_bias = true;
  c.hidden_dropout = k.real("resid_pdrop", 0.1, probability, "a probability in [0, 1)");
  c.attention_dropout = k.real("attn_pdrop", 0.1, probability, "a probability in [0, 1)");
  c.init_std = k.real("initializer_range", 0.02, non_negative, "a number >= 0");
  k.neutral("scale_attn_weights", true);
  k.neutral("scale_attn_by_inverse_layer_idx", false);
  k.neutral("add_cross_attention", false);
  // n_ctx is n_positions under its old name; embd_pdrop is dropout, a training setting (the
  // import keeps resid_pdrop's); summary_* configure GPT2DoubleHeadsModel's classifier, which
  // an LM import does not read; reorder_and_upcast_attn changes only rounding.
  if (k.has("n_ctx") && k.size("n_ctx", kMaxPositions) != c.max_positions) {
    k.bad("n_ctx", fmt::format("differs from n_positions ({})", c.max_positions));
  }
  k.refuse_unread({"embd_pdrop", "summary_type", "summary_use_proj", "summary_activation",
                   "summary_proj_to_labels", "summary_first_dropout", "reorder_and_upcast_attn"});
  return c;
}

model::ModelConfig megatron_bert_from(const Keys& k) {
  model::ModelConfig c;
  c.arch = recipe::Arch::Bert;
  c.causal = false;
  c.lm_head_transform = c.output_bias = c.binary_head = true;
  c.num_layers = k.size("num_hidden_layers", kMaxLayers);
  c.hidden = k.size("hidden_size", kMaxHidden);
  c.heads = k.size("num_attention_heads", kMaxHeads);
  if (c.hidden % c.heads != 0) k.bad("num_attention_heads", "must divide hidden_size");
  c.groups = c.heads;
  c.head_dim = c.hidden / c.heads;
  c.ffn = k.size("intermediate_size", kMaxFfn);
  c.vocab = k.size("vocab_size", kMaxVocab);
  c.max_positions = k.size("max_position_embeddings", kMaxPositions, 512);
  c.token_types = k.size("type_vocab_size", 2, 2);
  if (c.token_types != 2) k.bad("type_vocab_size", "Megatron's BERT has 2 token types");
  c.position = PositionEmbedding::Learned;
  c.norm = Norm::LayerNorm;
  c.norm_eps = k.real("layer_norm_eps", 1e-12, positive, "a positive number");
  c.activation = Activation::Gelu;
  c.tie_embeddings = true;
  c.linear_bias = c.qkv_bias = true;
  c.hidden_dropout = k.real("hidden_dropout_prob", 0.1, probability, "a probability in [0, 1)");
  c.attention_dropout =
      k.real("attention_probs_dropout_prob", 0.1, probability, "a probability in [0, 1)");
  c.init_std = k.real("initializer_range", 0.02, non_negative, "a number >= 0");
  k.neutral("hidden_act", "gelu");
  k.neutral("position_embedding_type", "absolute");
  k.neutral("tie_word_embeddings", true);
  k.neutral("add_cross_attention", false);
  k.refuse_unread({});
  return c;
}

// Rotary positions from transformers 4's rope_theta and rope_scaling or transformers 5's
// rope_parameters: the base, and the scaling (rope_type default, linear or llama3, with the
// settings transformers reads for each). Any other rope_type (dynamic, longrope, ...) or
// setting changes every position's angles in a way the engine does not compute, so it is
// refused, never dropped.
void read_rotary(const Keys& k, model::ModelConfig& c) {
  const auto scaled = [&](const std::string& key, const nlohmann::json& p) {
    if (!p.is_object()) k.bad(key, "expected an object");
    const nlohmann::json type = p.contains("rope_type") ? p["rope_type"]
                                : p.contains("type")    ? p["type"]
                                                        : nlohmann::json("default");
    std::vector<std::string_view> allowed{"rope_type", "type", "rope_theta"};
    const auto number = [&](const char* name, double fallback, bool required) {
      if (!p.contains(name)) {
        if (required) k.bad(key, fmt::format("rope_type {} needs {}", type.dump(), name));
        return fallback;
      }
      const nlohmann::json& v = p[name];
      if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0) {
        k.bad(key, fmt::format("{}: expected a positive number", name));
      }
      return v.get<double>();
    };
    if (type == "linear") {
      c.rope_scaling = model::RopeScaling::Linear;
      c.rope_scaling_factor = number("factor", 1.0, true);
      allowed.push_back("factor");
    } else if (type == "llama3") {
      c.rope_scaling = model::RopeScaling::Llama3;
      c.rope_scaling_factor = number("factor", 8.0, true);
      c.rope_low_freq_factor = number("low_freq_factor", 1.0, true);
      c.rope_high_freq_factor = number("high_freq_factor", 4.0, true);
      const double original = number("original_max_position_embeddings", 8192.0, true);
      if (original != std::floor(original) || original > kMaxPositions) {
        k.bad(key, "original_max_position_embeddings: expected a whole number of positions");
      }
      c.rope_original_max_positions = static_cast<int64_t>(original);
      if (c.rope_high_freq_factor <= c.rope_low_freq_factor) {
        k.bad(key, "high_freq_factor must exceed low_freq_factor");
      }
      allowed.insert(allowed.end(), {"factor", "low_freq_factor", "high_freq_factor",
                                     "original_max_position_embeddings"});
    } else if (type == "yarn") {
      // transformers' _compute_yarn_parameters: factor, the trained context (the model's own
      // positions when absent), the ramp's beta_fast / beta_slow and truncate, and the attention
      // factor given, or from mscale / mscale_all_dim, or from the factor.
      c.rope_scaling = model::RopeScaling::Yarn;
      c.rope_scaling_factor = number("factor", 1.0, true);
      const double original = number("original_max_position_embeddings",
                                     double(k.size("max_position_embeddings", kMaxPositions, 32768)), false);
      if (original != std::floor(original) || original > kMaxPositions) {
        k.bad(key, "original_max_position_embeddings: expected a whole number of positions");
      }
      c.rope_original_max_positions = static_cast<int64_t>(original);
      c.rope_beta_fast = number("beta_fast", 32.0, false);
      c.rope_beta_slow = number("beta_slow", 1.0, false);
      if (p.contains("truncate")) {
        if (!p["truncate"].is_boolean()) k.bad(key, "truncate: expected true or false");
        c.rope_truncate = p["truncate"].get<bool>();
      }
      const double mscale = number("mscale", 0.0, false);
      const double mscale_all_dim = number("mscale_all_dim", 0.0, false);
      c.rope_attention_factor =
          p.contains("attention_factor") ? number("attention_factor", 1.0, true)
          : mscale > 0 && mscale_all_dim > 0
              ? model::yarn_attention_factor(c.rope_scaling_factor, mscale) /
                    model::yarn_attention_factor(c.rope_scaling_factor, mscale_all_dim)
              : model::yarn_attention_factor(c.rope_scaling_factor);
      allowed.insert(allowed.end(), {"factor", "original_max_position_embeddings", "beta_fast",
                                     "beta_slow", "truncate", "mscale", "mscale_all_dim",
                                     "attention_factor"});
    } else if (type != "default") {
      k.bad(key, fmt::format("rope_type {} is not supported yet (default, linear, llama3 and yarn are): "
                             "imported without it the model would compute something else",
                             printable(type.dump())));
    }
    for (const auto& [name, value] : p.items()) {
      if (std::find(allowed.begin(), allowed.end(), name) == allowed.end() &&
          !(name == "partial_rotary_factor" && value == nlohmann::json(1.0))) {
        k.bad(key, fmt::format("{} = {} is not understood by the import", name,
                               printable(value.dump())));
      }
    }
  };
  double base = k.real("rope_theta", 10000.0, positive, "a positive number");
  if (k.has("rope_scaling")) scaled("rope_scaling", k.raw("rope_scaling"));
  if (k.has("rope_parameters")) {
    const nlohmann::json& p = k.raw("rope_parameters");
    scaled("rope_parameters", p);
    if (p.contains("rope_theta")) {
      const nlohmann::json& theta = p["rope_theta"];
      if (!theta.is_number() || !std::isfinite(theta.get<double>()) || theta.get<double>() <= 0) {
        k.bad("rope_parameters", "rope_theta: expected a positive number");
      }
      if (k.has("rope_theta") && theta.get<double>() != base) {
        k.bad("rope_parameters", fmt::format("rope_theta differs from the top-level rope_theta ({})", base));
      }
      base = theta.get<double>();
    }
  }
  c.rotary_base = base;
}

// What Llama-shaped families share: rotary positions, RMSNorm, SwiGLU, silu, grouped-query
// attention; no biases until the family says otherwise.
model::ModelConfig llama_shape_from(const Keys& k, int64_t default_positions) {
  model::ModelConfig c;
  c.num_layers = k.size("num_hidden_layers", kMaxLayers);
  c.hidden = k.size("hidden_size", kMaxHidden);
  c.heads = k.size("num_attention_heads", kMaxHeads);
  c.groups = k.size("num_key_value_heads", c.heads, c.heads);
  if (c.heads % c.groups != 0) k.bad("num_key_value_heads", "must divide num_attention_heads");
  if (!k.has("head_dim") && c.hidden % c.heads != 0) {
    k.bad("num_attention_heads", "must divide hidden_size");
  }
  c.head_dim = k.size("head_dim", kMaxHeadDim, c.hidden / c.heads);
  c.ffn = k.size("intermediate_size", kMaxFfn);
  c.vocab = k.size("vocab_size", kMaxVocab);
  c.max_positions = k.size("max_position_embeddings", kMaxPositions, default_positions);
  c.position = PositionEmbedding::Rotary;
  read_rotary(k, c);
  c.rotary_percent = 1.0;
  c.norm = Norm::RmsNorm;
  c.norm_eps = k.real("rms_norm_eps", 1e-6, positive, "a positive number");
  c.activation = Activation::Swiglu;
  c.tie_embeddings = k.get<bool>("tie_word_embeddings", false);
  c.linear_bias = c.qkv_bias = false;
  c.hidden_dropout = 0.0;
  c.attention_dropout = k.real("attention_dropout", 0.0, probability, "a probability in [0, 1)");
  c.init_std = k.real("initializer_range", 0.02, non_negative, "a number >= 0");
  k.neutral("hidden_act", "silu");
  return c;
}

model::ModelConfig llama_from(const Keys& k) {
  model::ModelConfig c = llama_shape_from(k, 2048);
  k.neutral("attention_bias", false);
  k.neutral("mlp_bias", false);
  k.neutral("partial_rotary_factor", 1.0);
  // pretraining_tp > 1 splits transformers' matmuls into slices: the same products.
  k.refuse_unread({"pretraining_tp"});
  return c;
}

// Qwen2's and Qwen3's sliding-window attention is off in every released model
// (use_sliding_window false, so sliding_window and max_window_layers act on nothing); a config
// that turns it on, or names another kind of layer, is refused.
void qwen_full_attention(const Keys& k) {
  k.neutral("use_sliding_window", false);
  if (k.has("layer_types")) {
    const nlohmann::json& types = k.raw("layer_types");
    if (!types.is_array()) k.bad("layer_types", "expected a list");
    for (const auto& t : types) {
      if (t != "full_attention") k.bad("layer_types", "only full_attention layers import (sliding windows do not yet)");
    }
  }
  // Read only when use_sliding_window is true, which the line above refuses.
  k.refuse_unread({"sliding_window", "max_window_layers"});
}

// Qwen2 / Qwen2.5: Llama with biases on the query, key and value projections. Sliding-window
// attention is off in every released Qwen2 (use_sliding_window false, so sliding_window and
// max_window_layers act on nothing); a config that turns it on is refused.
model::ModelConfig qwen2_from(const Keys& k) {
  model::ModelConfig c = llama_shape_from(k, 32768);
  c.qkv_bias = true;
  k.neutral("use_mrope", false);  // Qwen2.5's configs carry it; true is Qwen2-VL's rotary
  qwen_full_attention(k);
  return c;
}

// Qwen3: Llama with RMS norms on each query and key head (q_norm and k_norm, before the
// rotation), a head_dim of its own (128 in every released size), and Qwen2's unused window.
model::ModelConfig qwen3_from(const Keys& k) {
  model::ModelConfig c = llama_shape_from(k, 32768);
  c.qk_norm = true;
  // True puts biases on q, k, v and the output projection; none of Qwen3's does.
  k.neutral("attention_bias", false);
  qwen_full_attention(k);
  return c;
}

// Mistral (v0.1's sliding_window 4096; v0.2 on and Nemo: null, full attention): Llama's shape.
// A window becomes model.sliding_window, under which sequences are refused past it.
model::ModelConfig mistral_from(const Keys& k) {
  model::ModelConfig c = llama_shape_from(k, 32768);
  if (k.has("sliding_window")) c.sliding_window = k.size("sliding_window", kMaxPositions);
  k.refuse_unread({});
  return c;
}

// T5 v1.1 (and flan-t5): gated-gelu, relative positions, RMS norms, no biases, untied head.
// The original T5's ReLU MLP and its tied head (which rescales the decoder output by
// d_model^-0.5) have no counterpart here.
model::ModelConfig t5_from(const Keys& k, bool& head_from_embedding) {
  model::ModelConfig c;
  c.arch = recipe::Arch::T5;
  c.causal = false;
  c.encoder_decoder = true;
  c.num_layers = k.size("num_layers", kMaxLayers);
  c.decoder_layers = k.size("num_decoder_layers", kMaxLayers, c.num_layers);
  c.hidden = k.size("d_model", kMaxHidden);
  c.heads = k.size("num_heads", kMaxHeads);
  c.groups = c.heads;
  c.head_dim = k.size("d_kv", kMaxHeadDim);
  c.ffn = k.size("d_ff", kMaxFfn);
  c.vocab = k.size("vocab_size", kMaxVocab);
  c.position = PositionEmbedding::Relative;
  c.relative_buckets = k.size("relative_attention_num_buckets", 1024, 32);
  c.relative_max_distance = k.size("relative_attention_max_distance", kMaxPositions, 128);
  if (c.relative_buckets < 4) k.bad("relative_attention_num_buckets", "expected at least 4");
  if (c.relative_max_distance <= c.relative_buckets / 2) {
    k.bad("relative_attention_max_distance", "must exceed half the buckets");
  }
  c.norm = Norm::RmsNorm;
  c.norm_eps = k.real("layer_norm_epsilon", 1e-6, positive, "a positive number");
  c.activation = Activation::Geglu;
  c.tie_embeddings = false;
  c.linear_bias = c.qkv_bias = false;
  c.output_bias = false;
  c.hidden_dropout = c.attention_dropout =
      k.real("dropout_rate", 0.1, probability, "a probability in [0, 1)");
  c.init_std = 0.02;
  // T5's learned-free positions: the encoder length T5 is trained at (n_positions when given).
  c.max_positions = k.size("n_positions", kMaxPositions, 512);
  c.decoder_seq_length = std::min<int64_t>(c.max_positions, 128);
  if (k.has("feed_forward_proj") && k.get<std::string>("feed_forward_proj") != "gated-gelu") {
    k.bad("feed_forward_proj", "only T5 v1.1's gated-gelu imports (the engine's geglu)");
  }
  if (!k.has("feed_forward_proj")) {
    k.refuse("feed_forward_proj is missing; T5's default \"relu\" does not import (only T5 "
             "v1.1's gated-gelu does)");
  }
  // transformers < 5 writes tie_word_embeddings false for T5 v1.1 and true for the original T5,
  // which rescales the decoder output by d_model^-0.5 before its tied head; transformers 5 always
  // ties and says with scale_decoder_outputs whether it rescales.
  const bool tied = k.get<bool>("tie_word_embeddings", true);
  const bool rescaled = k.get<bool>("scale_decoder_outputs", tied);
  if (rescaled) {
    k.refuse("the original T5's head (tied, rescaled by d_model^-0.5) has no counterpart here; "
             "T5 v1.1 and flan-t5 import");
  }
  head_from_embedding = tied;
  k.neutral("is_encoder_decoder", true);
  // What feed_forward_proj implies, spelled out by transformers >= 4.22.
  k.neutral("dense_act_fn", "gelu_new");
  k.neutral("is_gated_act", true);
  k.refuse_unread({"output_past"});
  return c;
}

}  // namespace

HfArch hf_architecture(const model::ModelConfig& c) {
  using recipe::name_of;
  if (c.arch == recipe::Arch::T5) {
    const HfArch a = HfArch::T5;
    const char* why = "T5 (T5 v1.1's shape)";
    need(c.position == PositionEmbedding::Relative, "model.position_embedding",
         std::string(name_of(c.position)), a, why, "relative");
    need(c.norm == Norm::RmsNorm, "model.normalization", std::string(name_of(c.norm)), a, why,
         "rmsnorm");
    need(c.activation == Activation::Geglu, "model.activation", std::string(name_of(c.activation)),
         a, why, "geglu");
    need(!c.linear_bias, "model.add_bias_linear", text(c.linear_bias), a, why, "false");
    need(!c.qkv_bias, "model.add_qkv_bias", text(c.qkv_bias), a, why, "false");
    need(!c.tie_embeddings, "model.tie_embeddings", text(c.tie_embeddings), a, why, "false");
    need(c.groups == c.heads, "model.num_query_groups", std::to_string(c.groups), a, why,
         fmt::format("{} (model.num_attention_heads)", c.heads));
    return a;
  }
  if (c.arch == recipe::Arch::Bert) {
    const HfArch a = HfArch::MegatronBert;
    const char* why = "BERT";
    need(c.binary_head, "model.bert_binary_head", text(c.binary_head), a, why,
         "true (the pooler and sentence-order head)");
    need(c.position == PositionEmbedding::Learned, "model.position_embedding",
         std::string(name_of(c.position)), a, why, "learned");
    need(c.norm == Norm::LayerNorm, "model.normalization", std::string(name_of(c.norm)), a, why,
         "layernorm");
    need(c.activation == Activation::Gelu, "model.activation", std::string(name_of(c.activation)),
         a, why, "gelu");
    need(c.linear_bias && c.qkv_bias, "model.add_bias_linear", text(c.linear_bias), a, why, "true");
    need(c.tie_embeddings, "model.tie_embeddings", text(c.tie_embeddings), a, why, "true");
    need(c.groups == c.heads, "model.num_query_groups", std::to_string(c.groups), a, why,
         fmt::format("{} (model.num_attention_heads)", c.heads));
    need(c.heads * c.head_dim == c.hidden, "model.kv_channels", std::to_string(c.head_dim), a, why,
         fmt::format("{} (hidden_size / num_attention_heads)", c.hidden / c.heads));
    return a;
  }
  if (c.position == PositionEmbedding::Learned) {
    const HfArch a = HfArch::Gpt2;
    const char* why = "learned position embeddings";
    need(c.sliding_window == 0, "model.sliding_window", std::to_string(c.sliding_window), a, why, "unset");
    need(c.norm == Norm::LayerNorm, "model.normalization", std::string(name_of(c.norm)), a, why,
         "layernorm");
    need(c.activation == Activation::Gelu || c.activation == Activation::GeluTanh,
         "model.activation", std::string(name_of(c.activation)), a, why, "gelu or gelu_tanh");
    need(c.linear_bias, "model.add_bias_linear", text(c.linear_bias), a, why, "true");
    need(c.qkv_bias, "model.add_qkv_bias", text(c.qkv_bias), a, why, "true");
    need(c.groups == c.heads, "model.num_query_groups", std::to_string(c.groups), a, why,
         fmt::format("{} (model.num_attention_heads: no grouped-query attention)", c.heads));
    need(c.heads * c.head_dim == c.hidden, "model.kv_channels", std::to_string(c.head_dim), a, why,
         fmt::format("{} (hidden_size / num_attention_heads)", c.hidden / c.heads));
    return a;
  }
  // Rotary, RMSNorm, SwiGLU: Llama, or Qwen2 when the query/key/value projections have biases.
  const HfArch a = c.qk_norm                      ? HfArch::Qwen3
                   : c.qkv_bias && !c.linear_bias ? HfArch::Qwen2
                   : c.sliding_window > 0         ? HfArch::Mistral
                                                  : HfArch::Llama;
  const char* why = "rotary position embeddings";
  need(c.rotary_percent == 1.0, "model.rotary_percent", fmt::format("{}", c.rotary_percent), a, why,
       "1.0");
  need(c.norm == Norm::RmsNorm, "model.normalization", std::string(name_of(c.norm)), a, why,
       "rmsnorm");
  need(c.activation == Activation::Swiglu, "model.activation", std::string(name_of(c.activation)),
       a, why, "swiglu");
  need(!c.linear_bias, "model.add_bias_linear", text(c.linear_bias), a, why, "false");
  if (a == HfArch::Qwen3) {
    need(!c.qkv_bias, "model.add_qkv_bias", text(c.qkv_bias), a, "Qwen3's q/k norms", "false");
    need(c.sliding_window == 0, "model.sliding_window", std::to_string(c.sliding_window), a,
         "Qwen3's q/k norms", "unset (Qwen3 with a window is not exported)");
  }
  if (a == HfArch::Qwen2) {
    need(c.sliding_window == 0, "model.sliding_window", std::to_string(c.sliding_window), a,
         "Qwen2's query/key/value biases", "unset (Qwen2 with a window is not exported)");
    need(c.heads * c.head_dim == c.hidden, "model.kv_channels", std::to_string(c.head_dim), a,
         "Qwen2's query/key/value biases", fmt::format("{} (hidden_size / num_attention_heads)", c.hidden / c.heads));
  }
  return a;
}

namespace {

// transformers 4's rope_scaling (which transformers 5 reads too), or null for unscaled positions.
nlohmann::json rope_scaling_json(const model::ModelConfig& c) {
  switch (c.rope_scaling) {
    case model::RopeScaling::None: return nullptr;
    case model::RopeScaling::Linear: return {{"rope_type", "linear"}, {"factor", c.rope_scaling_factor}};
    case model::RopeScaling::Llama3:
      return {{"rope_type", "llama3"},
              {"factor", c.rope_scaling_factor},
              {"low_freq_factor", c.rope_low_freq_factor},
              {"high_freq_factor", c.rope_high_freq_factor},
              {"original_max_position_embeddings", c.rope_original_max_positions}};
    case model::RopeScaling::Yarn:
      return {{"rope_type", "yarn"},
              {"factor", c.rope_scaling_factor},
              {"original_max_position_embeddings", c.rope_original_max_positions},
              {"beta_fast", c.rope_beta_fast},
              {"beta_slow", c.rope_beta_slow},
              {"truncate", c.rope_truncate},
              {"attention_factor", c.rope_attention_factor}};
  }
  return nullptr;
}

}  // namespace

nlohmann::json hf_config_json(HfArch arch, const model::ModelConfig& c, tensor::DType dtype) {
  nlohmann::ordered_json j;
  j["architectures"] = {std::string(architecture_name(arch))};
  if (arch == HfArch::T5) {
    j["model_type"] = "t5";
    j["vocab_size"] = c.vocab;
    j["d_model"] = c.hidden;
    j["d_kv"] = c.head_dim;
    j["d_ff"] = c.ffn;
    j["num_layers"] = c.num_layers;
    j["num_decoder_layers"] = c.decoder_layers;
    j["num_heads"] = c.heads;
    j["relative_attention_num_buckets"] = c.relative_buckets;
    j["relative_attention_max_distance"] = c.relative_max_distance;
    j["dropout_rate"] = c.hidden_dropout;
    j["layer_norm_epsilon"] = c.norm_eps;
    j["initializer_factor"] = 1.0;
    j["feed_forward_proj"] = "gated-gelu";
    j["is_encoder_decoder"] = true;
    j["decoder_start_token_id"] = 0;
    j["pad_token_id"] = 0;
    j["eos_token_id"] = 1;
    j["n_positions"] = c.max_positions;
  } else if (arch == HfArch::Gpt2) {
    j["model_type"] = "gpt2";
    j["vocab_size"] = c.vocab;
    j["n_positions"] = c.max_positions;
    j["n_embd"] = c.hidden;
    j["n_layer"] = c.num_layers;
    j["n_head"] = c.heads;
    j["n_inner"] = c.ffn;
    j["activation_function"] = c.activation == Activation::GeluTanh ? "gelu_new" : "gelu";
    j["resid_pdrop"] = c.hidden_dropout;
    j["embd_pdrop"] = c.hidden_dropout;
    j["attn_pdrop"] = c.attention_dropout;
    j["layer_norm_epsilon"] = c.norm_eps;
    j["initializer_range"] = c.init_std;
    j["scale_attn_weights"] = true;
    j["scale_attn_by_inverse_layer_idx"] = false;
    j["reorder_and_upcast_attn"] = false;
  } else if (arch == HfArch::MegatronBert) {
    j["model_type"] = "megatron-bert";
    j["vocab_size"] = c.vocab;
    j["hidden_size"] = c.hidden;
    j["num_hidden_layers"] = c.num_layers;
    j["num_attention_heads"] = c.heads;
    j["intermediate_size"] = c.ffn;
    j["hidden_act"] = "gelu";
    j["hidden_dropout_prob"] = c.hidden_dropout;
    j["attention_probs_dropout_prob"] = c.attention_dropout;
    j["max_position_embeddings"] = c.max_positions;
    j["type_vocab_size"] = c.token_types;
    j["initializer_range"] = c.init_std;
    j["layer_norm_eps"] = c.norm_eps;
    j["position_embedding_type"] = "absolute";
  } else {
    // Llama and Qwen2 share every key but a few.
    j["model_type"] = arch == HfArch::Qwen2     ? "qwen2"
                      : arch == HfArch::Qwen3   ? "qwen3"
                      : arch == HfArch::Mistral ? "mistral"
                                                : "llama";
    j["vocab_size"] = c.vocab;
    j["hidden_size"] = c.hidden;
    j["intermediate_size"] = c.ffn;
    j["num_hidden_layers"] = c.num_layers;
    j["num_attention_heads"] = c.heads;
    j["num_key_value_heads"] = c.groups;
    // Read by transformers >= 4.45; older versions derive hidden / heads, which is the same
    // number for every model whose kv_channels is the default (Qwen2's must be).
    if (arch != HfArch::Qwen2) j["head_dim"] = c.head_dim;
    j["hidden_act"] = "silu";
    j["max_position_embeddings"] = c.max_positions;
    j["rms_norm_eps"] = c.norm_eps;
    j["rope_theta"] = c.rotary_base;
    j["rope_scaling"] = rope_scaling_json(c);
    j["attention_dropout"] = c.attention_dropout;
    j["initializer_range"] = c.init_std;
    if (arch == HfArch::Qwen2) {
      j["use_sliding_window"] = false;
    } else if (arch == HfArch::Qwen3) {
      j["use_sliding_window"] = false;
      j["attention_bias"] = false;
    } else if (arch == HfArch::Mistral) {
      j["sliding_window"] = c.sliding_window;
    } else {
      j["attention_bias"] = false;
      j["mlp_bias"] = false;
      j["pretraining_tp"] = 1;
    }
  }
  j["tie_word_embeddings"] = c.tie_embeddings;
  j["torch_dtype"] = torch_dtype(dtype);
  j["use_cache"] = true;
  return j;
}

HfModel hf_model_from_config(const nlohmann::json& config, const std::string& where) {
  const Keys k(config, where);
  const auto type = k.get<std::string>("model_type", std::string());
  HfModel m;
  if (type == "gpt2") {
    m.arch = HfArch::Gpt2;
    m.config = gpt2_from(k);
  } else if (type == "llama") {
    m.arch = HfArch::Llama;
    m.config = llama_from(k);
  } else if (type == "qwen2") {
    m.arch = HfArch::Qwen2;
    m.config = qwen2_from(k);
  } else if (type == "qwen3") {
    m.arch = HfArch::Qwen3;
    m.config = qwen3_from(k);
  } else if (type == "mistral") {
    m.arch = HfArch::Mistral;
    m.config = mistral_from(k);
  } else if (type == "megatron-bert") {
    m.arch = HfArch::MegatronBert;
    m.config = megatron_bert_from(k);
  } else if (type == "t5") {
    m.arch = HfArch::T5;
    m.config = t5_from(k, m.head_from_embedding);
  } else {
    throw UserError(fmt::format(
        "{}: model_type \"{}\" cannot be imported (gpt2, llama, qwen2, qwen3, mistral, megatron-bert and t5 can)", where,
        printable(type)));
  }
  model::ModelConfig& c = m.config;
  c.padded_vocab = round_up(c.vocab, kVocabMultiple);
  checked_parameter_count(c, where);
  c.seq_length = std::min(c.longest_sequence(), kMaxSeqLength);
  return m;
}

}  // namespace megatron::ckpt
