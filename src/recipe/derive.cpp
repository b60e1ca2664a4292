#include <fmt/format.h>

#include "recipe/batch_ramp.hpp"
#include "recipe/checks.hpp"
#include "recipe/enum_names.hpp"
#include "recipe/schema.hpp"

namespace megatron::recipe {
namespace {

// Heads are at most 10^5 (the schema's ceiling), so this loop is short.
std::string divisors_of(int64_t n) {
  std::string out;
  for (int64_t d = 1; d <= n; ++d)
    if (n % d == 0) out += (out.empty() ? "" : ", ") + std::to_string(d);
  return out;
}

class Deriver {
 public:
  Deriver(const Recipe& r, const Locator& where) : r_(r), where_(where) {}

  void note(std::string name, int64_t value, std::string how) {
    d_.log.push_back({std::move(name), std::to_string(value), std::move(how)});
  }
  void note(std::string name, std::string value, std::string how) {
    d_.log.push_back({std::move(name), std::move(value), std::move(how)});
  }
  // Checked arithmetic: an overflow is an error at `path`, naming `what`.
  int64_t mul(int64_t a, int64_t b, const std::string& path, std::string_view what) const {
    return mul_at(where_, path, a, b, what);
  }
  int64_t add(int64_t a, int64_t b, const std::string& path, std::string_view what) const {
    return add_at(where_, path, a, b, what);
  }
  int64_t round_up(int64_t value, int64_t multiple, const std::string& path,
                   std::string_view what) const {
    return add(value, multiple - 1, path, what) / multiple * multiple;
  }

  Derived run() {
    attention();
    widths();
    sequence();
    schedule_lengths();
    const FinetuneSection& ft = r_.finetune;
    d_.classes = !ft.train_data || !is_classification(ft.format) ? 0
                 : ft.format == FinetuneFormat::Mnli              ? 3
                 : ft.format == FinetuneFormat::Qqp               ? 2
                                                                  : int64_t(ft.labels.size());
    return d_;
  }

 private:
  void attention() {
    const auto& m = r_.model;
    const int64_t tp = r_.parallel.tensor;
    if (m.num_attention_heads % tp != 0)
      fail_at(where_.at("parallel.tensor"),
              fmt::format("model.num_attention_heads ({}) is not divisible by parallel.tensor "
                          "({}): {} % {} = {}; each tensor-parallel rank needs whole heads, so "
                          "use a tensor size among {}",
                          m.num_attention_heads, tp, m.num_attention_heads, tp,
                          m.num_attention_heads % tp, divisors_of(m.num_attention_heads)));
    d_.num_query_groups = m.num_query_groups.value_or(m.num_attention_heads);
    if (d_.num_query_groups % tp != 0)
      fail_at(where_.at("model.num_query_groups"),
              fmt::format("model.num_query_groups ({}) is not divisible by parallel.tensor ({}): "
                          "{} % {} = {}; each tensor-parallel rank needs whole key/value groups",
                          d_.num_query_groups, tp, d_.num_query_groups, tp,
                          d_.num_query_groups % tp));
    if (m.num_query_groups)
      note("query groups", d_.num_query_groups,
           fmt::format("{} heads share {} key/value heads ({} each)", m.num_attention_heads,
                       d_.num_query_groups, m.num_attention_heads / d_.num_query_groups));
    if (m.kv_channels) {
      d_.head_dim = *m.kv_channels;
    } else {
      d_.head_dim = m.hidden_size / m.num_attention_heads;
      note("head dim", d_.head_dim,
           fmt::format("hidden {} / heads {}", m.hidden_size, m.num_attention_heads));
    }
    d_.add_qkv_bias = m.add_qkv_bias.value_or(m.add_bias_linear);
  }

