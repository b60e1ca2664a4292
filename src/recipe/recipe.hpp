// The Recipe: what the user asked for, typed and validated, with no behaviour of its own.
// Member initialisers are the defaults; src/recipe/schema.cpp describes each field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/tokenizer_kind.hpp"
#include "model/kinds.hpp"
#include "optim/kinds.hpp"

namespace megatron::recipe {

// The layers', the optimizer's and the tokenizer's choices belong to the folders that act on
// them; the recipe names them under the names it has always used.
using Arch = model::Arch;
using PositionEmbedding = model::PositionEmbedding;
using RopeScaling = model::RopeScaling;
using Norm = model::NormKind;
using Activation = model::Activation;
using Recompute = model::Recompute;
using Optimizer = optim::OptimizerKind;
using LrDecay = optim::LrDecay;
using WsdDecay = optim::WsdDecay;
using Tokenizer = data::TokenizerKind;
enum class Schedule { OneFOneB, Interleaved, AllForwardAllBackward };
enum class DType { F32, Bf16, F16 };
// Where a run computes; auto follows cluster.hardware (cpu for the cpu profile, else cuda).
enum class DeviceKind { Auto, Cpu, Cuda };
enum class LogLevel { Trace, Debug, Info, Warn, Error };
// How classification fine-tuning data is laid out: jsonl rows, or Megatron's GLUE TSV readers.
// Jsonl, Mnli, Qqp: labelled text for a classifier. Sft (prompt/response pairs) and Chat
// (message lists): a GPT language model trained on the responses. Seq2Seq: T5 source/target.
enum class FinetuneFormat { Jsonl, Mnli, Qqp, Sft, Chat, Seq2Seq };
enum class ChatTemplate { ChatMl, Plain, Qwen25, Qwen3, DeepSeekR1, MistralV1, MistralV3, Auto };  // data/chat_template.hpp

struct ModelSection {
  Arch arch = Arch::Gpt;
  int64_t num_layers = 0;                        // required; T5: encoder layers
  std::optional<int64_t> decoder_num_layers;     // T5 only; default num_layers
  int64_t hidden_size = 0;                       // required
  int64_t num_attention_heads = 0;               // required
  std::optional<int64_t> num_query_groups;       // grouped-query attention; default = heads
  std::optional<int64_t> kv_channels;            // head dim; default hidden / heads
  std::optional<int64_t> ffn_hidden_size;        // default 4h (GeLU) or 8h/3 rounded (SwiGLU)
  int64_t vocab_size = 0;                        // required: the tokenizer's vocabulary
  int64_t make_vocab_size_divisible_by = 128;    // padded vocab: multiple of this x TP
  std::optional<int64_t> max_position_embeddings;  // default data.seq_length
  PositionEmbedding position_embedding = PositionEmbedding::Learned;
  double rotary_base = 10000.0;
  double rotary_percent = 1.0;
  // RoPE scaling (transformers' rope_scaling / rope_parameters; Megatron's --use-rope-scaling and
  // --rope-scaling-factor): none, linear (factor required) or llama3 (Llama 3.1's defaults).
  RopeScaling rope_scaling = RopeScaling::None;
  std::optional<double> rope_scaling_factor;            // llama3: 8
  std::optional<int64_t> rope_original_max_position_embeddings;  // llama3: 8192
  std::optional<double> rope_low_freq_factor;           // llama3: 1
  std::optional<double> rope_high_freq_factor;          // llama3: 4
  std::optional<double> rope_beta_fast;                 // yarn: 32
  std::optional<double> rope_beta_slow;                 // yarn: 1
  std::optional<bool> rope_truncate;                    // yarn: true
  std::optional<double> rope_attention_factor;          // yarn: 0.1 ln(factor) + 1
  // Mistral's sliding-window attention span; sequences past it are refused, since the engine's
  // full attention equals the window's only up to it.
  std::optional<int64_t> sliding_window;
  // T5's relative position bias (position_embedding: relative): buckets and the distance the
  // last bucket starts at (Megatron's --relative-attention-num-buckets / -max-distance).
  std::optional<int64_t> relative_attention_num_buckets;   // 32
  std::optional<int64_t> relative_attention_max_distance;  // 128
  Norm normalization = Norm::LayerNorm;
  double norm_epsilon = 1e-5;
  Activation activation = Activation::Gelu;
  bool tie_embeddings = true;
  bool add_bias_linear = true;
  std::optional<bool> add_qkv_bias;              // default add_bias_linear
  // RMS norms on each query and key head before the rotation (Megatron's --qk-layernorm,
  // Qwen3's q_norm / k_norm); needs normalization: rmsnorm.
  bool qk_layernorm = false;
  double hidden_dropout = 0.1;
  double attention_dropout = 0.1;
  double init_method_std = 0.02;
  bool flash_attention = true;                   // memory-efficient attention core
  bool bert_binary_head = true;                  // BERT next-sentence head
};

struct ParallelSection {
  int64_t tensor = 1;
  int64_t pipeline = 1;
  int64_t context = 1;
  std::optional<int64_t> data;                   // default: world / (tensor x pipeline x context)
  int64_t virtual_pipeline = 1;                  // model chunks per pipeline rank
  std::optional<Schedule> schedule;              // default: interleaved when virtual > 1, else 1f1b
  std::vector<int64_t> layers_per_stage;         // explicit uneven split; empty = even
  bool sequence_parallel = false;
  bool distributed_optimizer = false;
  double timeout_minutes = 10.0;                 // watchdog: longest wait for a peer
  std::optional<int64_t> ddp_bucket_size;        // gradient elements per reduction bucket
};

struct PrecisionSection {
  DType dtype = DType::F32;
  double initial_loss_scale = 4294967296.0;      // 2^32, as Megatron
  double min_loss_scale = 1.0;
  int64_t loss_scale_window = 1000;
  int64_t hysteresis = 2;
  std::optional<double> loss_scale;              // fixed loss scale; dynamic when unset
  bool allow_tf32 = true;
};

struct TrainingSection {
  int64_t micro_batch_size = 0;                  // required
  int64_t global_batch_size = 0;                 // required
  std::optional<int64_t> train_iters;            // exactly one of iters / samples / tokens
  std::optional<int64_t> train_samples;
  std::optional<int64_t> train_tokens;
  std::vector<int64_t> rampup_batch_size;        // [start, increment, ramp samples]
  std::optional<double> exit_duration_minutes;   // wall-clock limit for the run
  Optimizer optimizer = Optimizer::AdamW;
  double lr = 0.0;                               // required
  double min_lr = 0.0;
  LrDecay lr_decay_style = LrDecay::Cosine;
  int64_t lr_warmup_iters = 0;
  std::optional<double> lr_warmup_fraction;      // of the decay iterations; exclusive with iters
  std::optional<int64_t> lr_decay_iters;         // default: train iterations
  std::optional<int64_t> lr_wsd_decay_iters;     // WSD: length of the final decay phase
  WsdDecay lr_wsd_decay_style = WsdDecay::Linear;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_eps = 1e-8;
  double sgd_momentum = 0.9;
  double weight_decay = 0.01;
  double clip_grad = 1.0;
  Recompute recompute = Recompute::None;
  std::optional<int64_t> recompute_num_layers;   // full recompute: blocks per stage; default all
  bool fused_classifier = true;                  // LM head + cross-entropy in chunks of tokens
  int64_t seed = 1234;
};

struct DataSection {
  std::vector<std::string> prefixes;             // indexed datasets (path without .bin/.idx)
  std::vector<double> weights;                   // blend weights; default equal
  std::string split = "969,30,1";                // train,valid,test proportions
  int64_t seq_length = 0;                        // required
  std::optional<int64_t> decoder_seq_length;     // T5 only
  Tokenizer tokenizer = Tokenizer::Gpt2Bpe;
  std::optional<std::string> vocab_file;
  std::optional<std::string> merge_file;
  std::optional<std::string> tokenizer_model;
  int64_t num_workers = 2;
  bool mock = false;                             // synthetic tokens, no dataset needed
  // GPT: documents packed into a sequence (Megatron's --reset-position-ids,
  // --reset-attention-mask, --eod-mask-loss), each keyed on the end-of-document token.
  bool reset_position_ids = false;               // positions restart after each end of document
  bool reset_attention_mask = false;             // attention never crosses an end of document
  bool eod_mask_loss = false;                    // the end-of-document token's loss is not counted
  // BERT's and T5's masked data (Megatron's --mask-prob, --short-seq-prob and the masking
  // settings of pretrain_bert.py / pretrain_t5.py); unset: those defaults. Only arch: bert and
  // t5 take them.
  std::optional<double> mask_prob;               // 0.15
  std::optional<double> short_seq_prob;          // 0.1
  std::optional<int64_t> masking_max_ngram;      // BERT 3, T5 10
  std::optional<bool> masking_full_word;         // true
  // Megatron's --vocab-extra-ids: sentinels <extra_id_i> appended to a WordPiece vocabulary
  // after [BOS] and [EOS]. T5 needs them (default 100); BERT takes them too (default 0).
  std::optional<int64_t> vocab_extra_ids;
};

struct CheckpointSection {
  std::optional<std::string> save;
  std::optional<std::string> load;
  std::optional<int64_t> interval;
  std::optional<int64_t> keep_last;
  bool async_save = false;
};

struct LoggingSection {
  int64_t interval = 10;
  LogLevel level = LogLevel::Info;
  std::optional<std::string> run_dir;
  std::optional<std::string> tensorboard_dir;
  // The per-op profile (docs/profiling.md): iterations [profile_step_start, profile_step_end)
  // of the ranks listed, as Megatron's --profile-step-start / --profile-step-end / --profile-ranks.
  bool profile = false;
  int64_t profile_step_start = 10;
  int64_t profile_step_end = 12;
  std::vector<int64_t> profile_ranks{0};
};

// One entry of eval.tasks: a downstream task `megatron eval CHECKPOINT` runs when no --task is
// given. The keys are the flags of `megatron eval` (docs/eval.md); data paths are resolved
// against the recipe's directory when read.
struct EvalTask {
  std::string task;  // perplexity, cloze or multiple-choice
  std::string data;
  std::optional<std::string> field, context_field, choices_field, gold_field, windows, fewshot_data;
  std::optional<std::string> prompt_field, answer_field, metrics;  // generation
  std::optional<int64_t> stride, num_fewshot, max_tokens;
  bool operator==(const EvalTask&) const = default;
};

struct EvalSection {
  std::optional<int64_t> interval;
  int64_t iters = 10;
  std::vector<EvalTask> tasks;
};

// Fine-tuning: set train_data and the run trains on it. Classification (Megatron's tasks/) trains
// a classifier head (BERT: the pooler on [CLS]; GPT: the last token) instead of the
// language-model heads; sft and chat train GPT's head on responses only; seq2seq trains T5.
struct FinetuneSection {
  std::optional<std::string> train_data;         // relative to the recipe
  std::optional<std::string> valid_data;
  FinetuneFormat format = FinetuneFormat::Jsonl;
  std::string text_field = "text";
  std::optional<std::string> text_b_field;       // sentence pairs
  std::string label_field = "label";
  std::vector<std::string> labels;               // class names in id order (jsonl)
  std::string prompt_field = "prompt";           // sft
  std::string response_field = "response";       // sft
  std::string messages_field = "messages";       // chat
  ChatTemplate chat_template = ChatTemplate::ChatMl;  // chat
  std::string source_field = "source";           // seq2seq
  std::string target_field = "target";           // seq2seq
  bool pack = true;                              // sft, chat: several examples per sequence
  std::optional<std::string> pretrained;         // checkpoint whose weights start the run
};

constexpr bool is_classification(FinetuneFormat f) {
  return f == FinetuneFormat::Jsonl || f == FinetuneFormat::Mnli || f == FinetuneFormat::Qqp;
}

// What `megatron generate` and `serve` do when a flag or request does not say: a Hugging Face
// import writes it from generation_config.json (its eos_token_id list, do_sample, temperature,
// top_k, top_p).
struct GenerationSection {
  // Tokens that end a generated sequence besides the tokenizer's end-of-document (Llama 3.1
  // Instruct's <|eom_id|> and <|eot_id|>, Qwen's <|im_end|>); not part of its text.
  std::vector<int64_t> stop_token_ids;
  std::optional<bool> do_sample;     // false: greedy
  std::optional<double> temperature;
  std::optional<int64_t> top_k;
  std::optional<double> top_p;
  bool sampling_set() const { return do_sample || temperature || top_k || top_p; }
};

struct ClusterSection {
  int64_t nodes = 1;
  int64_t gpus_per_node = 1;
  std::string hardware = "cpu";                  // profile name, see `megatron plan --help`
  DeviceKind device = DeviceKind::Auto;
  std::optional<std::string> partition;
  std::optional<std::string> account;
  std::optional<std::string> time_limit;         // Slurm format, e.g. 2-00:00:00
  // What `megatron submit` writes into the batch script (docs/slurm.md).
  std::optional<std::string> job_name;           // unset: the recipe file's stem
  std::optional<std::string> qos;
  std::optional<std::string> constraint;
  bool exclusive = false;
  std::optional<int64_t> cpus_per_task;
  std::optional<std::string> mail_user;
  std::optional<std::string> mail_type;          // e.g. END,FAIL
  bool requeue = true;                           // save and requeue on the time-limit signal
  int64_t signal_seconds = 300;                  // --signal=USR1@N before the time limit
  std::vector<std::string> sbatch;               // further sbatch options, one per entry
  std::vector<std::string> srun;                 // further srun options
  std::vector<std::string> setup;                // shell lines run before srun
};

struct Recipe {
  ModelSection model;
  ParallelSection parallel;
  PrecisionSection precision;
  TrainingSection training;
  DataSection data;
  CheckpointSection checkpoint;
  LoggingSection logging;
  EvalSection eval;
  FinetuneSection finetune;
  GenerationSection generation;
  ClusterSection cluster;
};

}  // namespace megatron::recipe
