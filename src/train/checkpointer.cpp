#include "train/checkpointer.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <fstream>
#include <fmt/format.h>

#include "ckpt/model_weights.hpp"
#include "ckpt/checkpoint_reader.hpp"
#include "ckpt/checkpoint_writer.hpp"
#include "ckpt/directory.hpp"
#include "ckpt/model_fields.hpp"
#include "core/build_info.hpp"
#include "core/error.hpp"
#include "core/printable.hpp"
#include "tensor/tensor.hpp"
#include "dist/fault_injection.hpp"
#include "parallel/scalar_reduce.hpp"
#include "recipe/enum_names.hpp"
#include "recipe/render.hpp"
#include "tensor/host_io.hpp"
#include "train/train_data.hpp"

namespace megatron::train {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double now_s() {
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

ckpt::ShardLayout layout_of(const model::Parameter& p, const parallel::ProcessGroups& g) {
  return ckpt::shard_layout(p, g.coord.tp, g.tp_size);
}

// Whether this rank is the one that writes p's values: one copy over the model (tp replicas
// and the tied embedding's second copy left out).
bool writes(const model::Parameter& p, const parallel::ProcessGroups& g) {
  return model::counts_once(p, g.coord.tp);
}

std::vector<std::byte> bytes_of(tensor::Backend& backend, const tensor::Tensor& t) {
  std::vector<std::byte> bytes(t.bytes());
  backend.read(t, bytes.data());
  return bytes;
}

std::string text_of(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

// The first failing rank's message, on every rank ("" when no rank failed). Collective.
std::string first_error(tensor::Backend& backend, dist::Communicator& world, const std::string& mine) {
  const int n = world.size();
  tensor::Tensor flag = tensor::from_floats(backend, std::vector<float>{mine.empty() ? 0.0f : 1.0f}, {1});
  tensor::Tensor flags = backend.empty({n}, tensor::DType::F32);
  world.all_gather(flag, flags);
  const std::vector<float> all = tensor::to_floats(backend, flags);
  int root = -1;
  for (int r = 0; r < n && root < 0; ++r) {
    if (all[size_t(r)] != 0.0f) root = r;
  }
  if (root < 0) return "";
  if (n == 1) return mine;
  tensor::Tensor length = tensor::from_ints(backend, std::vector<int32_t>{int32_t(mine.size())}, {1});
  world.broadcast(length, root);
  const int32_t size = tensor::to_ints(backend, length)[0];
  std::vector<int32_t> chars(size_t(size), 0);
  if (world.rank() == root) {
    for (size_t i = 0; i < chars.size(); ++i) chars[i] = static_cast<unsigned char>(mine[i]);
  }
  tensor::Tensor text = tensor::from_ints(backend, chars, {int64_t(size)});
  world.broadcast(text, root);
  std::string out;
  for (int32_t c : tensor::to_ints(backend, text)) out += char(c);
  return out;
}

}  // namespace

Checkpointer::Checkpointer(const recipe::CompiledRecipe& compiled, const model::ModelConfig& config,
                           const parallel::ProcessGroups& groups, tensor::Backend& backend,
                           std::string recipe_text, std::vector<std::string> overrides)
    : compiled_(compiled),
      groups_(groups),
      backend_(backend),
      recipe_text_(std::move(recipe_text)),
      overrides_(std::move(overrides)),
      config_(config) {
  if (!compiled.recipe.checkpoint.save) return;
  save_dir_ = fs::path(*compiled.recipe.checkpoint.save);
  // Refuse a save directory that cannot be written now, not after hours of training.
  std::string error;
  if (groups_.world_rank == 0) {
    std::error_code ec;
    fs::create_directories(*save_dir_, ec);
    const fs::path probe = *save_dir_ / ".megatron-write-test";
    if (!ec) std::ofstream(probe) << "ok";
    if (ec || !fs::exists(probe)) {
      error = fmt::format("{}: checkpoint.save: cannot write to {}{}; choose a writable directory",
                          compiled.file, save_dir_->string(), ec ? ": " + ec.message() : "");
    }
    fs::remove(probe, ec);
  }
  if (const std::string e = first_error(backend_, *groups_.world, error); !e.empty()) throw UserError(e);
}

Checkpointer::~Checkpointer() {
  // A save still in flight when training failed: let its thread end; it is never published.
  if (in_flight_ && in_flight_->written.valid()) in_flight_->written.wait();
}

std::vector<ckpt::Piece> Checkpointer::pieces(const model::LanguageModel& model,
                                              ParallelOptimizer& optimizer, bool copy) const {
  std::vector<ckpt::Piece> out;
  const bool first_replica = groups_.coord.dp == 0;
  auto add = [&](const char* kind, const model::Parameter& p, int64_t offset, const tensor::Tensor& t) {
    ckpt::Piece piece{.kind = kind, .name = p.name, .layout = layout_of(p, groups_),
                      .offset = offset, .dtype = t.dtype()};
    if (copy || t.device() != tensor::Device::Cpu) {
      piece.bytes = bytes_of(backend_, t);
    } else {
      piece.borrowed = std::span(static_cast<const std::byte*>(t.raw()), t.bytes());
    }
    out.push_back(std::move(piece));
  };
  if (first_replica) {
    for (const auto& p : model.parameters().all()) {
      if (writes(*p, groups_)) add(ckpt::kModel, *p, 0, p->value);
    }
  }
  if (!first_replica && !optimizer.distributed()) return out;
  const bool adam = compiled_.recipe.training.optimizer == recipe::Optimizer::AdamW;
  for (const ParallelOptimizer::Owned& o : optimizer.owned()) {
    if (!writes(*o.param, groups_)) continue;
    if (config_.dtype != tensor::DType::F32) add(ckpt::kMaster, *o.param, o.offset, *o.state.master);
    add(adam ? ckpt::kExpAvg : ckpt::kMomentum, *o.param, o.offset, *o.state.moment1);
    if (o.state.moment2->defined()) add(ckpt::kExpAvgSq, *o.param, o.offset, *o.state.moment2);
  }
  return out;
}

void Checkpointer::save(const model::LanguageModel& model, ParallelOptimizer& optimizer,
                        const ckpt::TrainingState& state) {
  if (!save_dir_) return;
  finish();
  const auto& r = compiled_.recipe;
  const double started = now_s();
  backend_.synchronize();
  std::vector<ckpt::Piece> mine = pieces(model, optimizer, r.checkpoint.async_save);
  int64_t bytes = 0;
  for (const ckpt::Piece& p : mine) bytes += int64_t(p.data().size());
  ckpt::CheckpointMeta meta{
      .state = state,
      .layout = {.world = groups_.world->size(), .tensor = groups_.tp_size,
                 .pipeline = groups_.pp_size, .data = groups_.dp_size,
                 .virtual_pipeline = r.parallel.virtual_pipeline,
                 .sequence_parallel = r.parallel.sequence_parallel,
                 .distributed_optimizer = r.parallel.distributed_optimizer},
      .dtype = std::string(tensor::name(config_.dtype)),
      .optimizer = std::string(recipe::name_of(r.training.optimizer)),
      .seed = r.training.seed,
      .model = ckpt::model_fields(config_),
      .recipe = recipe::render_yaml(with_absolute_paths(compiled_)),
      .recipe_original = recipe_text_,
      .overrides = text_of(overrides_),
      .version = std::string(build_info::version())};
  const fs::path staging = ckpt::staging_dir(*save_dir_, state.iteration);
  std::string error;
  if (groups_.world_rank == 0) {
    std::error_code ec;
    fs::remove_all(staging, ec);
    fs::create_directories(staging, ec);
    if (ec) error = "cannot create " + staging.string() + ": " + ec.message();
  }
  if (const std::string e = first_error(backend_, *groups_.world, error); !e.empty()) {
    throw RuntimeFailure("checkpoint.save: " + e);
  }
  auto write = [staging, rank = groups_.world_rank, pieces = std::move(mine)]() -> std::string {
    try {
      ckpt::write_rank_file(staging, rank, pieces);
      return "";
    } catch (const std::exception& e) {
      return e.what();
    }
  };
  in_flight_ = InFlight{.meta = std::move(meta), .started_s = started, .bytes = bytes};
  if (r.checkpoint.async_save) {
    in_flight_->written = std::async(std::launch::async, std::move(write));
    spdlog::info("saving checkpoint at iteration {} in the background ({:.1f} MiB on this rank)",
                 state.iteration, double(bytes) / 1048576.0);
  } else {
    std::promise<std::string> done;
    done.set_value(write());
    in_flight_->written = done.get_future();
    publish();
  }
}

void Checkpointer::poll() {
  if (!in_flight_) return;
  const bool done = in_flight_->written.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  if (parallel::sum_across(backend_, *groups_.world, done ? 0.0 : 1.0) == 0.0) publish();
}

void Checkpointer::finish() {
  if (in_flight_) publish();
}

void Checkpointer::publish() {
  InFlight job = std::move(*in_flight_);
  in_flight_.reset();
  const int64_t iteration = job.meta.state.iteration;
  const std::string mine = job.written.get();
  const std::string error = first_error(backend_, *groups_.world, mine);
  if (!error.empty()) {
    throw RuntimeFailure(fmt::format("saving the checkpoint of iteration {} failed: {}", iteration, error));
  }
  dist::inject_save_fault(groups_.world_rank, iteration);
  if (groups_.world_rank != 0) return;
  const fs::path staging = ckpt::staging_dir(*save_dir_, iteration);
  ckpt::write_index(staging, job.meta);
  const fs::path final_dir = ckpt::publish(*save_dir_, iteration);
  ckpt::prune(*save_dir_, compiled_.recipe.checkpoint.keep_last.value_or(0));
  spdlog::info("saved checkpoint {} ({} rank file{}, {:.1f} MiB from rank 0, {:.2f} s)",
               final_dir.string(), job.meta.layout.world, job.meta.layout.world == 1 ? "" : "s",
               double(job.bytes) / 1048576.0, now_s() - job.started_s);
}

std::optional<fs::path> Checkpointer::source() const {
  const auto& cp = compiled_.recipe.checkpoint;
  // The run's own newest checkpoint first: a resubmitted fine-tuning job continues where it
  // stopped instead of starting over from checkpoint.load.
  if (cp.save) {
    if (std::optional<fs::path> own = ckpt::resolve_checkpoint(*cp.save)) return own;
  }
  if (!cp.load) return std::nullopt;
  std::optional<fs::path> dir = ckpt::resolve_checkpoint(*cp.load);
  if (!dir) {
    throw UserError(fmt::format("{}: checkpoint.load: {} holds no checkpoint (neither {} nor "
                                "latest); check the path, or drop checkpoint.load to start "
                                "from scratch",
                                compiled_.file, *cp.load, ckpt::kIndexFile));
  }
  return dir;
}

std::optional<ckpt::CheckpointMeta> Checkpointer::load(model::LanguageModel& model,
                                                      ParallelOptimizer& optimizer) {
  const std::optional<fs::path> dir = source();
  if (!dir) return std::nullopt;
  const auto& cp = compiled_.recipe.checkpoint;
  if (cp.load && cp.save && dir->parent_path() == fs::path(*cp.save)) {
    spdlog::info("checkpoint.save holds checkpoints of this run already: continuing from {} "
                 "rather than checkpoint.load ({})",
                 dir->string(), *cp.load);
  }
  const double started = now_s();
  std::string error;
  std::optional<ckpt::CheckpointReader> reader;
  try {
    reader.emplace(*dir);
    // Model first: a different model is the likeliest mistake, and names one field.
    const auto mine = ckpt::model_fields(config_);
    for (const auto& [key, value] : mine) {
      const std::string theirs = ckpt::model_field(reader->meta(), key).value_or("(not recorded)");
      if (theirs != value) {
        throw UserError(fmt::format("{}: the checkpoint's {} is {} but the recipe's is {}: load it "
                                    "with the model it was trained with (megatron ckpt inspect {} "
                                    "shows it)",
                                    dir->string(), printable(key), printable(theirs), value,
                                    dir->string()));
      }
    }
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (const std::string e = first_error(backend_, *groups_.world, error); !e.empty()) throw UserError(e);

  bool fresh_optimizer = false;
  try {
    const std::string dir_text = dir->string();
    ckpt::load_model_weights(*reader, model, backend_);
    // The optimizer's shards, read as the weights are (load_model_weights checked every weight).
    ckpt::ShardReader shards(*reader, backend_, config_.vocab);
    const bool adam = compiled_.recipe.training.optimizer == recipe::Optimizer::AdamW;
    const std::string kind(recipe::name_of(compiled_.recipe.training.optimizer));
    fresh_optimizer = reader->meta().optimizer != kind;
    for (const ParallelOptimizer::Owned& o : optimizer.owned()) {
      std::vector<ckpt::Box> boxes;
      for (const ckpt::Segment& s : ckpt::range_segments(ckpt::shard_boxes(layout_of(*o.param, groups_)),
                                                         o.offset, o.offset + o.numel)) {
        boxes.push_back(s.box);
      }
      auto restore = [&](const char* k, tensor::Tensor& into) {
        const ckpt::TensorInfo* t = reader->find(k, o.param->name);
        if (!t) throw UserError(dir_text + ": the checkpoint has no tensor " + k + "/" + o.param->name);
        shards.read(*t, boxes, into, /*zero_past_end=*/true);
      };
      if (config_.dtype != tensor::DType::F32) {
        // The f32 master: saved by a 16-bit run; else the (f32) weights themselves.
        const ckpt::TensorInfo* master = reader->find(ckpt::kMaster, o.param->name);
        shards.read(master ? *master : *shards.model_tensor(*o.param), boxes, *o.state.master);
      }
      if (fresh_optimizer) continue;  // moments stay zero
      restore(adam ? ckpt::kExpAvg : ckpt::kMomentum, *o.state.moment1);
      if (o.state.moment2->defined()) restore(ckpt::kExpAvgSq, *o.state.moment2);
    }
    error.clear();
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (const std::string e = first_error(backend_, *groups_.world, error); !e.empty()) throw UserError(e);

  const ckpt::CheckpointMeta& meta = reader->meta();
  optimizer.set_steps(fresh_optimizer ? 0 : meta.state.optimizer_steps);
  const auto& l = meta.layout;
  spdlog::info("loaded checkpoint {}: iteration {}, {} samples consumed; saved under tensor {} x "
               "pipeline {} x data {}{}, {}; {:.2f} s",
               dir->string(), meta.state.iteration, meta.state.consumed_samples, l.tensor, l.pipeline,
               l.data, l.distributed_optimizer ? " (distributed optimizer)" : "", meta.dtype,
               now_s() - started);
  if (fresh_optimizer) {
    spdlog::warn("the checkpoint holds no {} state ({}): the optimizer starts fresh",
                 recipe::name_of(compiled_.recipe.training.optimizer), meta.optimizer);
  }
  return meta;
}

}  // namespace megatron::train