  void widths() {
    const auto& m = r_.model;
    if (m.ffn_hidden_size) {
      d_.ffn_hidden_size = *m.ffn_hidden_size;
    } else if (m.activation == Activation::Swiglu) {
      const std::string_view what = "the SwiGLU ffn hidden size (8/3 x model.hidden_size)";
      const int64_t eight_h = mul(8, m.hidden_size, "model.hidden_size", what);
      d_.ffn_hidden_size =
          round_up(eight_h / 3 + (eight_h % 3 ? 1 : 0), 256, "model.hidden_size", what);
      note("ffn hidden size", d_.ffn_hidden_size,
           fmt::format("SwiGLU: 8/3 x hidden {} rounded up to a multiple of 256", m.hidden_size));
    } else {
      d_.ffn_hidden_size =
          mul(4, m.hidden_size, "model.hidden_size", "the ffn hidden size (4 x model.hidden_size)");
      note("ffn hidden size", d_.ffn_hidden_size, fmt::format("4 x hidden {}", m.hidden_size));
    }
    const int64_t tp = r_.parallel.tensor;
    if (d_.ffn_hidden_size % tp != 0)
      fail_at(where_.at("model.ffn_hidden_size"),
              fmt::format("the ffn hidden size ({}) is not divisible by parallel.tensor ({}): "
                          "{} % {} = {}",
                          d_.ffn_hidden_size, tp, d_.ffn_hidden_size, tp, d_.ffn_hidden_size % tp));
    const int64_t multiple =
        mul(m.make_vocab_size_divisible_by, tp, "model.make_vocab_size_divisible_by",
            "the vocabulary padding (model.make_vocab_size_divisible_by x parallel.tensor)");
    d_.padded_vocab_size = round_up(m.vocab_size, multiple, "model.vocab_size",
                                    "the padded vocabulary (model.vocab_size rounded up)");
    note("padded vocab", d_.padded_vocab_size,
         fmt::format("vocab {} rounded up to a multiple of {} x tensor {} = {} (+{} rows)",
                     m.vocab_size, m.make_vocab_size_divisible_by, tp, multiple,
                     d_.padded_vocab_size - m.vocab_size));
  }

  void sequence() {
    const auto& m = r_.model;
    const int64_t s = r_.data.seq_length;
    if (m.max_position_embeddings) {
      d_.max_position_embeddings = *m.max_position_embeddings;
    } else {
      d_.max_position_embeddings = s;
      if (m.position_embedding == PositionEmbedding::Learned)
        note("max position embeddings", s, "data.seq_length");
    }
    if (m.arch == Arch::T5) {
      d_.decoder_num_layers = m.decoder_num_layers.value_or(m.num_layers);
      d_.decoder_seq_length = r_.data.decoder_seq_length.value_or(s);
      d_.vocab_extra_ids = r_.data.vocab_extra_ids.value_or(100);
      if (!r_.data.vocab_extra_ids) note("vocab extra ids", 100, "arch: t5 (Megatron's T5 example)");
      if (d_.vocab_extra_ids == 0)
        fail_at(where_.at("data.vocab_extra_ids"),
                "T5 replaces each masked span by a sentinel token: set data.vocab_extra_ids to at "
                "least 1 (Megatron's T5 example uses 100)");
      // The decoder looks its positions up in the same learned table as the encoder; relative
      // attention buckets have no table to run past.
      if (d_.decoder_seq_length > d_.max_position_embeddings &&
          m.position_embedding == PositionEmbedding::Learned)
        fail_at(where_.at("data.decoder_seq_length"),
                fmt::format("data.decoder_seq_length ({}) exceeds model.max_position_embeddings "
                            "({}): learned positions only cover {} tokens; raise "
                            "max_position_embeddings or shorten decoder_seq_length",
                            d_.decoder_seq_length, d_.max_position_embeddings,
                            d_.max_position_embeddings));
    } else {
      d_.vocab_extra_ids = r_.data.vocab_extra_ids.value_or(0);
    }
    const auto& p = r_.parallel;
    if (p.sequence_parallel && p.tensor == 1)
      fail_at(where_.at("parallel.sequence_parallel"),
              "parallel.sequence_parallel shards along tensor-parallel ranks and needs "
              "parallel.tensor > 1; set it to false or raise parallel.tensor");
    if (p.sequence_parallel && s % p.tensor != 0)
      fail_at(where_.at("data.seq_length"),
              fmt::format("with sequence parallelism data.seq_length ({}) must be divisible by "
                          "parallel.tensor ({}): {} % {} = {}",
                          s, p.tensor, s, p.tensor, s % p.tensor));
    if (p.sequence_parallel && m.arch == Arch::T5 && d_.decoder_seq_length % p.tensor != 0)
      fail_at(where_.at("data.decoder_seq_length"),
              fmt::format("with sequence parallelism data.decoder_seq_length ({}) must be divisible "
                          "by parallel.tensor ({}): {} % {} = {}",
                          d_.decoder_seq_length, p.tensor, d_.decoder_seq_length, p.tensor,
                          d_.decoder_seq_length % p.tensor));
    const int64_t two_c = mul(2, p.context, "parallel.context", "2 x parallel.context");
    if (p.context > 1 && s % two_c != 0)
      fail_at(
          where_.at("data.seq_length"),
          fmt::format("with context parallelism data.seq_length ({}) must be divisible by 2 x "
                      "parallel.context = {} (each rank takes two balanced chunks): {} % {} = {}",
                      s, two_c, s, two_c, s % two_c));
  }

