// The Plan: how a compiled recipe runs on its world (rank grid, stages, parameter shards) and
// what it costs (parameters, memory, FLOPs, communication, step time). `megatron plan` prints
// it; `megatron run` executes it. Formulas: docs/plan.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/model_config.hpp"
#include "parallel/layout.hpp"
#include "plan/hardware.hpp"
#include "plan/layers.hpp"
#include "recipe/compile.hpp"

namespace megatron::plan {

using Layout = parallel::Layout;

struct MemoryBreakdown {  // bytes on one rank
  double weights = 0;
  double gradients = 0;
  double optimizer = 0;     // master weights + moments (sharded under the distributed optimizer)
  double activations = 0;   // all micro-batches in flight on this stage
  double runtime = 0;       // the process itself: code, libraries, BLAS buffers (per hardware)
  double total() const { return weights + gradients + optimizer + activations + runtime; }
};

struct Stage {
  int64_t index = 0;
  std::vector<int64_t> layers;        // global transformer layer indices held (all chunks)
  // The layers of each model chunk this stage holds, chunk 0 first (with interleaving, chunk c
  // of stage s is model chunk c * pipeline + s); what the engine builds on this stage's ranks.
  std::vector<std::vector<int64_t>> chunks;
  bool has_embedding = false;         // word (and position) embeddings
  bool has_output_layer = false;      // final norm + output projection / LM head
  int64_t parameters_per_rank = 0;    // parameters held by one TP rank of this stage
  double activation_bytes_per_microbatch = 0;  // per rank, all layers of this stage
  // Micro-batches whose activations are alive at the peak, under the schedule, counted in
  // whole-stage units (interleaving holds chunks, so this can be fractional).
  double microbatches_in_flight = 0;
  // Held once, only while a forward runs (the fused classifier's chunk of logits); included in
  // memory.activations.
  double activation_bytes_transient = 0;
  MemoryBreakdown memory;             // per rank
};

struct Parameters {
  int64_t total = 0;
  int64_t embedding = 0;        // word + position (+ token-type) embeddings
  int64_t per_layer = 0;        // one transformer layer (decoder layer for GPT)
  int64_t per_decoder_layer = 0;  // T5: one decoder layer (with cross-attention); 0 otherwise
  int64_t output_layer = 0;     // untied output projection / LM head extras; 0 when tied
  int64_t per_rank_max = 0;
  int64_t per_rank_min = 0;
};

struct Flops {
  double model_per_iteration = 0;     // forward + backward, no recompute
  double hardware_per_iteration = 0;  // including recompute
};

struct Communication {  // bytes sent per iteration by the busiest rank of each kind
  double tensor_parallel = 0;
  double pipeline_parallel = 0;
  double data_parallel = 0;
  double embedding_sync = 0;  // tied embedding gradients between first and last stage
};

// Which pipeline program every stage runs (plan/program.hpp: stage_program(kind, layout.pp,
// stage, chunks, microbatches) is each stage's op list, the one the engine executes).
struct Schedule {
  std::string name;             // "1f1b", "interleaved", "all-forward-all-backward"
  recipe::Schedule kind = recipe::Schedule::OneFOneB;
  int64_t microbatches = 1;     // per iteration per DP rank (at the full global batch)
  int64_t chunks = 1;           // model chunks per stage (virtual pipeline size)
  double bubble_fraction = 0;   // idle time / step time
  bool bubble_simulated = false;  // from running the programs; false: the closed form
};

struct Estimate {
  std::string hardware;         // profile name
  double compute_time_s = 0;
  double communication_time_s = 0;  // exposed (not overlapped)
  // The critical stage's compute per iteration, by kind of kernel (they sum to compute_time_s).
  double gemm_time_s = 0;
  double attention_time_s = 0;
  double memory_time_s = 0;     // elementwise traffic
  double overhead_time_s = 0;   // per-kernel fixed costs
  double optimizer_time_s = 0;
  double step_time_s = 0;
  double mfu = 0;
  double tokens_per_second = 0;
  bool fits = true;
  std::vector<std::string> warnings;     // "stage 0 needs 91.2 GiB, the h100-sxm has 80 GiB"
  std::vector<std::string> suggestions;  // what would make it fit
};

// Generation's key/value cache (a causal model, generate and serve): per rank of the stage that
// holds the most layers, for one sequence.
struct Generation {
  double kv_cache_bytes_per_token = 0;  // 2 (keys, values) x layers x g / t x d x dtype bytes
  int64_t max_positions = 0;            // a sequence's cache holds this many at most
  // megatron serve's default pool (plan/serving.hpp): kServeSequences sequences of max_positions
  // in blocks; and the block tables and positions one step of kServeStepTokens rows sends.
  double serve_pool_bytes = 0;
  double block_table_bytes = 0;
};

struct Plan {
  Layout layout;
  // Sequence parallelism as it runs: asked for and more than one tensor-parallel rank.
  bool sequence_parallel = false;
  // The model every rank builds (plan::model_config): the jobs read it here.
  model::ModelConfig model;
  std::vector<Stage> stages;
  // Every transformer layer in order: where it runs, what it is made of, which kernels run it.
  std::vector<LayerPlan> layers;
  // Gradient elements per data-parallel reduction bucket (parallel.ddp_bucket_size, else
  // Megatron's max(40M, 1M x data-parallel size)).
  int64_t gradient_bucket_elements = 0;
  // How the layout was placed on the world (plan::place): data parallelism, micro-batches,
  // schedule, layers per stage, each with its arithmetic; after the recipe's own derivations.
  std::vector<recipe::Derivation> derivations;
  Parameters parameters;
  MemoryBreakdown peak_rank;    // the stage whose total is largest
  int64_t peak_stage = 0;
  Flops flops;
  int64_t tokens_per_iteration = 0;
  Communication communication;
  Schedule schedule;
  Estimate estimate;
  Generation generation;  // zero for models that do not generate (BERT, T5)
};

// The planner's one entry point, for `megatron plan` and every job alike. A layout that does not
// fit the world is a UserError at the key to change (plan::place); a size that overflows is one
// at the recipe's model.hidden_size; a plan that does not fit carries suggestions.
Plan make_plan(const recipe::CompiledRecipe& compiled, const HardwareProfile& hardware);

}  // namespace megatron::plan
