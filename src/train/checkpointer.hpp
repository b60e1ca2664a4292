// The trainer's checkpoints (format: src/ckpt, docs/checkpoint-format.md): which pieces of the
// model and optimizer this rank writes, what it reads back for its own shards whatever layout
// wrote them, the collective steps that put every rank's file on disk before `latest` moves,
// and saving from a background thread.
#pragma once

#include <filesystem>
#include <future>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/format.hpp"
#include "model/language_model.hpp"
#include "parallel/process_groups.hpp"
#include "recipe/compile.hpp"
#include "train/parallel_optimizer.hpp"

namespace megatron::train {

class Checkpointer {
 public:
  // `config`: the Plan's model (plan.model), whose fields the checkpoint's metadata records.
  Checkpointer(const recipe::CompiledRecipe& compiled, const model::ModelConfig& config,
               const parallel::ProcessGroups& groups, tensor::Backend& backend,
               std::string recipe_text, std::vector<std::string> overrides);
  ~Checkpointer();

  bool saving() const { return save_dir_.has_value(); }
  // The checkpoint load() will read: the newest one checkpoint.save holds (the run's own), else
  // checkpoint.load; nullopt for a fresh run. UserError when checkpoint.load names none.
  std::optional<std::filesystem::path> source() const;

  // Loads source() (so a resubmitted job continues from its own newest checkpoint) into this
  // rank's model and optimizer, resharding as needed. Returns its metadata
  // (where the run stands), or nullopt when there is nothing to load. Collective.
  std::optional<ckpt::CheckpointMeta> load(model::LanguageModel& model, ParallelOptimizer& optimizer);

  // Saves at state.iteration: copies this rank's pieces now, writes them now (or from a
  // background thread with checkpoint.async_save) and, once every rank's file is on disk,
  // rank 0 writes the index and moves `latest`. Collective.
  void save(const model::LanguageModel& model, ParallelOptimizer& optimizer,
            const ckpt::TrainingState& state);
  // At an iteration boundary: publishes a background save that every rank has finished.
  // Collective while one is in flight.
  void poll();
  // Waits for a background save and publishes it. Collective.
  void finish();

 private:
  // `copy`: pieces own copies of the tensors (a background save); else they borrow host
  // tensors' memory where they can.
  std::vector<ckpt::Piece> pieces(const model::LanguageModel& model, ParallelOptimizer& optimizer,
                                  bool copy) const;
  void publish();  // collective: agree that every rank wrote, then rank 0 publishes

  const recipe::CompiledRecipe& compiled_;
  const parallel::ProcessGroups& groups_;
  tensor::Backend& backend_;
  std::string recipe_text_;
  std::vector<std::string> overrides_;
  model::ModelConfig config_;
  std::optional<std::filesystem::path> save_dir_;
  struct InFlight {
    ckpt::CheckpointMeta meta;
    std::future<std::string> written;  // "" or this rank's error
    double started_s;
    int64_t bytes;
  };
  std::optional<InFlight> in_flight_;
};

}  // namespace megatron::train
