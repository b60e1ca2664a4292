#include "plan/suggestions.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <optional>

#include "core/checked.hpp"
#include "core/error.hpp"
#include "plan/build.hpp"
#include "plan/units.hpp"
#include "recipe/checks.hpp"

namespace megatron::plan {
namespace {

using recipe::CompiledRecipe;

struct Candidate {
  std::string change;
  CompiledRecipe compiled;
};

// Re-derives `compiled` after its recipe changed, through the recipe compiler itself, so the
// what-if plans obey exactly the rules a real recipe would; nullopt when the change is invalid.
std::optional<CompiledRecipe> rederived(CompiledRecipe compiled, int64_t world) {
  try {
    const recipe::Locator where(compiled.provenance, compiled.file);
    compiled.derived = recipe::derive(compiled.recipe, where, world);
  } catch (const UserError&) {
    return std::nullopt;
  }
  return compiled;
}

// The recipe with tensor x pipeline changed: keeps the world when the new replica divides it,
// else keeps the data-parallel size and says how many GPUs that takes.
std::optional<Candidate> with_layout(const CompiledRecipe& base, int64_t tensor, int64_t pipeline,
                                     const std::string& change) {
  CompiledRecipe changed = base;
  recipe::Recipe& r = changed.recipe;
  r.parallel.tensor = tensor;
  r.parallel.pipeline = pipeline;
  r.parallel.data.reset();
  r.parallel.layers_per_stage.clear();
  int64_t world = base.derived.world_size;
  std::string gpus;
  try {
    const std::string_view what = "the ranks of a candidate layout";
    const int64_t replica =
        checked_mul(checked_mul(tensor, pipeline, what), r.parallel.context, what);
    if (world % replica != 0) {
      world = checked_mul(replica, base.derived.data_parallel, what);
      gpus = fmt::format(" on {} GPUs", world);
    }
  } catch (const UserError&) {
    return std::nullopt;  // a layout too large to count is no suggestion
  }
  auto compiled = rederived(std::move(changed), world);
  if (!compiled) return std::nullopt;
  return Candidate{change + gpus, std::move(*compiled)};
}

std::optional<Candidate> with_recipe(const CompiledRecipe& base, const std::string& change,
                                     const std::function<void(recipe::Recipe&)>& edit) {
  CompiledRecipe changed = base;
  edit(changed.recipe);
  auto compiled = rederived(std::move(changed), base.derived.world_size);
  if (!compiled) return std::nullopt;
  return Candidate{change, std::move(*compiled)};
}

std::vector<Candidate> candidates(const CompiledRecipe& base, const Plan& plan) {
  const recipe::Recipe& r = base.recipe;
  const Layout& layout = plan.layout;
  std::vector<std::optional<Candidate>> out;

  if (!r.parallel.distributed_optimizer && layout.dp * layout.cp > 1)
    out.push_back(with_recipe(base, "parallel.distributed_optimizer=true",
                              [](recipe::Recipe& x) { x.parallel.distributed_optimizer = true; }));
  if (r.training.recompute == recipe::Recompute::None)
    out.push_back(with_recipe(base, "training.recompute=selective", [](recipe::Recipe& x) {
      x.training.recompute = recipe::Recompute::Selective;
    }));
  if (r.training.recompute != recipe::Recompute::Full || r.training.recompute_num_layers)
    out.push_back(with_recipe(base, "training.recompute=full", [](recipe::Recipe& x) {
      x.training.recompute = recipe::Recompute::Full;
      x.training.recompute_num_layers.reset();
    }));
  out.push_back(with_layout(base, layout.tp, 2 * layout.pp,
                            fmt::format("parallel.pipeline={}", 2 * layout.pp)));
  if (2 * layout.tp <= r.cluster.gpus_per_node)
    out.push_back(with_layout(base, 2 * layout.tp, layout.pp,
                              fmt::format("parallel.tensor={}", 2 * layout.tp)));
  if (layout.tp > 1 && !r.parallel.sequence_parallel)
    out.push_back(with_recipe(base, "parallel.sequence_parallel=true",
                              [](recipe::Recipe& x) { x.parallel.sequence_parallel = true; }));
  std::vector<Candidate> valid;
  for (auto& c : out)
    if (c) valid.push_back(std::move(*c));
  return valid;
}

}  // namespace

std::vector<std::string> suggest_fixes(const recipe::CompiledRecipe& compiled,
                                       const HardwareProfile& hardware, const Plan& plan) {
  // A change is worth naming when it saves at least 1% of the peak.
  auto helps = [](double then, double now) { return then < 0.99 * now; };
  std::vector<std::string> out;
  const double now = plan.peak_rank.total();
  bool one_fits = false;
  std::vector<std::pair<double, std::string>> savings;
  for (const Candidate& candidate : candidates(compiled, plan)) {
    const Plan other = build_plan(candidate.compiled, hardware);
    const double then = other.peak_rank.total();
    if (!helps(then, now)) continue;
    one_fits = one_fits || then <= hardware.memory_bytes;
    savings.emplace_back(then, candidate.change);
    out.push_back(fmt::format("{} (stage {}: {}{})", candidate.change, other.peak_stage, gib(then),
                              then <= hardware.memory_bytes ? ", fits" : ""));
  }
  if (one_fits || savings.size() < 2) return out;

  // No single change is enough: apply the ones that help, biggest saving first, until it fits.
  std::sort(savings.begin(), savings.end());
  CompiledRecipe combined = compiled;
  std::string changes;
  for (const auto& [then, change] : savings) {
    std::optional<Candidate> next;
    for (Candidate& c : candidates(combined, build_plan(combined, hardware)))
      if (c.change.starts_with(change.substr(0, change.find('=')))) next = std::move(c);
    if (!next) continue;
    const Plan trial = build_plan(next->compiled, hardware);
    if (!helps(trial.peak_rank.total(), build_plan(combined, hardware).peak_rank.total())) continue;
    combined = std::move(next->compiled);
    changes += (changes.empty() ? "" : " ") + next->change;
    if (trial.peak_rank.total() <= hardware.memory_bytes) {
      out.push_back(fmt::format("together: {} (stage {}: {}, fits)", changes, trial.peak_stage,
                                gib(trial.peak_rank.total())));
      return out;
    }
  }
  return out;
}

}  // namespace megatron::plan