  void schedule_lengths() {
    const auto& t = r_.training;
    const int64_t B = t.global_batch_size;
    std::optional<int64_t> samples = t.train_samples;
    if (t.train_tokens) {
      const int64_t s = r_.data.seq_length;
      samples = add(*t.train_tokens, s - 1, "training.train_tokens",
                    "the training tokens rounded up to whole sequences") /
                s;
      note("train samples", *samples,
           fmt::format("train_tokens {} / seq_length {}, rounded up", *t.train_tokens, s));
    }
    const BatchRamp ramp = t.rampup_batch_size.empty()
                               ? BatchRamp{.global_batch = B}
                               : BatchRamp{.global_batch = B,
                                           .start = t.rampup_batch_size[0],
                                           .increment = t.rampup_batch_size[1],
                                           .samples = t.rampup_batch_size[2]};
    if (t.train_iters) {
      d_.train_iters = *t.train_iters;
      // The trainer counts consumed samples in 64 bits; refuse a length it could not count.
      at_key(where_, "training.train_iters", [&] { return ramp.samples_after(d_.train_iters); });
    } else if (samples) {
      // Megatron's ramp: the batch grows by the increment every ramp / ((B - start) / increment)
      // consumed samples and is B once the ramp's samples are consumed.
      d_.train_iters = ramp.iterations_for(*samples);
      note("train iterations", d_.train_iters,
           t.rampup_batch_size.empty()
               ? fmt::format("{} samples / global batch {}, rounded up", *samples, B)
               : fmt::format("{} samples with the batch ramping from {} to {} over {} samples",
                             *samples, ramp.start, B, ramp.samples));
    }
    if (r_.logging.profile && d_.train_iters > 0 && r_.logging.profile_step_start > d_.train_iters)
      fail_at(where_.at("logging.profile_step_start"),
              fmt::format("logging.profile_step_start is {} but training stops after iteration "
                          "{}: profile earlier iterations (e.g. --profile-steps 2:4)",
                          r_.logging.profile_step_start, d_.train_iters));
    d_.lr_decay_iters = t.lr_decay_iters.value_or(d_.train_iters);
    if (t.lr_warmup_fraction) {
      d_.lr_warmup_iters = static_cast<int64_t>(*t.lr_warmup_fraction * d_.lr_decay_iters);
      note("lr warmup iterations", d_.lr_warmup_iters,
           fmt::format("lr_warmup_fraction {} x decay iterations {}", *t.lr_warmup_fraction,
                       d_.lr_decay_iters));
    } else {
      d_.lr_warmup_iters = t.lr_warmup_iters;
    }
    if (t.lr_decay_style == LrDecay::Wsd) {
      d_.lr_wsd_decay_iters = t.lr_wsd_decay_iters.value_or(d_.lr_decay_iters / 10);
      if (!t.lr_wsd_decay_iters)
        note("lr wsd decay iterations", d_.lr_wsd_decay_iters,
             fmt::format("decay iterations {} / 10, rounded down", d_.lr_decay_iters));
    }
    if (d_.lr_decay_iters > 0 && d_.lr_warmup_iters > d_.lr_decay_iters) {
      // Name the keys that set both lengths, so the line says what to change.
      const std::string warmup = t.lr_warmup_fraction ? "training.lr_warmup_fraction"
                                                      : "training.lr_warmup_iters";
      const std::string decay = t.lr_decay_iters
                                    ? "training.lr_decay_iters"
                                    : "training.lr_decay_iters (unset, so training.train_iters)";
      fail_at(where_.at(warmup),
              fmt::format("the warmup ({} iterations, {}) is longer than the decay ({} iterations, "
                          "{}); lower {} to at most {} iterations or raise the decay",
                          d_.lr_warmup_iters, warmup, d_.lr_decay_iters, decay,
                          t.lr_warmup_fraction ? "training.lr_warmup_fraction so the warmup is"
                                               : "training.lr_warmup_iters",
                          d_.lr_decay_iters));
    }
  }

  const Recipe& r_;
  const Locator& where_;
  Derived d_;
};

}  // namespace

Derived derive(const Recipe& recipe, const Locator& where) {
  return Deriver(recipe, where).run();
}

}  // namespace megatron::recipe
