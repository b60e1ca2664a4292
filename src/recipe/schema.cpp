#include "recipe/schema.hpp"

#include <fmt/format.h>

#include <type_traits>

#include "recipe/codec.hpp"
#include "recipe/eval_tasks.hpp"

namespace megatron::recipe {
namespace {

template <class T>
struct OptionalTraits {
  static constexpr bool is_optional = false;
  using value_type = T;
};
template <class T>
struct OptionalTraits<std::optional<T>> {
  static constexpr bool is_optional = true;
  using value_type = T;
};

struct Limits {
  std::optional<double> min;
  std::optional<double> max;
  bool min_exclusive = false;
  bool ceiling = false;  // max is a safety ceiling, not a property of the value
  bool required = false;
  std::string default_note;  // for optional values: what happens when unset
};

const Limits kPositive{.min = 1};
const Limits kNonNegative{.min = 0};
Limits required(Limits limits = kPositive) {
  limits.required = true;
  return limits;
}
Limits derived(std::string note, Limits limits = kPositive) {
  limits.default_note = std::move(note);
  return limits;
}
const Limits kProbability{.min = 0, .max = 1};

// Ceilings far above any real model or cluster (docs/recipe-language.md, "What bad input
// gets"). With them every size and product the compiler and planner compute fits 64 bits or
// is refused by checked arithmetic, and every loop over layers, stages or batches stays short.
constexpr double kMaxLayers = 1e5;  // GPT-3 has 96, the deepest published models ~10^3
// Hidden size and head dim: 2^20, the checkpoint importer's limit too (ckpt/model_limits.hpp),
// so every model it converts is a valid recipe; the widest real models are ~3e4.
constexpr double kMaxWidth = 1 << 20;
constexpr double kMaxFfnWidth = 1e7;
constexpr double kMaxHeads = 1e5;
constexpr double kMaxVocab = 1e9;
constexpr double kMaxVocabMultiple = 1e6;
constexpr double kMaxSequence = 1e8;         // tokens per sequence; the longest contexts ~1e7
constexpr double kMaxBatch = 1e8;            // sequences per iteration
constexpr double kMaxTrainingLength = 1e15;  // iterations, samples or tokens of one run
constexpr double kMaxRanks = 1e6;            // nodes, and each parallel size
constexpr double kMaxGpusPerNode = 1e4;
constexpr double kMaxInterval = 1e12;  // iterations between logs, saves, evaluations
constexpr double kMaxMinutes = 1e8;    // ~190 years
constexpr double kMaxThreads = 1024;
constexpr double kMaxEvalIters = 1e6;  // x the global batch: the samples of one evaluation

Limits up_to(double max, Limits limits = kPositive) {
  limits.max = max;
  limits.ceiling = true;
  return limits;
}

template <class S, class T>
FieldSpec bind(const char* section, S Recipe::*sec, const char* key, T S::*member,
               std::string doc, Limits limits = {}) {
  using Traits = OptionalTraits<T>;
  using Value = typename Traits::value_type;
  FieldSpec f;
  f.section = section;
  f.key = key;
  f.path = std::string(section) + "." + key;
  f.kind = codec::Codec<T>::kind;
  f.doc = std::move(doc);
  f.required = limits.required;
  f.optional = Traits::is_optional;
  f.minimum = limits.min;
  f.maximum = limits.max;
  f.maximum_is_ceiling = limits.ceiling;
  f.minimum_exclusive = limits.min_exclusive;
  f.default_note = std::move(limits.default_note);
  if constexpr (std::is_enum_v<Value>) f.choices = canonical_names<Value>();
  f.parse_into = [sec, member](const FieldSpec& spec, Recipe& r, const YAML::Node& node,
                               const Origin& origin) {
    (r.*sec).*member = codec::Codec<T>::parse(node, spec, origin);
  };
  f.render = [sec, member](const Recipe& r) -> std::optional<std::string> {
    const T& value = (r.*sec).*member;
    if constexpr (Traits::is_optional) {
      if (!value) return std::nullopt;
      return codec::Codec<Value>::render(*value);
    } else {
      return codec::Codec<T>::render(value);
    }
  };
  return f;
}

std::vector<FieldSpec> model_fields() {
  using S = ModelSection;
  auto m = [](const char* key, auto S::*member, std::string doc, Limits limits = {}) {
    return bind("model", &Recipe::model, key, member, std::move(doc), std::move(limits));
  };
  return {
      m("arch", &S::arch,
        "Model family: decoder-only GPT, encoder-only BERT, or encoder-decoder T5."),
      m("num_layers", &S::num_layers, "Transformer layers (T5: encoder layers). Symbol L.",
        required(up_to(kMaxLayers))),
      m("decoder_num_layers", &S::decoder_num_layers, "T5 decoder layers.",
        derived("model.num_layers", up_to(kMaxLayers))),
      m("hidden_size", &S::hidden_size, "Width of the residual stream. Symbol h.",
        required(up_to(kMaxWidth))),
      m("num_attention_heads", &S::num_attention_heads, "Attention heads. Symbol a.",
        required(up_to(kMaxHeads))),
      m("num_query_groups", &S::num_query_groups,
        "Key/value heads for grouped-query attention (1 = multi-query). Symbol g.",
        derived("model.num_attention_heads (multi-head attention)", up_to(kMaxHeads))),
      m("kv_channels", &S::kv_channels, "Channels per attention head. Symbol d.",
        derived("hidden_size / num_attention_heads", up_to(kMaxWidth))),
      m("ffn_hidden_size", &S::ffn_hidden_size, "Width of the MLP. Symbol F.",
        derived("4 x hidden_size for GeLU; 8/3 x hidden_size rounded up to a multiple of 256 for "
                "SwiGLU",
                up_to(kMaxFfnWidth))),
      m("vocab_size", &S::vocab_size, "Tokenizer vocabulary size before padding.",
        required(up_to(kMaxVocab))),
      m("make_vocab_size_divisible_by", &S::make_vocab_size_divisible_by,
        "Pad the vocabulary to a multiple of this times the tensor-parallel size (as Megatron).",
        up_to(kMaxVocabMultiple)),
      m("max_position_embeddings", &S::max_position_embeddings,
        "Rows of the learned position table.", derived("data.seq_length", up_to(kMaxSequence))),
      m("position_embedding", &S::position_embedding,
        "Learned absolute positions, rotary embeddings (RoPE), or T5's relative position bias "
        "(t5 only)."),
      m("rotary_base", &S::rotary_base, "RoPE base frequency.", {.min = 0, .min_exclusive = true}),
      m("rotary_percent", &S::rotary_percent, "Fraction of each head's channels rotated by RoPE.",
        {.min = 0, .max = 1, .min_exclusive = true}),
      m("rope_scaling", &S::rope_scaling,
        "RoPE frequencies scaled for contexts past the trained one, as transformers' rope_type: "
        "linear (every frequency / factor), llama3 (Llama 3.1: low frequencies / factor, high "
        "ones kept, a blend between) or yarn (YaRN, Qwen2.5's long context: a ramp over channels "
        "between beta_fast and beta_slow rotations, and the cosines and sines scaled by an "
        "attention factor)."),
      m("sliding_window", &S::sliding_window,
        "Sliding-window attention span (Mistral's sliding_window): each token attends to the last "
        "this many positions. The engine computes full attention, the same function up to the "
        "window, so data.seq_length and generated sequences past it are refused.",
        derived("none: full attention", up_to(kMaxSequence, {.min = 1}))),
      m("rope_scaling_factor", &S::rope_scaling_factor, "RoPE scaling: the factor.",
        derived("8 for llama3; required for linear and yarn", {.min = 0, .min_exclusive = true})),
      m("rope_original_max_position_embeddings", &S::rope_original_max_position_embeddings,
        "RoPE scaling llama3 and yarn: the context the model was trained at.",
        derived("8192 for llama3, model.max_position_embeddings for yarn", up_to(kMaxSequence, {.min = 1}))),
      m("rope_low_freq_factor", &S::rope_low_freq_factor,
        "RoPE scaling llama3: wavelengths over original / this are divided by the factor.",
        derived("1", {.min = 0, .min_exclusive = true})),
      m("rope_high_freq_factor", &S::rope_high_freq_factor,
        "RoPE scaling llama3: wavelengths under original / this are kept (must exceed the low factor).",
        derived("4", {.min = 0, .min_exclusive = true})),
      m("rope_beta_fast", &S::rope_beta_fast,
        "RoPE scaling yarn: channel pairs turning more than this many times over the original "
        "context keep their frequency.",
        derived("32", {.min = 0, .min_exclusive = true})),
      m("rope_beta_slow", &S::rope_beta_slow,
        "RoPE scaling yarn: channel pairs turning fewer times than this are divided by the factor.",
        derived("1", {.min = 0, .min_exclusive = true})),
      m("rope_truncate", &S::rope_truncate,
        "RoPE scaling yarn: the ramp's ends rounded outwards to whole channels (transformers' "
        "truncate).",
        derived("true")),
      m("rope_attention_factor", &S::rope_attention_factor,
        "RoPE scaling yarn: the factor on the cosines and sines (each score by its square).",
        derived("0.1 ln(factor) + 1", {.min = 0, .min_exclusive = true})),
      m("relative_attention_num_buckets", &S::relative_attention_num_buckets,
        "T5 relative positions: buckets of the learned per-head bias (half per direction in the "
        "encoder).",
        derived("32", up_to(1024, {.min = 4}))),
      m("relative_attention_max_distance", &S::relative_attention_max_distance,
        "T5 relative positions: distances from this on share the last bucket.",
        derived("128", up_to(kMaxSequence, {.min = 2}))),
      m("normalization", &S::normalization, "LayerNorm or RMSNorm (pre-norm blocks)."),
      m("norm_epsilon", &S::norm_epsilon, "Epsilon of the norms.",
        {.min = 0, .min_exclusive = true}),
      m("activation", &S::activation,
        "MLP activation: exact GeLU, tanh-approximated GeLU, SwiGLU, or GeGLU (a "
        "tanh-approximated GeLU gate: T5 v1.1's gated-gelu)."),
      m("tie_embeddings", &S::tie_embeddings, "Share the word embedding with the output layer."),
      m("add_bias_linear", &S::add_bias_linear, "Biases in the linear layers."),
      m("add_qkv_bias", &S::add_qkv_bias, "Biases in the query/key/value projection.",
        derived("model.add_bias_linear")),
      m("qk_layernorm", &S::qk_layernorm,
        "Norms on each query and key head before the rotation, one [kv_channels] weight each per "
        "layer (Megatron's --qk-layernorm; Qwen3's q_norm and k_norm). RMS norms: needs "
        "model.normalization rmsnorm."),
      m("hidden_dropout", &S::hidden_dropout, "Dropout after attention and MLP, and on embeddings.",
        kProbability),
      m("attention_dropout", &S::attention_dropout, "Dropout on attention probabilities.",
        kProbability),
      m("init_method_std", &S::init_method_std,
        "Standard deviation of the normal initialisation (output projections scaled by "
        "1/sqrt(2L)).",
        {.min = 0, .min_exclusive = true}),
      m("flash_attention", &S::flash_attention,
        "Memory-efficient attention: never store the full sequence x sequence scores. The only "
        "attention the engine has; false is refused."),
      m("bert_binary_head", &S::bert_binary_head, "BERT: pooler and next-sentence head."),
  };
}

std::vector<FieldSpec> parallel_fields() {
  using S = ParallelSection;
  auto p = [](const char* key, auto S::*member, std::string doc, Limits limits = {}) {
    return bind("parallel", &Recipe::parallel, key, member, std::move(doc), std::move(limits));
  };
  return {
      p("tensor", &S::tensor, "Tensor-parallel size. Symbol t.", up_to(kMaxRanks)),
      p("pipeline", &S::pipeline, "Pipeline-parallel size (stages). Symbol p.", up_to(kMaxRanks)),
      p("context", &S::context, "Context-parallel size (sequence split across ranks). Symbol c.",
        up_to(kMaxRanks)),
      p("data", &S::data, "Data-parallel size; when given it must match the world. Symbol D.",
        derived("world size / (tensor x pipeline x context)", up_to(kMaxRanks))),
      p("virtual_pipeline", &S::virtual_pipeline,
        "Model chunks per pipeline rank for the interleaved schedule. Symbol v.",
        up_to(kMaxLayers)),
      p("schedule", &S::schedule, "Pipeline schedule.",
        derived("interleaved when virtual_pipeline > 1, else 1f1b", {})),
      p("layers_per_stage", &S::layers_per_stage,
        "Explicit (uneven) number of layers on each pipeline stage; empty = even split.",
        up_to(kMaxLayers)),
      p("sequence_parallel", &S::sequence_parallel,
        "Shard norms and dropout along the sequence across tensor-parallel ranks."),
      p("distributed_optimizer", &S::distributed_optimizer,
        "Shard master weights and optimizer state across data-parallel ranks (ZeRO-1)."),
      p("ddp_bucket_size", &S::ddp_bucket_size,
        "Gradient elements per data-parallel reduction bucket; each bucket's all-reduce (or "
        "reduce-scatter) starts as soon as backward has finished its gradients (Megatron's "
        "--ddp-bucket-size).",
        derived("max(40,000,000, 1,000,000 x data-parallel size)", up_to(kMaxTrainingLength))),
      p("timeout_minutes", &S::timeout_minutes,
        "How long a rank waits for its peers in one collective or transfer before the watchdog "
        "stops the job, naming the rank, group, operation and iteration (Megatron's "
        "--distributed-timeout-minutes).",
        up_to(kMaxMinutes, {.min = 0, .min_exclusive = true})),
  };
}

std::vector<FieldSpec> precision_fields() {
  using S = PrecisionSection;
  auto p = [](const char* key, auto S::*member, std::string doc, Limits limits = {}) {
    return bind("precision", &Recipe::precision, key, member, std::move(doc), std::move(limits));
  };
  return {
      p("dtype", &S::dtype,
        "Parameter and activation type; bf16 and f16 keep f32 master weights and gradients."),
      p("initial_loss_scale", &S::initial_loss_scale, "f16: starting dynamic loss scale (2^32).",
        {.min = 0, .min_exclusive = true}),
      p("min_loss_scale", &S::min_loss_scale, "f16: the dynamic loss scale never drops below this.",
        {.min = 0, .min_exclusive = true}),
      p("loss_scale_window", &S::loss_scale_window,
        "f16: double the loss scale after this many steps without overflow.", up_to(kMaxInterval)),
      p("hysteresis", &S::hysteresis, "f16: overflows tolerated before the scale is halved.",
        up_to(kMaxInterval)),
      p("loss_scale", &S::loss_scale, "f16: a fixed loss scale instead of the dynamic one.",
        derived("dynamic loss scaling", {.min = 0, .min_exclusive = true})),
      p("allow_tf32", &S::allow_tf32, "f32 on GPUs: let GEMMs use TF32 tensor cores."),
  };
}

std::vector<FieldSpec> training_fields() {
  using S = TrainingSection;
  auto t = [](const char* key, auto S::*member, std::string doc, Limits limits = {}) {
    return bind("training", &Recipe::training, key, member, std::move(doc), std::move(limits));
  };
  return {
      t("micro_batch_size", &S::micro_batch_size, "Sequences per micro-batch per rank. Symbol b.",
        required(up_to(kMaxBatch))),
      t("global_batch_size", &S::global_batch_size,
        "Sequences per iteration over all ranks. Symbol B.", required(up_to(kMaxBatch))),
      t("train_iters", &S::train_iters, "Training length in iterations.",
        derived("from train_samples or train_tokens", up_to(kMaxTrainingLength))),
      t("train_samples", &S::train_samples, "Training length in sequences.",
        derived("unused when train_iters is given", up_to(kMaxTrainingLength))),
      t("train_tokens", &S::train_tokens,
        "Training length in tokens (train_samples = tokens / seq_length).",
        derived("unused when train_iters or train_samples is given", up_to(kMaxTrainingLength))),
      t("rampup_batch_size", &S::rampup_batch_size,
        "Batch-size ramp-up as Megatron: [start, increment, ramp samples]; empty = none.",
        up_to(kMaxTrainingLength)),
      t("exit_duration_minutes", &S::exit_duration_minutes,
        "Stop training once this much wall-clock time has passed (Megatron's "
        "--exit-duration-in-mins).",
        derived("no limit", up_to(kMaxMinutes, {.min = 0, .min_exclusive = true}))),
      t("optimizer", &S::optimizer, "AdamW (decoupled weight decay) or SGD with momentum."),
      t("lr", &S::lr, "Peak learning rate.", required({.min = 0, .min_exclusive = true})),
      t("min_lr", &S::min_lr, "Learning rate at the end of decay.", kNonNegative),
      t("lr_decay_style", &S::lr_decay_style, "Learning-rate decay after warmup."),
      t("lr_warmup_iters", &S::lr_warmup_iters, "Linear warmup iterations.",
        up_to(kMaxTrainingLength, kNonNegative)),
      t("lr_warmup_fraction", &S::lr_warmup_fraction,
        "Warmup as a fraction of the decay iterations (instead of lr_warmup_iters).",
        derived("lr_warmup_iters", kProbability)),
      t("lr_decay_iters", &S::lr_decay_iters, "Iterations over which the rate decays.",
        derived("the training iterations", up_to(kMaxTrainingLength))),
      t("lr_wsd_decay_iters", &S::lr_wsd_decay_iters,
        "WSD: iterations of the final decay phase (the rest is warmup then stable).",
        derived("10% of the decay iterations", up_to(kMaxTrainingLength))),
      t("lr_wsd_decay_style", &S::lr_wsd_decay_style, "WSD: shape of the final decay phase."),
      t("adam_beta1", &S::adam_beta1, "AdamW first-moment decay.", {.min = 0, .max = 1}),
      t("adam_beta2", &S::adam_beta2, "AdamW second-moment decay.", {.min = 0, .max = 1}),
      t("adam_eps", &S::adam_eps, "AdamW epsilon.", {.min = 0, .min_exclusive = true}),
      t("sgd_momentum", &S::sgd_momentum, "SGD momentum (0 = none).", {.min = 0, .max = 1}),
      t("weight_decay", &S::weight_decay,
        "Decoupled weight decay; biases and norm weights are never decayed.", kNonNegative),
      t("clip_grad", &S::clip_grad, "Clip the global gradient norm to this (0 = no clipping).",
        kNonNegative),
      t("recompute", &S::recompute,
        "Activation recompute: none, selective (attention core), or full (whole blocks)."),
      t("recompute_num_layers", &S::recompute_num_layers,
        "Full recompute: blocks per pipeline stage that are recomputed.",
        derived("every layer of the stage", up_to(kMaxLayers))),
      t("fused_classifier", &S::fused_classifier,
        "The output layer and cross-entropy run in chunks of tokens during the forward pass, "
        "computing their gradients there, so a micro-batch's f32 logits are never stored whole "
        "(llm.c's fused classifier); false keeps the whole logits for the backward pass."),
      t("seed", &S::seed, "Random seed for initialisation, data order and dropout.", kNonNegative),
  };
}

std::vector<FieldSpec> data_fields() {
  using S = DataSection;
  auto d = [](const char* key, auto S::*member, std::string doc, Limits limits = {}) {
    return bind("data", &Recipe::data, key, member, std::move(doc), std::move(limits));
  };
  return {
      d("prefixes", &S::prefixes,
        "Indexed datasets (paths without .bin/.idx), relative to the recipe file."),
      d("weights", &S::weights, "Blend weights, one per prefix; empty = equal weights.",
        {.min = 0, .min_exclusive = true}),
      d("split", &S::split, "Train, validation, test proportions, e.g. 969,30,1."),
      d("seq_length", &S::seq_length, "Tokens per sequence. Symbol s.",
        required(up_to(kMaxSequence))),
      d("decoder_seq_length", &S::decoder_seq_length, "T5: decoder tokens per sequence.",
        derived("data.seq_length", up_to(kMaxSequence))),
      d("tokenizer", &S::tokenizer, "Tokenizer type (Megatron-LM's names are accepted too)."),
      d("vocab_file", &S::vocab_file, "Tokenizer vocabulary (vocab.json or vocab.txt).",
        derived("none")),
      d("merge_file", &S::merge_file, "GPT-2 BPE merges (merges.txt).", derived("none")),
      d("tokenizer_model", &S::tokenizer_model, "SentencePiece model file, or tokenizer.json (or the directory holding it) for huggingface.", derived("none")),
      d("num_workers", &S::num_workers, "Data-loading threads per rank.",
        up_to(kMaxThreads, kNonNegative)),
      d("mock", &S::mock, "Train on synthetic tokens (no dataset needed)."),
      d("reset_position_ids", &S::reset_position_ids,
        "GPT: position ids restart at 0 after each end-of-document token (learned positions; "
        "rotary positions need no reset under reset_attention_mask, see docs/finetune.md)."),
      d("reset_attention_mask", &S::reset_attention_mask,
        "GPT: a token attends only to tokens of its own document within the sequence (Megatron's "
        "block-diagonal causal mask; no mask tensor is built)."),
      d("eod_mask_loss", &S::eod_mask_loss,
        "GPT: positions whose input is the end-of-document token are not scored."),
      d("mask_prob", &S::mask_prob, "BERT, T5: share of the tokens masked for the LM loss.",
        derived("0.15", {.min = 0, .max = 1, .min_exclusive = true})),
      d("short_seq_prob", &S::short_seq_prob,
        "BERT, T5: probability that a sample's target length is drawn at random below seq_length.",
        derived("0.1", kProbability)),
      d("masking_max_ngram", &S::masking_max_ngram,
        "BERT, T5: longest n-gram of words masked together (BERT: P(n) proportional to 1/n; "
        "T5: n = min(Geometric(0.2), this)).",
        derived("3 (bert), 10 (t5)", up_to(64))),
      d("masking_full_word", &S::masking_full_word,
        "BERT, T5: mask whole words (a ## piece with the word before it).", derived("true")),
      d("vocab_extra_ids", &S::vocab_extra_ids,
        "BERT, T5: sentinel tokens <extra_id_i> appended to the WordPiece vocabulary after [BOS] "
        "and [EOS] (Megatron's --vocab-extra-ids); T5 masks one span per sentinel at most.",
        derived("100 (t5), 0 (bert)", up_to(1 << 20, kNonNegative))),
  };
}

std::vector<FieldSpec> other_fields() {
  std::vector<FieldSpec> out;
  {
    using S = CheckpointSection;
    auto c = [](const char* key, auto S::*member, std::string doc, Limits limits = {}) {
      return bind("checkpoint", &Recipe::checkpoint, key, member, std::move(doc), std::move(limits));
    };
    out.push_back(c("save", &S::save, "Directory checkpoints are written to.", derived("no saving")));
    out.push_back(c("load", &S::load,
                    "Checkpoint to start from (an iter_N directory, or a save directory) while "
                    "checkpoint.save holds none of this run's own.",
                    derived("none: a fresh run, or checkpoint.save's latest when there is one")));
    out.push_back(c("interval", &S::interval, "Save every this many iterations.",
                    derived("only at the end", up_to(kMaxInterval))));
    out.push_back(c("keep_last", &S::keep_last, "Keep only the newest K checkpoints.",
                    derived("keep all", up_to(kMaxInterval))));
    out.push_back(c("async_save", &S::async_save, "Write checkpoints from a background thread."));
  }
  {
    using S = LoggingSection;
    auto l = [](const char* key, auto S::*member, std::string doc, Limits limits = {}) {
      return bind("logging", &Recipe::logging, key, member, std::move(doc), std::move(limits));
    };
    out.push_back(l("interval", &S::interval, "Print a training line every this many iterations.",
                    up_to(kMaxInterval)));
    out.push_back(l("level", &S::level, "Log level."));
    out.push_back(l("run_dir", &S::run_dir, "Directory for JSON-lines metrics and logs.",
                    derived("none")));
    out.push_back(l("tensorboard_dir", &S::tensorboard_dir, "Write a TensorBoard event file here (Megatron's tags, each loss also \"vs samples\"; the "
                    "resolved recipe as text), from rank 0; docs/training.md.",
                    derived("none")));
    out.push_back(l("profile", &S::profile,
                    "Time every backend op of the profiled iterations on the profiled ranks and "
                    "write the per-op table (log, profile/rank-R.json) and a Chrome trace "
                    "(profile/rank-R.trace.json) into the run directory; docs/profiling.md."));
    out.push_back(l("profile_step_start", &S::profile_step_start,
                    "First profiled iteration (with logging.profile).", up_to(kMaxTrainingLength)));
    out.push_back(l("profile_step_end", &S::profile_step_end,
                    "Profiling stops before this iteration (with logging.profile).",
                    up_to(kMaxTrainingLength)));
    out.push_back(l("profile_ranks", &S::profile_ranks,
                    "Global ranks that profile (with logging.profile).",
                    up_to(kMaxRanks, kNonNegative)));
  }
  {
    using S = EvalSection;
    auto e = [](const char* key, auto S::*member, std::string doc, Limits limits = {}) {
      return bind("eval", &Recipe::eval, key, member, std::move(doc), std::move(limits));
    };
    out.push_back(e("interval", &S::interval, "Validate every this many iterations.",
                    derived("no validation", up_to(kMaxInterval))));
    out.push_back(e("iters", &S::iters, "Validation iterations each time.", up_to(kMaxEvalIters)));
    out.push_back(eval_tasks_field());
  }
  {
    using S = FinetuneSection;
    auto f = [](const char* key, auto S::*member, std::string doc, Limits limits = {}) {
      return bind("finetune", &Recipe::finetune, key, member, std::move(doc), std::move(limits));
    };
    out.push_back(f("train_data", &S::train_data,
                    "Fine-tuning data (relative to the recipe): setting it makes the run "
                    "fine-tuning of the kind finetune.format names (docs/finetune.md).",
                    derived("no fine-tuning")));
    out.push_back(f("valid_data", &S::valid_data,
                    "Validation data of the same format: loss (and accuracy for classifiers) at "
                    "each eval.",
                    derived("no validation")));
    out.push_back(f("format", &S::format,
                    "Classification: jsonl rows, or Megatron's GLUE TSV layouts mnli (3 classes) "
                    "and qqp (2). sft: jsonl prompt/response pairs, chat: jsonl message lists "
                    "(GPT, loss on responses only). seq2seq: jsonl source/target pairs (T5)."));
    out.push_back(f("text_field", &S::text_field, "jsonl: the field holding the text."));
    out.push_back(f("text_b_field", &S::text_b_field, "jsonl: the field holding a pair's second text.",
                    derived("single texts")));
    out.push_back(f("label_field", &S::label_field, "jsonl: the field holding the label (a class name or id)."));
    out.push_back(f("labels", &S::labels,
                    "jsonl: the class names in id order (required for jsonl; mnli and qqp name "
                    "their own)."));
    out.push_back(f("prompt_field", &S::prompt_field, "sft: the field holding the prompt."));
    out.push_back(f("response_field", &S::response_field, "sft: the field holding the response."));
    out.push_back(f("messages_field", &S::messages_field,
                    "chat: the field holding the list of {role, content} messages."));
    out.push_back(f("chat_template", &S::chat_template,
                    "chat: how turns become text: chatml (<|im_start|>role ... <|im_end|>), "
                    "plain (User: / Assistant: / System: lines), the families' own as "
                    "transformers' apply_chat_template renders them (qwen2.5, qwen3, "
                    "deepseek-r1, mistral-v1, mistral-v3), or auto: the tokenizer's chat_template (data.tokenizer_model's "
                    "chat_template.jinja or tokenizer_config.json), recognised as one of those."));
    out.push_back(f("source_field", &S::source_field, "seq2seq: the field holding the source text."));
    out.push_back(f("target_field", &S::target_field, "seq2seq: the field holding the target text."));
    out.push_back(f("pack", &S::pack,
                    "sft, chat: pack several examples into each sequence, attention and positions "
                    "kept within each example; false: one example per sequence, padded."));
    out.push_back(f("pretrained", &S::pretrained,
                    "Checkpoint whose weights start the run (any layout, a Hugging Face import "
                    "included; a classifier is drawn fresh, and its language-model heads are left "
                    "out); checkpoint.load resumes instead.",
                    derived("weights drawn from training.seed")));
  }
  {
    using S = GenerationSection;
    auto g = [](const char* key, auto S::*member, std::string doc, Limits limits = {}) {
      return bind("generation", &Recipe::generation, key, member, std::move(doc), std::move(limits));
    };
    out.push_back(g("stop_token_ids", &S::stop_token_ids,
                    "Token ids that end a generated sequence besides the tokenizer's "
                    "end-of-document (generation_config.json's eos_token_id list: Llama 3.1 "
                    "Instruct's <|eot_id|>, Qwen's <|im_end|>); not part of the text. "
                    "--ignore-eod ignores them too.",
                    up_to(double(int64_t{1} << 31) - 1, kNonNegative)));
    out.push_back(g("do_sample", &S::do_sample,
                    "false: greedy; true: sample with the temperature, top_k and top_p below. "
                    "Used when generate gets no --temperature, --top-k, --top-p or --greedy, and "
                    "when a request names none of them.",
                    derived("sample when temperature, top_k or top_p is set, else the commands' "
                            "own defaults")));
    out.push_back(g("temperature", &S::temperature, "Sampling temperature (0: greedy).",
                    derived("1", {.min = 0, .max = 100})));
    out.push_back(g("top_k", &S::top_k,
                    "Sample from the k most likely tokens (0: all). With top_p too, top-k first, "
                    "then top-p over what it keeps, as transformers does.",
                    derived("0", up_to(double(INT32_MAX), kNonNegative))));
    out.push_back(g("top_p", &S::top_p,
                    "Sample from the smallest set of tokens with this much probability (0: off).",
                    derived("0", kProbability)));
  }
  {
    using S = ClusterSection;
    auto c = [](const char* key, auto S::*member, std::string doc, Limits limits = {}) {
      return bind("cluster", &Recipe::cluster, key, member, std::move(doc), std::move(limits));
    };
    out.push_back(c("nodes", &S::nodes, "Nodes in the job.", up_to(kMaxRanks)));
    out.push_back(
        c("gpus_per_node", &S::gpus_per_node, "Ranks (GPUs) per node.", up_to(kMaxGpusPerNode)));
    out.push_back(c("hardware", &S::hardware,
                    "Hardware profile for `megatron plan`: a100-80gb, h100-sxm, h200, cpu, or "
                    "a FILE.json that `megatron plan --calibrate` measured."));
    out.push_back(c("device", &S::device,
                    "Where `megatron run` computes: cpu, cuda (one GPU per rank, NCCL between "
                    "them), or auto: cpu when hardware is cpu (or a profile file measured on "
                    "the cpu), else cuda."));
    out.push_back(c("partition", &S::partition, "Slurm partition.", derived("the cluster default")));
    out.push_back(c("account", &S::account, "Slurm account.", derived("the user's default")));
    out.push_back(c("time_limit", &S::time_limit,
                    "Slurm time limit: MM, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS.",
                    derived("the partition's limit")));
    out.push_back(c("job_name", &S::job_name, "Slurm job name.", derived("the recipe file's name")));
    out.push_back(c("qos", &S::qos, "Slurm quality of service.", derived("the account's default")));
    out.push_back(c("constraint", &S::constraint, "Slurm node features the job needs, e.g. h100&ib.",
                    derived("any node")));
    out.push_back(c("exclusive", &S::exclusive, "Whole nodes for the job (sbatch --exclusive)."));
    out.push_back(c("cpus_per_task", &S::cpus_per_task,
                    "CPUs Slurm gives each rank; the ranks use that many threads.",
                    derived("Slurm's default (1)", up_to(kMaxThreads))));
    out.push_back(c("mail_user", &S::mail_user, "Where Slurm mails about the job.",
                    derived("the submitting user")));
    out.push_back(c("mail_type", &S::mail_type,
                    "Which events Slurm mails about: comma-separated NONE, BEGIN, END, FAIL, "
                    "REQUEUE, ALL, TIME_LIMIT, TIME_LIMIT_90, TIME_LIMIT_80, TIME_LIMIT_50.",
                    derived("no mail")));
    out.push_back(c("requeue", &S::requeue,
                    "When the time-limit signal (or another stop signal) stops training before "
                    "its end, the ranks save a checkpoint and the job requeues itself to resume "
                    "from it; needs checkpoint.save."));
    out.push_back(c("signal_seconds", &S::signal_seconds,
                    "Seconds before the time limit at which Slurm sends the ranks SIGUSR1 to save "
                    "and stop (sbatch --signal=USR1@N; Slurm may send it up to 60 s earlier).",
                    Limits{.min = 60, .max = 65535}));
    out.push_back(c("sbatch", &S::sbatch,
                    "Further sbatch options, one per entry, as on sbatch's command line, e.g. "
                    "--reservation=big."));
    out.push_back(c("srun", &S::srun,
                    "Further srun options for the ranks' step, e.g. --container-image=IMAGE."));
    out.push_back(c("setup", &S::setup,
                    "Shell lines the batch script runs before it starts the ranks, e.g. module "
                    "load cuda."));
  }
  return out;
}

std::vector<FieldSpec> build_fields() {
  std::vector<FieldSpec> all;
  for (auto part : {model_fields(), parallel_fields(), precision_fields(), training_fields(),
                    data_fields(), other_fields()})
    for (auto& f : part) all.push_back(std::move(f));
  return all;
}

}  // namespace

std::string FieldSpec::type_description() const {
  auto bounds = [&]() -> std::string {
    std::string out;
    auto text = [](double v) { return codec::bound_text(v); };
    if (minimum && maximum && !minimum_exclusive)
      return " in [" + text(*minimum) + ", " + text(*maximum) + "]";
    if (minimum) out += (minimum_exclusive ? " > " : " >= ") + text(*minimum);
    if (maximum) out += (minimum ? " and <= " : " <= ") + text(*maximum);
    return out;
  };
  switch (kind) {
    case ValueKind::Integer: return "an integer" + bounds();
    case ValueKind::Number: return "a number" + bounds();
    case ValueKind::Boolean: return "true or false";
    case ValueKind::String: return "a string";
    case ValueKind::Choice: {
      std::string list;
      for (const auto& c : choices) list += (list.empty() ? "" : ", ") + c;
      return "one of " + list;
    }
    case ValueKind::IntegerList: return "a list of integers" + bounds();
    case ValueKind::NumberList: return "a list of numbers" + bounds();
    case ValueKind::StringList: return "a list of strings";
    case ValueKind::TaskList: return "a list of tasks";
  }
  return "a value";
}

const std::vector<SectionSpec>& sections() {
  static const std::vector<SectionSpec> all{
      {"model", "Architecture: family, shape, positions, norms, activation, dropout, init."},
      {"parallel", "Layout over ranks: tensor, pipeline, context and data parallelism."},
      {"precision", "Number formats and f16 loss scaling."},
      {"training", "Batch sizes, length, optimizer, learning-rate schedule, recompute."},
      {"data", "Datasets, blending, sequence length and tokenizer."},
      {"checkpoint", "Where and how often to save, and what to load."},
      {"logging", "What is printed and recorded, and where."},
      {"eval", "Validation during training, and the downstream tasks `megatron eval` runs."},
      {"finetune", "Classification fine-tuning from a pre-trained checkpoint (Megatron's tasks/)."},
      {"generation", "What generate and serve do unless a flag or request says otherwise (a "
                     "Hugging Face import's generation_config.json)."},
      {"cluster", "Nodes, GPUs per node, hardware profile, Slurm settings."},
  };
  return all;
}

const std::vector<FieldSpec>& fields() {
  static const std::vector<FieldSpec> all = build_fields();
  return all;
}

const FieldSpec* find_field(const std::string& path) {
  for (const auto& f : fields())
    if (f.path == path) return &f;
  return nullptr;
}

std::vector<std::string> field_keys_of(const std::string& section) {
  std::vector<std::string> out;
  for (const auto& f : fields())
    if (f.section == section) out.push_back(f.key);
  return out;
}

std::vector<std::string> section_names() {
  std::vector<std::string> out;
  for (const auto& s : sections()) out.push_back(s.name);
  return out;
}

std::vector<std::string> field_paths() {
  std::vector<std::string> out;
  for (const auto& f : fields()) out.push_back(f.path);
  return out;
}

}  // namespace megatron::recipe
