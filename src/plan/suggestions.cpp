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

// A what-if recipe as the planner would run it.
struct Placed {
  CompiledRecipe compiled;
  Placement placement;
  Plan plan(const HardwareProfile& hardware) const {
    return build_plan(compiled, placement, hardware);
  }
};

struct Candidate {
  std::string change;
  Placed placed;
};

// Re-derives and re-places `compiled` after its recipe changed, through the recipe compiler and
// the placer themselves, so the what-if plans obey exactly the rules a real recipe would; nullopt
// when the change is invalid.
std::optional<Placed> rederived(CompiledRecipe compiled, int64_t world) {
  try {
    const recipe::Locator where(compiled.provenance, compiled.file);
    compiled.derived = recipe::derive(compiled.recipe, where);
    compiled.world_size = world;
    Placement placement = place(compiled);
    return Placed{std::move(compiled), std::move(placement)};
  } catch (const UserError&) {
    return std::nullopt;
  }
}

// The recipe with tensor x pipeline changed: keeps the world when the new replica divides it,
// else keeps the data-parallel size and says how many GPUs that takes.
std::optional<Candidate> with_layout(const Placed& base, int64_t tensor, int64_t pipeline,
                                     const std::string& change) {
  CompiledRecipe changed = base.compiled;
  recipe::Recipe& r = changed.recipe;
  r.parallel.tensor = tensor;
  r.parallel.pipeline = pipeline;
  r.parallel.data.reset();
  r.parallel.layers_per_stage.clear();
  int64_t world = base.compiled.world_size;
  std::string gpus;
  try {
    const std::string_view what = "the ranks of a candidate layout";
    const int64_t replica =
        checked_mul(checked_mul(tensor, pipeline, what), r.parallel.context, what);
    if (world % replica != 0) {
      world = checked_mul(replica, base.placement.data_parallel, what);
      gpus = fmt::format(" on {} GPUs", world);
    }
  } catch (const UserError&) {
    return std::nullopt;  // a layout too large to count is no suggestion
  }
  auto placed = rederived(std::move(changed), world);
  if (!placed) return std::nullopt;
  return Candidate{change + gpus, std::move(*placed)};
}

std::optional<Candidate> with_recipe(const Placed& base, const std::string& change,
                                     const std::function<void(recipe::Recipe&)>& edit) {
  CompiledRecipe changed = base.compiled;
  edit(changed.recipe);
  auto placed = rederived(std::move(changed), base.compiled.world_size);
  if (!placed) return std::nullopt;
  return Candidate{change, std::move(*placed)};
}

std::vector<Candidate> candidates(const Placed& base, const Plan& plan) {
  const recipe::Recipe& r = base.compiled.recipe;
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
  Placed combined{compiled, place(compiled)};
  for (const Candidate& candidate : candidates(combined, plan)) {
    const Plan other = candidate.placed.plan(hardware);
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
  std::string changes;
  for (const auto& [then, change] : savings) {
    std::optional<Candidate> next;
    for (Candidate& c : candidates(combined, combined.plan(hardware)))
      if (c.change.starts_with(change.substr(0, change.find('=')))) next = std::move(c);
    if (!next) continue;
    const Plan trial = next->placed.plan(hardware);
    if (!helps(trial.peak_rank.total(), combined.plan(hardware).peak_rank.total())) continue;
    combined = std::move(next->placed);
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
