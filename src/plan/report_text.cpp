#include <fmt/format.h>

#include <sstream>

#include "plan/hardware.hpp"
#include "plan/report.hpp"
#include "plan/serving.hpp"
#include "plan/units.hpp"

namespace megatron::plan {
namespace {

// "0-5", or "0-1, 8-9" for an interleaved stage.
std::string layer_ranges(const std::vector<int64_t>& layers) {
  if (layers.empty()) return "none";
  std::string out;
  std::size_t start = 0;
  for (std::size_t i = 1; i <= layers.size(); ++i) {
    if (i < layers.size() && layers[i] == layers[i - 1] + 1) continue;
    if (!out.empty()) out += ", ";
    out += layers[start] == layers[i - 1] ? std::to_string(layers[start])
                                          : fmt::format("{}-{}", layers[start], layers[i - 1]);
    start = i;
  }
  return out;
}

std::string holds(const Stage& stage, const recipe::CompiledRecipe& compiled, int64_t stages) {
  std::string out;
  if (stage.has_embedding) out = "embedding";
  if (stage.has_output_layer) {
    if (!out.empty()) out += ", ";
    out += "output layer";
    if (compiled.recipe.model.tie_embeddings && stages > 1) out += " + embedding copy";
  }
  return out;
}

const char* recompute_name(recipe::Recompute r) {
  switch (r) {
    case recipe::Recompute::Selective:
      return "selective recompute";
    case recipe::Recompute::Full:
      return "full recompute";
    case recipe::Recompute::None:
      break;
  }
  return "no recompute";
}

// The profile the plan was made with: a shipped one or the recipe's profile file.
const HardwareProfile* profile_named(const std::string& name,
                                     const recipe::CompiledRecipe& compiled) {
  for (const HardwareProfile& profile : hardware_profiles())
    if (profile.name == name) return &profile;
  if (is_profile_file(compiled.recipe.cluster.hardware)) {
    const HardwareProfile& file = find_hardware(compiled.recipe.cluster.hardware);
    if (file.name == name) return &file;
  }
  return nullptr;
}

void layout_section(std::ostringstream& out, const Plan& plan,
                    const recipe::CompiledRecipe& compiled) {
  const Layout& l = plan.layout;
  const recipe::Recipe& r = compiled.recipe;
  out << "Layout\n";
  out << fmt::format(
      "  world {} rank{} = tp {} x cp {} x dp {} x pp {}, {} model chunk{} per stage\n", l.world,
      l.world == 1 ? "" : "s", l.tp, l.cp, l.dp, l.pp, l.vpp, l.vpp == 1 ? "" : "s");
  out << fmt::format("  rank = tp + {} x (cp + {} x (dp + {} x pp))\n", l.tp, l.cp, l.dp);
  out << fmt::format(
      "  schedule {}: {} micro-batches of {} per iteration (global batch {}), bubble {:.1f}%\n",
      plan.schedule.name, plan.schedule.microbatches, r.training.micro_batch_size,
      r.training.global_batch_size, 100 * plan.schedule.bubble_fraction);
  out << fmt::format("  {:<6} {:<20} {:>22} {:>11}  {}\n", "stage", "layers", "parameters/rank",
                     "memory", "holds");
  const std::size_t n = plan.stages.size();
  for (std::size_t i = 0; i < n; ++i) {
    // Long pipelines: the ends are where stages differ, the middle repeats.
    if (n > 16 && i == 4) out << "  ...\n";
    if (n > 16 && i >= 4 && i < n - 2) continue;
    const Stage& s = plan.stages[i];
    std::string line =
        fmt::format("  {:<6} {:<20} {:>22} {:>11}  {}", s.index, layer_ranges(s.layers),
                    with_separators(s.parameters_per_rank), bytes_text(s.memory.total()),
                    holds(s, compiled, static_cast<int64_t>(n)));
    line.erase(line.find_last_not_of(' ') + 1);  // stages holding neither end have no "holds"
    out << line << "\n";
  }
  out << layer_runs(plan.layers);
}

void parameters_section(std::ostringstream& out, const Plan& plan) {
  const Parameters& p = plan.parameters;
  out << "Parameters\n";
  out << fmt::format("  total        {} ({})\n", with_separators(p.total), short_count(p.total));
  out << fmt::format("  embedding    {} ({})\n", with_separators(p.embedding),
                     short_count(p.embedding));
  out << fmt::format("  per layer    {} ({})\n", with_separators(p.per_layer),
                     short_count(p.per_layer));
  if (p.per_decoder_layer > 0)
    out << fmt::format("  per decoder layer {} ({})\n", with_separators(p.per_decoder_layer),
                       short_count(p.per_decoder_layer));
  out << fmt::format("  per rank     max {} ({}), min {} ({})\n", with_separators(p.per_rank_max),
                     short_count(p.per_rank_max), with_separators(p.per_rank_min),
                     short_count(p.per_rank_min));
}

void memory_section(std::ostringstream& out, const Plan& plan,
                    const recipe::CompiledRecipe& compiled) {
  const MemoryBreakdown& m = plan.peak_rank;
  const Stage& peak = plan.stages[plan.peak_stage];
  out << fmt::format("Memory per rank (peak: stage {})\n", plan.peak_stage);
  out << fmt::format("  weights      {:>11}\n", bytes_text(m.weights));
  out << fmt::format("  gradients    {:>11}\n", bytes_text(m.gradients));
  out << fmt::format("  optimizer    {:>11}\n", bytes_text(m.optimizer));
  out << fmt::format("  activations  {:>11}  ({} per micro-batch x {:.2f} in flight{})\n",
                     bytes_text(m.activations), bytes_text(peak.activation_bytes_per_microbatch),
                     peak.microbatches_in_flight,
                     peak.activation_bytes_transient > 0
                         ? fmt::format(", + {} of logits during a forward",
                                       bytes_text(peak.activation_bytes_transient))
                         : std::string());
  if (m.runtime > 0) out << fmt::format("  runtime      {:>11}  (the process: code, libraries, BLAS buffers)\n", bytes_text(m.runtime));
  const HardwareProfile* hw = profile_named(plan.estimate.hardware, compiled);
  const std::string device = hw ? fmt::format(" of {} on {}", gib(hw->memory_bytes), hw->name) : "";
  out << fmt::format("  total        {:>11}{}: {}\n", bytes_text(m.total()), device,
                     plan.estimate.fits ? "fits" : "DOES NOT FIT");
  for (const std::string& w : plan.estimate.warnings) out << "  warning: " << w << "\n";
  for (const std::string& s : plan.estimate.suggestions) out << "  try: " << s << "\n";
  if (plan.generation.kv_cache_bytes_per_token > 0) {
    const Generation& g = plan.generation;
    out << fmt::format("  generation   {:>11}  KV cache per sequence of {} positions ({} per token; "
                       "megatron generate/serve)\n",
                       bytes_text(g.kv_cache_bytes_per_token * double(g.max_positions)),
                       g.max_positions, bytes_text(g.kv_cache_bytes_per_token));
    out << fmt::format("  serve pool   {:>11}  KV blocks for {} sequences (megatron serve's default; "
                       "block tables {} per step)\n",
                       bytes_text(g.serve_pool_bytes), kServeSequences, bytes_text(g.block_table_bytes));
  }
}

void compute_section(std::ostringstream& out, const Plan& plan,
                     const recipe::CompiledRecipe& compiled) {
  out << "Compute per iteration\n";
  out << fmt::format("  model FLOPs     {}\n", flops_text(plan.flops.model_per_iteration));
  out << fmt::format("  hardware FLOPs  {} ({})\n", flops_text(plan.flops.hardware_per_iteration),
                     recompute_name(compiled.recipe.training.recompute));
  out << fmt::format("  tokens          {}\n", with_separators(plan.tokens_per_iteration));
}

void communication_section(std::ostringstream& out, const Plan& plan) {
  const Communication& c = plan.communication;
  out << "Communication per rank per iteration (busiest rank)\n";
  out << fmt::format("  tensor parallel    {:>11}\n", bytes_text(c.tensor_parallel));
  out << fmt::format("  pipeline parallel  {:>11}\n", bytes_text(c.pipeline_parallel));
  out << fmt::format("  data parallel      {:>11}\n", bytes_text(c.data_parallel));
  out << fmt::format("  embedding sync     {:>11}\n", bytes_text(c.embedding_sync));
}

void estimate_section(std::ostringstream& out, const Plan& plan,
                      const recipe::CompiledRecipe& compiled) {
  const Estimate& e = plan.estimate;
  const HardwareProfile* hw = profile_named(e.hardware, compiled);
  out << fmt::format("Estimate on {}{}\n", e.hardware, hw ? " (" + hw->description + ")" : "");
  if (hw && hw->source != "datasheet") out << fmt::format("  profile      {}\n", hw->source);
  out << fmt::format("  step time    {:.3f} s (compute {:.3f} s, exposed communication {:.3f} s)\n",
                     e.step_time_s, e.compute_time_s, e.communication_time_s);
  out << fmt::format("  compute      GEMMs {:.3f} s, attention {:.3f} s, memory-bound {:.3f} s, "
                     "kernel overheads {:.3f} s, optimizer {:.3f} s\n",
                     e.gemm_time_s, e.attention_time_s, e.memory_time_s, e.overhead_time_s,
                     e.optimizer_time_s);
  // A tiny model on a huge world predicts more tokens/s than an int64 holds.
  out << fmt::format("  throughput   {} tokens/s\n",
                     e.tokens_per_second < 1e15
                         ? with_separators(static_cast<int64_t>(e.tokens_per_second))
                         : short_count(e.tokens_per_second));
  out << fmt::format("  MFU          {:.1f}%\n", 100 * e.mfu);
  out << fmt::format("  bubble       {:.1f}%\n", 100 * plan.schedule.bubble_fraction);
}

}  // namespace

// What the recipe implied, with the arithmetic, so a surprising plan can be traced back.
void derived_section(std::ostream& out, const Plan& plan, const recipe::CompiledRecipe& compiled) {
  out << "Derived from " << compiled.file << "\n";
  for (const auto* log : {&compiled.derived.log, &plan.derivations})
    for (const auto& d : *log) out << "  " << d.name << ": " << d.value << "  (" << d.how << ")\n";
}

std::string render_text(const Plan& plan, const recipe::CompiledRecipe& compiled) {
  std::ostringstream out;
  derived_section(out, plan, compiled);
  out << "\n";
  layout_section(out, plan, compiled);
  out << "\n";
  parameters_section(out, plan);
  out << "\n";
  memory_section(out, plan, compiled);
  out << "\n";
  compute_section(out, plan, compiled);
  out << "\n";
  communication_section(out, plan);
  out << "\n";
  estimate_section(out, plan, compiled);
  return out.str();
}

}  // namespace megatron::plan
