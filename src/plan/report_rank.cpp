// `megatron plan --rank R`: what rank R holds and runs, from the same Plan the engine executes.
#include <fmt/format.h>

#include <sstream>
#include <stdexcept>

#include "core/error.hpp"
#include "plan/program.hpp"
#include "plan/report.hpp"

namespace megatron::plan {
namespace {

// Printing more ops than this helps nobody; the warm-up counts still describe the program.
constexpr int64_t kMaxPrintedOps = 100'000;

struct RankView {
  Layout::Coord at;
  const Stage* stage;
  std::vector<PipelineOp> program;  // empty when longer than kMaxPrintedOps
  int64_t ops = 0;
  int64_t warmup = 0;
  int64_t peak = 0;
};

RankView view_of(const Plan& plan, int64_t rank) {
  const Layout& l = plan.layout;
  if (rank < 0 || rank >= l.world)
    throw UserError(fmt::format("--rank {}: the layout has {} rank{} (0..{})", rank, l.world,
                                l.world == 1 ? "" : "s", l.world - 1));
  RankView v{.at = l.coord(rank), .stage = nullptr};
  v.stage = &plan.stages.at(size_t(v.at.pp));
  const Schedule& s = plan.schedule;
  v.ops = 2 * s.chunks * s.microbatches;
  v.warmup = warmup_forwards(s.kind, l.pp, v.at.pp, s.chunks, s.microbatches);
  v.peak = peak_chunks_in_flight(s.kind, l.pp, v.at.pp, s.chunks, s.microbatches);
  if (v.ops <= kMaxPrintedOps)
    v.program = stage_program(s.kind, l.pp, v.at.pp, s.chunks, s.microbatches);
  return v;
}

std::string layer_list(const std::vector<int64_t>& layers) {
  if (layers.empty()) return "no layers";
  if (layers.size() == 1) return fmt::format("layer {}", layers.front());
  return fmt::format("layers {}-{}", layers.front(), layers.back());
}

}  // namespace

std::string render_rank(const Plan& plan, int64_t rank) {
  const RankView v = view_of(plan, rank);
  const Layout& l = plan.layout;
  const Schedule& s = plan.schedule;
  std::ostringstream out;
  out << fmt::format("Rank {} of {}: tensor {}, context {}, data {}, pipeline stage {} of {}\n",
                     rank, l.world, v.at.tp, v.at.cp, v.at.dp, v.at.pp, l.pp);
  for (size_t c = 0; c < v.stage->chunks.size(); ++c)
    out << fmt::format("  chunk {} (model chunk {}): {}\n", c, int64_t(c) * l.pp + v.at.pp,
                       layer_list(v.stage->chunks[c]));
  std::vector<LayerPlan> held;
  for (const LayerPlan& layer : plan.layers)
    if (layer.stage == v.at.pp) held.push_back(layer);
  out << layer_runs(held);
  if (v.stage->has_embedding) out << "  embedding: yes\n";
  if (v.stage->has_output_layer) out << "  output layer and loss: yes\n";
  out << fmt::format(
      "Program ({}, {} micro-batch{}, {} chunk{}): {} ops, {} warm-up forward{}, at most {} chunk "
      "activation{} alive\n",
      s.name, s.microbatches, s.microbatches == 1 ? "" : "es", s.chunks, s.chunks == 1 ? "" : "s",
      v.ops, v.warmup, v.warmup == 1 ? "" : "s", v.peak, v.peak == 1 ? "" : "s");
  if (v.program.empty()) {
    out << fmt::format("  (not listed: more than {} ops)\n", kMaxPrintedOps);
    return out.str();
  }
  constexpr size_t kPerLine = 8;
  for (size_t i = 0; i < v.program.size(); i += kPerLine) {
    out << " ";
    for (size_t k = i; k < std::min(v.program.size(), i + kPerLine); ++k)
      out << " " << to_string(v.program[k]);
    out << "\n";
  }
  return out.str();
}

nlohmann::json rank_to_json(const Plan& plan, int64_t rank) {
  const RankView v = view_of(plan, rank);
  nlohmann::json chunks = nlohmann::json::array();
  for (size_t c = 0; c < v.stage->chunks.size(); ++c)
    chunks.push_back({{"model_chunk", int64_t(c) * plan.layout.pp + v.at.pp},
                      {"layers", v.stage->chunks[c]}});
  nlohmann::json layers = nlohmann::json::array();
  for (const LayerPlan& layer : plan.layers)
    if (layer.stage == v.at.pp) layers.push_back(layer_json(layer));
  nlohmann::json program = nlohmann::json::array();
  for (const PipelineOp& op : v.program)
    program.push_back({{"phase", op.phase == Phase::Forward ? "forward" : "backward"},
                       {"chunk", op.chunk},
                       {"microbatch", op.microbatch}});
  nlohmann::json out = {{"rank", rank},
                        {"tp", v.at.tp},
                        {"cp", v.at.cp},
                        {"dp", v.at.dp},
                        {"pp", v.at.pp},
                        {"chunks", chunks},
                        {"layers", layers},
                        {"embedding", v.stage->has_embedding},
                        {"output_layer", v.stage->has_output_layer},
                        {"ops", v.ops},
                        {"warmup_forwards", v.warmup},
                        {"peak_chunks_in_flight", v.peak}};
  if (!v.program.empty()) out["program"] = program;
  return out;
}

}  // namespace megatron::plan
