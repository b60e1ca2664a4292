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
  std::string name(const std::string& path, int64_t value) const {
    return where_.name(path, std::to_string(value));
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

  Derived run(std::optional<int64_t> world_size) {
    layout(world_size);
    bucket_size();
    attention();
    widths();
    sequence();
    layers();
    batches();
    recompute();
    schedule_lengths();
    const FinetuneSection& ft = r_.finetune;
    d_.classes = !ft.train_data || !is_classification(ft.format) ? 0
                 : ft.format == FinetuneFormat::Mnli              ? 3
                 : ft.format == FinetuneFormat::Qqp               ? 2
                                                                  : int64_t(ft.labels.size());
    return d_;
  }

 private:
  void layout(std::optional<int64_t> world_size) {
    const auto& p = r_.parallel;
    if (world_size) {
      d_.world_size = *world_size;
      note("world size", d_.world_size, "ranks in the running job");
    } else {
      d_.world_size = mul(r_.cluster.nodes, r_.cluster.gpus_per_node, "cluster.nodes",
                          "the world size (cluster.nodes x gpus_per_node)");
      note("world size", d_.world_size,
           fmt::format("cluster.nodes {} x cluster.gpus_per_node {}", r_.cluster.nodes,
                       r_.cluster.gpus_per_node));
    }
    const std::string_view replica =
        "the ranks per model replica (parallel.tensor x pipeline x context)";
    const int64_t model_parallel = mul(mul(p.tensor, p.pipeline, "parallel.pipeline", replica),
                                       p.context, "parallel.context", replica);
    if (d_.world_size % model_parallel != 0)
      fail_at(where_.at(p.tensor > 1 ? "parallel.tensor" : "parallel.pipeline"),
              fmt::format("tensor {} x pipeline {} x context {} = {} ranks per model replica does "
                          "not divide the world size {}: {} % {} = {}; use a world size that is a "
                          "multiple of {} or change the layout",
                          p.tensor, p.pipeline, p.context, model_parallel, d_.world_size,
                          d_.world_size, model_parallel, d_.world_size % model_parallel,
                          model_parallel));
    d_.data_parallel = d_.world_size / model_parallel;
    if (p.data && *p.data != d_.data_parallel)
      fail_at(where_.at("parallel.data"),
              fmt::format("tensor {} x context {} x pipeline {} x data {} = {} ranks, but the "
                          "world has {}; set parallel.data to {} or remove it",
                          p.tensor, p.context, p.pipeline, *p.data,
                          mul(model_parallel, *p.data, "parallel.data",
                              "the ranks of the layout (parallel.tensor x pipeline x context x "
                              "data)"),
                          d_.world_size, d_.data_parallel));
    note("data-parallel size", d_.data_parallel,
         fmt::format("world {} / (tensor {} x pipeline {} x context {})", d_.world_size, p.tensor,
                     p.pipeline, p.context));
  }

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
    } else {
      d_.vocab_extra_ids = r_.data.vocab_extra_ids.value_or(0);
      if (d_.decoder_seq_length > d_.max_position_embeddings &&
          m.position_embedding == PositionEmbedding::Learned)
        fail_at(where_.at("data.decoder_seq_length"),
                fmt::format("data.decoder_seq_length ({}) exceeds the {} learned positions",
                            d_.decoder_seq_length, d_.max_position_embeddings));
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

  void layers() {
    const auto& p = r_.parallel;
    const int64_t pp = p.pipeline, vpp = p.virtual_pipeline;
    // T5 pipelines its encoder and decoder layers as one sequence of blocks.
    const int64_t total = add(r_.model.num_layers, d_.decoder_num_layers,
                              "model.decoder_num_layers", "the encoder + decoder layers");
    const int64_t chunk_count = mul(pp, vpp, "parallel.virtual_pipeline",
                                    "the model chunks (parallel.pipeline x virtual_pipeline)");
    const std::string layers_name =
        r_.model.arch == Arch::T5
            ? fmt::format("the {} encoder + {} decoder layers", r_.model.num_layers,
                          d_.decoder_num_layers)
            : name("model.num_layers", total);

    d_.schedule = p.schedule.value_or(vpp > 1 ? Schedule::Interleaved : Schedule::OneFOneB);
    if (!p.schedule)
      note("pipeline schedule", std::string(name_of(d_.schedule)),
           vpp > 1 ? "parallel.virtual_pipeline > 1" : "parallel.virtual_pipeline = 1");
    if (vpp > 1 && pp == 1)
      fail_at(where_.at("parallel.virtual_pipeline"),
              "parallel.virtual_pipeline > 1 interleaves pipeline stages and needs "
              "parallel.pipeline > 1");
    if (d_.schedule == Schedule::Interleaved && vpp == 1)
      fail_at(where_.at("parallel.schedule"),
              "the interleaved schedule needs parallel.virtual_pipeline > 1 (model chunks per "
              "stage)");
    if (d_.schedule != Schedule::Interleaved && vpp > 1)
      fail_at(where_.at("parallel.schedule"),
              fmt::format("parallel.virtual_pipeline ({}) needs schedule: interleaved, not {}", vpp,
                          name_of(d_.schedule)));

    if (!p.layers_per_stage.empty()) {
      const auto& split = p.layers_per_stage;
      if (static_cast<int64_t>(split.size()) != pp)
        fail_at(where_.at("parallel.layers_per_stage"),
                fmt::format("parallel.layers_per_stage lists {} stages but parallel.pipeline is "
                            "{}; give one number per stage",
                            split.size(), pp));
      int64_t sum = 0;
      for (const int64_t n : split)
        sum = add(sum, n, "parallel.layers_per_stage", "the layers of parallel.layers_per_stage");
      if (sum != total)
        fail_at(where_.at("parallel.layers_per_stage"),
                fmt::format("parallel.layers_per_stage adds up to {} layers but the model has {}",
                            sum, total));
      for (std::size_t s = 0; s < split.size(); ++s)
        if (split[s] % vpp != 0)
          fail_at(where_.at("parallel.layers_per_stage"),
                  fmt::format("stage {} has {} layers, not divisible into {} virtual chunks", s,
                              split[s], vpp));
      d_.layers_per_stage = split;
    } else {
      if (total % chunk_count != 0) {
        const std::string chunks =
            vpp > 1 ? fmt::format("pipeline {} x virtual_pipeline {} = {} model chunks", pp, vpp,
                                  chunk_count)
                    : fmt::format("parallel.pipeline ({})", pp);
        fail_at(where_.at(pp > 1 ? "parallel.pipeline" : "model.num_layers"),
                fmt::format("{} do not split evenly over {}: {} % {} = {}; change the layout or "
                            "give an uneven split with parallel.layers_per_stage",
                            layers_name, chunks, total, chunk_count, total % chunk_count));
      }
      d_.layers_per_stage.assign(pp, total / pp);
    }
    // Every chunk holds at least one layer (checked above), so this is at most `total` long.
    d_.layers_per_chunk.assign(chunk_count, 0);
    for (int64_t s = 0; s < pp; ++s)
      for (int64_t c = 0; c < vpp; ++c) d_.layers_per_chunk[c * pp + s] = d_.layers_per_stage[s] / vpp;
    std::string list;
    for (auto n : d_.layers_per_stage) list += (list.empty() ? "" : ", ") + std::to_string(n);
    note(
        "layers per stage", "[" + list + "]",
        p.layers_per_stage.empty()
            ? fmt::format("{} layers / pipeline {}{}", total, pp,
                          vpp > 1 ? fmt::format(", {} per virtual chunk", total / chunk_count) : "")
            : "parallel.layers_per_stage");
  }

  void batches() {
    const auto& t = r_.training;
    const int64_t per_step =
        mul(t.micro_batch_size, d_.data_parallel, "training.micro_batch_size",
            "the sequences per micro-batch step (training.micro_batch_size x data-parallel size)");
    if (t.global_batch_size % per_step != 0) {
      // The multiples either side of the batch (only the one above when the batch is smaller).
      const int64_t below = t.global_batch_size / per_step * per_step;
      const int64_t above =
          add(below, per_step, "training.global_batch_size", "the next valid global batch");
      fail_at(
          where_.at("training.global_batch_size"),
          fmt::format("training.global_batch_size ({}) is not divisible by micro_batch_size "
                      "({}) x data-parallel size ({}) = {}: {} % {} = {}; use a multiple of "
                      "{}, e.g. {}",
                      t.global_batch_size, t.micro_batch_size, d_.data_parallel, per_step,
                      t.global_batch_size, per_step, t.global_batch_size % per_step, per_step,
                      below > 0 ? fmt::format("{} or {}", below, above) : std::to_string(above)));
    }
    d_.num_microbatches = t.global_batch_size / per_step;
    note("micro-batches per iteration", d_.num_microbatches,
         fmt::format("global batch {} / (micro batch {} x data-parallel {})", t.global_batch_size,
                     t.micro_batch_size, d_.data_parallel));
    if (!t.rampup_batch_size.empty() && t.rampup_batch_size[0] % per_step != 0)
      fail_at(where_.at("training.rampup_batch_size"),
              fmt::format("the ramp-up start batch {} is not divisible by micro batch x "
                          "data-parallel = {}",
                          t.rampup_batch_size[0], per_step));
    if (!t.rampup_batch_size.empty() && t.rampup_batch_size[1] % per_step != 0)
      fail_at(where_.at("training.rampup_batch_size"),
              fmt::format("the ramp-up increment {} is not divisible by micro batch x "
                          "data-parallel = {}: every batch on the way must split into whole "
                          "micro-batches on each data-parallel rank",
                          t.rampup_batch_size[1], per_step));
    const int64_t per_round = d_.schedule == Schedule::Interleaved && !t.rampup_batch_size.empty()
                                  ? mul(per_step, r_.parallel.pipeline, "parallel.pipeline",
                                        "micro batch x data-parallel x parallel.pipeline")
                                  : per_step;
    if (!t.rampup_batch_size.empty() && d_.schedule == Schedule::Interleaved &&
        (t.rampup_batch_size[0] % per_round != 0 || t.rampup_batch_size[1] % per_round != 0))
      fail_at(where_.at("training.rampup_batch_size"),
              fmt::format("with the interleaved schedule every ramp-up batch must be a multiple "
                          "of micro batch x data-parallel x pipeline = {}; start {} and increment "
                          "{} are not",
                          per_round, t.rampup_batch_size[0], t.rampup_batch_size[1]));
    if (d_.schedule == Schedule::Interleaved && d_.num_microbatches % r_.parallel.pipeline != 0)
      fail_at(where_.at("training.global_batch_size"),
              fmt::format("the interleaved schedule needs the micro-batches per iteration ({}) "
                          "to be a multiple of parallel.pipeline ({}): {} % {} = {}",
                          d_.num_microbatches, r_.parallel.pipeline, d_.num_microbatches,
                          r_.parallel.pipeline, d_.num_microbatches % r_.parallel.pipeline));
  }

  void recompute() {
    const auto& t = r_.training;
    if (t.recompute != Recompute::Full) return;
    const int64_t most = *std::max_element(d_.layers_per_stage.begin(), d_.layers_per_stage.end());
    d_.recompute_num_layers = t.recompute_num_layers.value_or(most);
    if (d_.recompute_num_layers > most)
      fail_at(where_.at("training.recompute_num_layers"),
              fmt::format("training.recompute_num_layers ({}) exceeds the {} layers a stage holds",
                          d_.recompute_num_layers, most));
    if (!t.recompute_num_layers)
      note("recomputed layers per stage", d_.recompute_num_layers, "every layer of the stage");
  }

  // Megatron's default: 40M elements, growing with the data-parallel size so that each rank's
  // share of a bucket stays large enough to keep the links busy.
  void bucket_size() {
    const auto& p = r_.parallel;
    if (p.ddp_bucket_size) {
      d_.ddp_bucket_size = *p.ddp_bucket_size;
      return;
    }
    // data-parallel size <= 10^6 (the schema's ceiling on ranks): no overflow.
    d_.ddp_bucket_size = std::max<int64_t>(40'000'000, 1'000'000 * d_.data_parallel);
    note("ddp bucket size", d_.ddp_bucket_size,
         fmt::format("max(40,000,000, 1,000,000 x data-parallel size {})", d_.data_parallel));
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

Derived derive(const Recipe& recipe, const Locator& where, std::optional<int64_t> world_size) {
  return Deriver(recipe, where).run(world_size);
}

}  // namespace megatron::recipe
