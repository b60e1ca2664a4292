#include <fmt/format.h>

#include <regex>
#include <utility>

#include "core/printable.hpp"
#include "recipe/checks.hpp"
#include "recipe/enum_names.hpp"
#include "recipe/schema.hpp"

namespace megatron::recipe {
namespace {

// libstdc++'s std::regex recurses once per character and overflows the stack on long text
// (200,000 digits crash it); no valid split or time limit is anywhere near this long.
bool fits_a_regex(const std::string& text) { return text.size() <= 256; }

// The format of finetune.train_data decides which finetune keys act; a key of another format
// (or any with no train_data) is refused rather than ignored.
void check_finetune_format(const Recipe& r, const Locator& where) {
  const FinetuneSection& ft = r.finetune;
  // A full recipe (a checkpoint's, `recipe show`'s) writes every key out: only a value other
  // than the default is one that would be ignored.
  const FinetuneSection defaults;
  struct Key {
    const char* path;
    bool acts;
    bool changed;
  };
  const bool data = ft.train_data.has_value();
  const bool classifier = data && is_classification(ft.format);
  const bool jsonl = classifier && ft.format == FinetuneFormat::Jsonl;
  const bool sft = data && ft.format == FinetuneFormat::Sft;
  const bool chat = data && ft.format == FinetuneFormat::Chat;
  const bool seq2seq = data && ft.format == FinetuneFormat::Seq2Seq;
  for (const Key& key :
       {Key{"finetune.valid_data", data, ft.valid_data.has_value()},
        Key{"finetune.format", data, ft.format != defaults.format},
        Key{"finetune.pretrained", data, ft.pretrained.has_value()},
        Key{"finetune.text_field", jsonl, ft.text_field != defaults.text_field},
        Key{"finetune.text_b_field", jsonl, ft.text_b_field.has_value()},
        Key{"finetune.label_field", jsonl, ft.label_field != defaults.label_field},
        Key{"finetune.labels", jsonl, !ft.labels.empty()},
        Key{"finetune.prompt_field", sft, ft.prompt_field != defaults.prompt_field},
        Key{"finetune.response_field", sft, ft.response_field != defaults.response_field},
        Key{"finetune.messages_field", chat, ft.messages_field != defaults.messages_field},
        Key{"finetune.chat_template", chat, ft.chat_template != defaults.chat_template},
        Key{"finetune.pack", sft || chat, ft.pack != defaults.pack},
        Key{"finetune.source_field", seq2seq, ft.source_field != defaults.source_field},
        Key{"finetune.target_field", seq2seq, ft.target_field != defaults.target_field}}) {
    if (!key.changed || key.acts) continue;
    fail_at(where.at(key.path),
            data ? fmt::format("{} is not read by finetune.format: {}; remove it or change the format",
                               key.path, name_of(ft.format))
                 : fmt::format("{} belongs to fine-tuning: set finetune.train_data too, or remove it",
                               key.path));
  }
  if ((sft || chat) && r.model.arch != Arch::Gpt) {
    fail_at(where.at("finetune.format"),
            fmt::format("finetune.format: {} trains a gpt model's language-model head; for t5 use "
                        "seq2seq, for bert a classifier (jsonl)",
                        name_of(ft.format)));
  }
  if (seq2seq && r.model.arch != Arch::T5) {
    fail_at(where.at("finetune.format"),
            "finetune.format: seq2seq trains an encoder-decoder (arch: t5); for gpt use sft");
  }
}

}  // namespace

Origin Locator::at(const std::string& path) const {
  if (auto it = provenance_.find(path); it != provenance_.end()) return it->second;
  Origin o;
  o.file = file_;
  return o;
}

std::string Locator::name(const std::string& path, const std::string& value) const {
  if (provenance_.contains(path)) return path + " (" + value + ")";
  return path + " (" + value + ", the default)";
}

// MockBertSource::kFirstWord: the ids mock BERT data keeps for its special tokens.
constexpr int64_t kMockBertSpecialTokens = 4;

void check_fields(const Recipe& r, const Locator& where) {
  if (!r.model.flash_attention) {
    // The planner can count the s x s scores (Megatron's paper formulas do), but the engine has
    // only the memory-efficient kernel: accepting false would plan one thing and run another.
    fail_at(where.at("model.flash_attention"),
            "model.flash_attention: false asks for attention that stores the sequence x sequence "
            "scores, which this engine does not have: it always runs the memory-efficient kernel "
            "(same results, less memory); remove the key or set it to true");
  }
  const auto& l = r.logging;
  if (l.profile_step_end <= l.profile_step_start)
    fail_at(where.at("logging.profile_step_end"),
            fmt::format("logging.profile_step_end ({}) must be after profile_step_start ({}): "
                        "iterations {} up to, not including, the end are profiled; set it to at "
                        "least {}",
                        l.profile_step_end, l.profile_step_start, l.profile_step_start,
                        l.profile_step_start + 1));
  if (l.profile && l.profile_ranks.empty())
    fail_at(where.at("logging.profile_ranks"),
            "logging.profile_ranks is empty, so no rank would profile: list at least one rank "
            "(e.g. [0]) or set logging.profile to false");
  const auto& t = r.training;
  int lengths = int(t.train_iters.has_value()) + int(t.train_samples.has_value()) +
                int(t.train_tokens.has_value());
  if (lengths > 1) {
    const std::string second = t.train_samples && t.train_iters ? "training.train_samples"
                                                                : "training.train_tokens";
    fail_at(where.at(second),
            "give only one of training.train_iters, train_samples and train_tokens; remove " +
                second + " or set the others to null");
  }
  const FinetuneSection& ft = r.finetune;
  check_finetune_format(r, where);
  if (ft.train_data) {
    if (r.model.arch == Arch::T5 && is_classification(ft.format)) {
      fail_at(where.at("finetune.train_data"),
              "classification fine-tuning takes a gpt or bert model, not t5 (t5 takes "
              "finetune.format: seq2seq)");
    }
    if (!r.data.prefixes.empty() || r.data.mock) {
      fail_at(where.at(r.data.mock ? "data.mock" : "data.prefixes"),
              "fine-tuning reads finetune.train_data: remove data.prefixes (data.prefixes=[]) and "
              "data.mock");
    }
    if (ft.format == FinetuneFormat::Jsonl && ft.labels.size() < 2) {
      fail_at(where.at("finetune.labels"),
              "jsonl fine-tuning needs finetune.labels: the class names in id order, at least two "
              "(e.g. [negative, positive]); for instruction tuning set finetune.format: sft or chat");
    }
    for (size_t i = 0; i < ft.labels.size(); ++i) {
      for (size_t j = 0; j < i; ++j) {
        if (ft.labels[i] == ft.labels[j]) {
          fail_at(where.at("finetune.labels"), "finetune.labels names '" + ft.labels[i] + "' twice");
        }
      }
    }
  }
  if (t.lr_warmup_fraction && t.lr_warmup_iters > 0)
    fail_at(where.at("training.lr_warmup_fraction"),
            "training.lr_warmup_fraction and lr_warmup_iters both set the warmup; keep one");
  if (t.min_lr > t.lr)
    fail_at(where.at("training.min_lr"),
            fmt::format("training.min_lr ({}) is above training.lr ({}); the rate decays to "
                        "min_lr, so make it <= lr",
                        t.min_lr, t.lr));
  if (t.lr_wsd_decay_iters && t.lr_decay_style != LrDecay::Wsd)
    fail_at(where.at("training.lr_wsd_decay_iters"),
            "training.lr_wsd_decay_iters is only used with lr_decay_style: wsd");
  if (!t.rampup_batch_size.empty()) {
    if (t.rampup_batch_size.size() != 3)
      fail_at(where.at("training.rampup_batch_size"),
              fmt::format("training.rampup_batch_size takes [start, increment, ramp samples], got "
                          "{} numbers",
                          t.rampup_batch_size.size()));
    const int64_t start = t.rampup_batch_size[0], step = t.rampup_batch_size[1];
    if (start > t.global_batch_size)
      fail_at(where.at("training.rampup_batch_size"),
              fmt::format("the batch ramp-up starts at {}, above training.global_batch_size {}; "
                          "start at or below the global batch",
                          start, t.global_batch_size));
    if ((t.global_batch_size - start) % step != 0)
      fail_at(where.at("training.rampup_batch_size"),
              fmt::format("batch ramp-up from {} in steps of {} does not reach "
                          "training.global_batch_size {}: ({} - {}) % {} = {}",
                          start, step, t.global_batch_size, t.global_batch_size, start, step,
                          (t.global_batch_size - start) % step));
  }
  if (t.micro_batch_size > t.global_batch_size)
    fail_at(where.at("training.micro_batch_size"),
            fmt::format("training.micro_batch_size ({}) is larger than global_batch_size ({})",
                        t.micro_batch_size, t.global_batch_size));
  if (t.recompute_num_layers && t.recompute != Recompute::Full)
    fail_at(where.at("training.recompute_num_layers"),
            "training.recompute_num_layers applies to recompute: full only");

  const auto& m = r.model;
  if (m.decoder_num_layers && m.arch != Arch::T5)
    fail_at(where.at("model.decoder_num_layers"),
            "model.decoder_num_layers is only used by arch: t5");
  for (const auto& [key, set] : {std::pair{"data.mask_prob", r.data.mask_prob.has_value()},
                                 std::pair{"data.short_seq_prob", r.data.short_seq_prob.has_value()},
                                 std::pair{"data.masking_max_ngram", r.data.masking_max_ngram.has_value()},
                                 std::pair{"data.masking_full_word", r.data.masking_full_word.has_value()},
                                 std::pair{"data.vocab_extra_ids", r.data.vocab_extra_ids.has_value()}}) {
    if (set && m.arch == Arch::Gpt)
      fail_at(where.at(key), fmt::format("{} is only used by arch: bert and t5", key));
  }
  for (const auto& [key, set] : {std::pair{"data.reset_position_ids", r.data.reset_position_ids},
                                 std::pair{"data.reset_attention_mask", r.data.reset_attention_mask},
                                 std::pair{"data.eod_mask_loss", r.data.eod_mask_loss}}) {
    if (set && m.arch != Arch::Gpt)
      fail_at(where.at(key), fmt::format("{} is only used by arch: gpt (its documents are packed "
                                         "into sequences; BERT and T5 samples hold one each)",
                                         key));
  }
  if (m.position_embedding == PositionEmbedding::Relative && m.arch != Arch::T5)
    fail_at(where.at("model.position_embedding"),
            "model.position_embedding: relative is T5's relative position bias; use learned or "
            "rope for arch: gpt and bert");
  if (m.qk_layernorm && m.normalization != Norm::RmsNorm)
    fail_at(where.at("model.qk_layernorm"),
            "model.qk_layernorm: the query and key norms are RMS norms (Qwen3's, OLMo 2's); set "
            "model.normalization: rmsnorm");
  if (m.sliding_window && m.arch != Arch::Gpt)
    fail_at(where.at("model.sliding_window"), "model.sliding_window is Mistral's causal attention window: "
                                              "arch: gpt only");
  if (m.sliding_window && r.data.seq_length > *m.sliding_window)
    fail_at(where.at("model.sliding_window"),
            fmt::format("data.seq_length ({}) exceeds model.sliding_window ({}): the engine computes full "
                        "attention, which equals the window's only for sequences up to it; lower "
                        "data.seq_length to {} or less",
                        r.data.seq_length, *m.sliding_window, *m.sliding_window));
  if (m.rope_scaling != RopeScaling::None && m.position_embedding != PositionEmbedding::Rotary)
    fail_at(where.at("model.rope_scaling"), "model.rope_scaling scales rotary frequencies: it needs "
                                            "model.position_embedding: rope");
  for (const auto& [key, set] :
       {std::pair{"model.rope_scaling_factor", m.rope_scaling_factor.has_value()},
        std::pair{"model.rope_original_max_position_embeddings", m.rope_original_max_position_embeddings.has_value()},
        std::pair{"model.rope_low_freq_factor", m.rope_low_freq_factor.has_value()},
        std::pair{"model.rope_high_freq_factor", m.rope_high_freq_factor.has_value()},
        std::pair{"model.rope_beta_fast", m.rope_beta_fast.has_value()},
        std::pair{"model.rope_beta_slow", m.rope_beta_slow.has_value()},
        std::pair{"model.rope_truncate", m.rope_truncate.has_value()},
        std::pair{"model.rope_attention_factor", m.rope_attention_factor.has_value()}}) {
    const std::string_view k = key;
    // Which scalings read the key.
    const bool any = k == "model.rope_scaling_factor";
    const bool both = k == "model.rope_original_max_position_embeddings";
    const bool llama3 = k == "model.rope_low_freq_factor" || k == "model.rope_high_freq_factor";
    const bool reads = any ? m.rope_scaling != RopeScaling::None
                       : both ? (m.rope_scaling == RopeScaling::Llama3 || m.rope_scaling == RopeScaling::Yarn)
                       : llama3 ? m.rope_scaling == RopeScaling::Llama3
                                : m.rope_scaling == RopeScaling::Yarn;
    if (set && !reads)
      fail_at(where.at(key), fmt::format("{} is only used with model.rope_scaling: {}", key,
                                         any ? "linear, llama3 or yarn"
                                         : both ? "llama3 or yarn"
                                         : llama3 ? "llama3" : "yarn"));
  }
  if ((m.rope_scaling == RopeScaling::Linear || m.rope_scaling == RopeScaling::Yarn) && !m.rope_scaling_factor)
    fail_at(where.at("model.rope_scaling"), fmt::format("model.rope_scaling: {} needs model.rope_scaling_factor",
                                                        name_of(m.rope_scaling)));
  if (m.rope_scaling == RopeScaling::Llama3 &&
      m.rope_high_freq_factor.value_or(4.0) <= m.rope_low_freq_factor.value_or(1.0))
    fail_at(where.at(m.rope_high_freq_factor ? "model.rope_high_freq_factor" : "model.rope_low_freq_factor"),
            "model.rope_high_freq_factor must exceed model.rope_low_freq_factor (the blend lies between)");
  for (const auto& [key, set] :
       {std::pair{"model.relative_attention_num_buckets", m.relative_attention_num_buckets.has_value()},
        std::pair{"model.relative_attention_max_distance", m.relative_attention_max_distance.has_value()}}) {
    if (set && m.position_embedding != PositionEmbedding::Relative)
      fail_at(where.at(key), fmt::format("{} is only used with model.position_embedding: relative", key));
  }
  if (m.relative_attention_max_distance &&
      *m.relative_attention_max_distance <= m.relative_attention_num_buckets.value_or(32) / 2)
    fail_at(where.at("model.relative_attention_max_distance"),
            fmt::format("model.relative_attention_max_distance ({}) must exceed half the buckets ({}): "
                        "the logarithmic buckets start there",
                        *m.relative_attention_max_distance,
                        m.relative_attention_num_buckets.value_or(32) / 2));
  // Mock BERT data (train/mock_data.hpp) keeps ids 0..3 for [PAD], [CLS], [SEP] and [MASK] and
  // draws its words from the ids past them: it needs two at least.
  if (r.data.mock && m.arch == Arch::Bert && m.vocab_size < kMockBertSpecialTokens + 2)
    fail_at(where.at("model.vocab_size"),
            fmt::format("model.vocab_size ({}) leaves fewer than 2 word ids beside the {} special "
                        "tokens of mock BERT data ([PAD], [CLS], [SEP], [MASK]); raise it to at "
                        "least {}",
                        m.vocab_size, kMockBertSpecialTokens, kMockBertSpecialTokens + 2));
  if (r.data.decoder_seq_length && m.arch != Arch::T5)
    fail_at(where.at("data.decoder_seq_length"), "data.decoder_seq_length is only used by arch: t5");
  if (!m.kv_channels && m.hidden_size % m.num_attention_heads != 0)
    fail_at(where.at("model.num_attention_heads"),
            fmt::format("model.hidden_size ({}) is not divisible by num_attention_heads ({}): "
                        "{} % {} = {}; change one, or set model.kv_channels",
                        m.hidden_size, m.num_attention_heads, m.hidden_size,
                        m.num_attention_heads, m.hidden_size % m.num_attention_heads));
  if (m.num_query_groups) {
    if (*m.num_query_groups > m.num_attention_heads || m.num_attention_heads % *m.num_query_groups)
      fail_at(where.at("model.num_query_groups"),
              fmt::format("model.num_attention_heads ({}) is not a multiple of num_query_groups "
                          "({}); each key/value group serves a whole number of heads",
                          m.num_attention_heads, *m.num_query_groups));
  }
  if (m.max_position_embeddings && m.position_embedding == PositionEmbedding::Learned &&
      *m.max_position_embeddings < r.data.seq_length)
    fail_at(where.at("model.max_position_embeddings"),
            fmt::format("data.seq_length ({}) exceeds model.max_position_embeddings ({}): learned "
                        "positions only cover {} tokens; raise max_position_embeddings or shorten "
                        "the sequence",
                        r.data.seq_length, *m.max_position_embeddings, *m.max_position_embeddings));

  const auto& d = r.data;
  if (!d.weights.empty() && d.weights.size() != d.prefixes.size())
    fail_at(where.at("data.weights"),
            fmt::format("data.weights has {} entries but data.prefixes has {}; give one weight "
                        "per dataset",
                        d.weights.size(), d.prefixes.size()));
  static const std::regex split_format(R"(\s*\d+(\.\d+)?\s*(,\s*\d+(\.\d+)?\s*){0,2})");
  if (!fits_a_regex(d.split) || !std::regex_match(d.split, split_format))
    fail_at(where.at("data.split"), "data.split '" + printable(d.split) +
                                        "' is not like 969,30,1 (train,valid,test proportions)");

  const auto& p = r.precision;
  if (p.min_loss_scale > p.initial_loss_scale)
    fail_at(where.at("precision.min_loss_scale"),
            "precision.min_loss_scale is above initial_loss_scale");

  check_slurm_fields(r, where);
}

}  // namespace megatron::recipe
