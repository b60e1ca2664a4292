#include "plan/placement.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "recipe/checks.hpp"
#include "recipe/enum_names.hpp"

namespace megatron::plan {
namespace {

using recipe::fail_at;

class Placer {
 public:
  Placer(const recipe::CompiledRecipe& c, const recipe::Locator& where)
      : r_(c.recipe), dv_(c.derived), where_(where) {}

  Placement run(int64_t world_size) {
    layout(world_size);
    profile_ranks();
    bucket_size();
    layers();
    batches();
    recompute();
    return d_;
  }

 private:
  void note(std::string name, int64_t value, std::string how) {
    d_.log.push_back({std::move(name), std::to_string(value), std::move(how)});
  }
  void note(std::string name, std::string value, std::string how) {
    d_.log.push_back({std::move(name), std::move(value), std::move(how)});
  }
  std::string name(const std::string& path, int64_t value) const {
    return where_.name(path, std::to_string(value));
  }
  int64_t mul(int64_t a, int64_t b, const std::string& path, std::string_view what) const {
    return recipe::mul_at(where_, path, a, b, what);
  }
  int64_t add(int64_t a, int64_t b, const std::string& path, std::string_view what) const {
    return recipe::add_at(where_, path, a, b, what);
  }

  void layout(int64_t world_size) {
    const auto& p = r_.parallel;
    d_.world_size = world_size;
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

  // The profiled ranks must exist in this world.
  void profile_ranks() {
    const auto& l = r_.logging;
    if (!l.profile) return;
    for (int64_t rank : l.profile_ranks) {
      if (rank >= d_.world_size)
        fail_at(where_.at("logging.profile_ranks"),
                fmt::format("logging.profile_ranks lists rank {} but the world has {} rank{} "
                            "(0..{}); list ranks below {}",
                            rank, d_.world_size, d_.world_size == 1 ? "" : "s",
                            d_.world_size - 1, d_.world_size));
    }
  }

  void layers() {
    const auto& p = r_.parallel;
    const int64_t pp = p.pipeline, vpp = p.virtual_pipeline;
    // T5 pipelines its encoder and decoder layers as one sequence of blocks.
    const int64_t total = add(r_.model.num_layers, dv_.decoder_num_layers,
                              "model.decoder_num_layers", "the encoder + decoder layers");
    const int64_t chunk_count = mul(pp, vpp, "parallel.virtual_pipeline",
                                    "the model chunks (parallel.pipeline x virtual_pipeline)");
    const std::string layers_name =
        r_.model.arch == recipe::Arch::T5
            ? fmt::format("the {} encoder + {} decoder layers", r_.model.num_layers,
                          dv_.decoder_num_layers)
            : name("model.num_layers", total);

    d_.schedule = p.schedule.value_or(vpp > 1 ? recipe::Schedule::Interleaved : recipe::Schedule::OneFOneB);
    if (!p.schedule)
      note("pipeline schedule", std::string(recipe::name_of(d_.schedule)),
           vpp > 1 ? "parallel.virtual_pipeline > 1" : "parallel.virtual_pipeline = 1");
    if (vpp > 1 && pp == 1)
      fail_at(where_.at("parallel.virtual_pipeline"),
              "parallel.virtual_pipeline > 1 interleaves pipeline stages and needs "
              "parallel.pipeline > 1");
    if (d_.schedule == recipe::Schedule::Interleaved && vpp == 1)
      fail_at(where_.at("parallel.schedule"),
              "the interleaved schedule needs parallel.virtual_pipeline > 1 (model chunks per "
              "stage)");
    if (d_.schedule != recipe::Schedule::Interleaved && vpp > 1)
      fail_at(where_.at("parallel.schedule"),
              fmt::format("parallel.virtual_pipeline ({}) needs schedule: interleaved, not {}", vpp,
                          recipe::name_of(d_.schedule)));

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
    d_.microbatches = t.global_batch_size / per_step;
    note("micro-batches per iteration", d_.microbatches,
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
    const int64_t per_round = d_.schedule == recipe::Schedule::Interleaved && !t.rampup_batch_size.empty()
                                  ? mul(per_step, r_.parallel.pipeline, "parallel.pipeline",
                                        "micro batch x data-parallel x parallel.pipeline")
                                  : per_step;
    if (!t.rampup_batch_size.empty() && d_.schedule == recipe::Schedule::Interleaved &&
        (t.rampup_batch_size[0] % per_round != 0 || t.rampup_batch_size[1] % per_round != 0))
      fail_at(where_.at("training.rampup_batch_size"),
              fmt::format("with the interleaved schedule every ramp-up batch must be a multiple "
                          "of micro batch x data-parallel x pipeline = {}; start {} and increment "
                          "{} are not",
                          per_round, t.rampup_batch_size[0], t.rampup_batch_size[1]));
    if (d_.schedule == recipe::Schedule::Interleaved && d_.microbatches % r_.parallel.pipeline != 0)
      fail_at(where_.at("training.global_batch_size"),
              fmt::format("the interleaved schedule needs the micro-batches per iteration ({}) "
                          "to be a multiple of parallel.pipeline ({}): {} % {} = {}",
                          d_.microbatches, r_.parallel.pipeline, d_.microbatches,
                          r_.parallel.pipeline, d_.microbatches % r_.parallel.pipeline));
  }

  void recompute() {
    const auto& t = r_.training;
    if (t.recompute != recipe::Recompute::Full) return;
    const int64_t most = *std::max_element(d_.layers_per_stage.begin(), d_.layers_per_stage.end());
    d_.recompute_layers = t.recompute_num_layers.value_or(most);
    if (d_.recompute_layers > most)
      fail_at(where_.at("training.recompute_num_layers"),
              fmt::format("training.recompute_num_layers ({}) exceeds the {} layers a stage holds",
                          d_.recompute_layers, most));
    if (!t.recompute_num_layers)
      note("recomputed layers per stage", d_.recompute_layers, "every layer of the stage");
  }

  // Megatron's default: 40M elements, growing with the data-parallel size so that each rank's
  // share of a bucket stays large enough to keep the links busy.
  void bucket_size() {
    const auto& p = r_.parallel;
    if (p.ddp_bucket_size) {
      d_.bucket_elements = *p.ddp_bucket_size;
      return;
    }
    // data-parallel size <= 10^6 (the schema's ceiling on ranks): no overflow.
    d_.bucket_elements = std::max<int64_t>(40'000'000, 1'000'000 * d_.data_parallel);
    note("ddp bucket size", d_.bucket_elements,
         fmt::format("max(40,000,000, 1,000,000 x data-parallel size {})", d_.data_parallel));
  }


  const recipe::Recipe& r_;
  const recipe::Derived& dv_;
  const recipe::Locator& where_;
  Placement d_;
};

}  // namespace

Placement place(const recipe::CompiledRecipe& compiled) {
  const recipe::Locator where(compiled.provenance, compiled.file);
  return Placer(compiled, where).run(compiled.world_size);
}

}  // namespace megatron::plan
