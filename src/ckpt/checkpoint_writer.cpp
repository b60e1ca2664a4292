#include "ckpt/checkpoint_writer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <map>

#include "ckpt/checkpoint_checks.hpp"
#include "ckpt/checksum.hpp"
#include "core/error.hpp"

namespace megatron::ckpt {
namespace {

// One rank file's piece, as the index needs it.
struct Source {
  std::string file;  // relative to the checkpoint directory
  std::string path;  // dataset in that file
  ShardLayout layout;
  int64_t offset = 0, numel = 0;
  tensor::DType dtype = tensor::DType::F32;
};

Source read_source(hid_t file, const std::string& file_name, const std::string& path) {
  h5::Handle d = h5::open_dataset(file, path, file_name);
  Source s{.file = file_name, .path = path};
  s.layout.global_shape = h5::ints_attr(d.id(), "global_shape", kMaxTensorRank);
  s.layout.split = split_from_name(h5::string_attr(d.id(), "split"));
  s.layout.parts = h5::int_attr(d.id(), "parts");
  s.layout.tp_rank = h5::int_attr(d.id(), "tp_rank");
  s.layout.tp_size = h5::int_attr(d.id(), "tp_size");
  s.offset = h5::int_attr(d.id(), "shard_offset");
  s.numel = h5::dataset_shape(d.id()).at(0);
  s.dtype = h5::dtype_of_dataset(d.id());
  return s;
}

std::string iso_now() {
  const std::time_t now = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return text;
}

}  // namespace

std::string rank_file_name(int rank) { return fmt::format("rank_{:05d}.h5", rank); }

void sync_path(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw RuntimeFailure("cannot open " + path.string() + " to sync it");
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) throw RuntimeFailure("cannot sync " + path.string() + " to disk");
}

RankFileWriter::RankFileWriter(const std::filesystem::path& dir, int rank)
    : path_(dir / rank_file_name(rank)), file_(h5::create_file(path_)) {
  h5::set_attr(file_.id(), "format", std::string("megatron-checkpoint-shard"));
  h5::set_attr(file_.id(), "format_version", kFormatVersion);
  h5::set_attr(file_.id(), "rank", int64_t(rank));
}

void RankFileWriter::add(const Piece& p) {
  h5::Handle d = h5::write_vector(file_.id(), "/" + p.kind + "/" + p.name, p.dtype, p.data().data(),
                                  p.numel());
  h5::set_attr(d.id(), "global_shape", p.layout.global_shape);
  h5::set_attr(d.id(), "split", split_name(p.layout.split));
  h5::set_attr(d.id(), "parts", p.layout.parts);
  h5::set_attr(d.id(), "tp_rank", p.layout.tp_rank);
  h5::set_attr(d.id(), "tp_size", p.layout.tp_size);
  h5::set_attr(d.id(), "shard_offset", p.offset);
  h5::set_attr(d.id(), "crc32", int64_t(crc32_of(p.data())));
}

void RankFileWriter::finish() {
  if (H5Fflush(file_.id(), H5F_SCOPE_GLOBAL) < 0) {
    throw RuntimeFailure("cannot write " + path_.string() + " (disk full?)");
  }
  file_ = h5::Handle();
  sync_path(path_);
}

void write_rank_file(const std::filesystem::path& dir, int rank, const std::vector<Piece>& pieces) {
  RankFileWriter writer(dir, rank);
  for (const Piece& p : pieces) writer.add(p);
  writer.finish();
}

void write_meta(hid_t file, const CheckpointMeta& m) {
  using h5::set_attr;
  set_attr(file, "format", std::string("megatron-checkpoint"));
  set_attr(file, "format_version", kFormatVersion);
  set_attr(file, "iteration", m.state.iteration);
  set_attr(file, "consumed_samples", m.state.consumed_samples);
  set_attr(file, "skipped_iterations", m.state.skipped_iterations);
  set_attr(file, "optimizer_steps", m.state.optimizer_steps);
  set_attr(file, "loss_scale", m.state.loss_scale);
  set_attr(file, "loss_scale_growth_tracker", m.state.growth_tracker);
  set_attr(file, "loss_scale_hysteresis_tracker", m.state.hysteresis_tracker);
  set_attr(file, "world_size", m.layout.world);
  set_attr(file, "tensor_parallel", m.layout.tensor);
  set_attr(file, "pipeline_parallel", m.layout.pipeline);
  set_attr(file, "data_parallel", m.layout.data);
  set_attr(file, "virtual_pipeline", m.layout.virtual_pipeline);
  set_attr(file, "sequence_parallel", int64_t(m.layout.sequence_parallel));
  set_attr(file, "distributed_optimizer", int64_t(m.layout.distributed_optimizer));
  set_attr(file, "dtype", m.dtype);
  set_attr(file, "optimizer", m.optimizer);
  set_attr(file, "seed", m.seed);
  set_attr(file, "rng", std::string("philox4x32-10 counters keyed by (seed, iteration, micro-batch, "
                                    "layer, site): seed and iteration are the whole state"));
  std::string keys, values;
  for (const auto& [k, v] : m.model) {
    keys += k + "\n";
    values += v + "\n";
  }
  set_attr(file, "model_keys", keys);
  set_attr(file, "model_values", values);
  set_attr(file, "recipe", m.recipe);
  set_attr(file, "recipe_original", m.recipe_original);
  set_attr(file, "overrides", m.overrides);
  set_attr(file, "created", m.created.empty() ? iso_now() : m.created);
  set_attr(file, "megatron_version", m.version);
}

CheckpointMeta read_meta(hid_t file, const std::string& name) {
  using namespace h5;
  if (!has_attr(file, "format") || string_attr(file, "format") != "megatron-checkpoint") {
    throw UserError(name + ": not a megatron checkpoint index (no format attribute)");
  }
  if (const int64_t v = int_attr(file, "format_version"); v > kFormatVersion) {
    throw UserError(fmt::format("{}: checkpoint format version {} is newer than this megatron "
                                "reads ({}); upgrade megatron",
                                name, v, kFormatVersion));
  } else if (v < 1) {
    throw UserError(fmt::format("{}: checkpoint format version {} does not exist (damaged "
                                "index?)",
                                name, v));
  }
  CheckpointMeta m;
  m.state = {.iteration = int_attr(file, "iteration"),
             .consumed_samples = int_attr(file, "consumed_samples"),
             .skipped_iterations = int_attr(file, "skipped_iterations"),
             .optimizer_steps = int_attr(file, "optimizer_steps"),
             .loss_scale = double_attr(file, "loss_scale"),
             .growth_tracker = int_attr(file, "loss_scale_growth_tracker"),
             .hysteresis_tracker = int_attr(file, "loss_scale_hysteresis_tracker")};
  m.layout = {.world = int_attr(file, "world_size"),
              .tensor = int_attr(file, "tensor_parallel"),
              .pipeline = int_attr(file, "pipeline_parallel"),
              .data = int_attr(file, "data_parallel"),
              .virtual_pipeline = int_attr(file, "virtual_pipeline"),
              .sequence_parallel = int_attr(file, "sequence_parallel") != 0,
              .distributed_optimizer = int_attr(file, "distributed_optimizer") != 0};
  m.dtype = string_attr(file, "dtype");
  m.optimizer = string_attr(file, "optimizer");
  m.seed = int_attr(file, "seed");
  const std::string keys = string_attr(file, "model_keys"), values = string_attr(file, "model_values");
  size_t k = 0, v = 0;
  while (k < keys.size() && v < values.size()) {
    const size_t ke = keys.find('\n', k), ve = values.find('\n', v);
    if (ke == std::string::npos || ve == std::string::npos) break;
    m.model.emplace_back(keys.substr(k, ke - k), values.substr(v, ve - v));
    k = ke + 1;
    v = ve + 1;
  }
  m.recipe = string_attr(file, "recipe");
  m.recipe_original = string_attr(file, "recipe_original");
  m.overrides = string_attr(file, "overrides");
  m.created = string_attr(file, "created");
  m.version = string_attr(file, "megatron_version");
  check_meta(m, name);
  return m;
}

void write_index(const std::filesystem::path& dir, const CheckpointMeta& meta) {
  // Every rank file's pieces, grouped by global tensor.
  struct Global {
    std::vector<int64_t> shape;
    tensor::DType dtype;
    Split split;
    int64_t parts;
    std::vector<Source> sources;
  };
  std::map<std::pair<std::string, std::string>, Global> globals;  // (kind, name)
  for (int64_t rank = 0; rank < meta.layout.world; ++rank) {
    const std::string name = rank_file_name(int(rank));
    h5::Handle file = h5::open_file(dir / name);
    for (const std::string& kind : tensor_kinds()) {
      for (const std::string& tensor : h5::children(file.id(), "/" + kind)) {
        Source s = read_source(file.id(), name, "/" + kind + "/" + tensor);
        Global& g = globals[{kind, tensor}];
        if (g.sources.empty()) {
          g = Global{.shape = s.layout.global_shape, .dtype = s.dtype, .split = s.layout.split,
                     .parts = s.layout.parts};
        }
        g.sources.push_back(std::move(s));
      }
    }
  }
  const std::filesystem::path path = dir / kIndexFile;
  {
    h5::Handle file = h5::create_file(path);
    write_meta(file.id(), meta);
    h5::Handle lcpl = h5::link_create_plist();
    for (const auto& [key, g] : globals) {
      const auto& [kind, name] = key;
      std::vector<hsize_t> dims(g.shape.begin(), g.shape.end());
      h5::Handle vspace(H5Screate_simple(int(dims.size()), dims.data(), nullptr), H5Sclose);
      h5::Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
      int64_t mapped = 0;
      for (const Source& s : g.sources) {
        const hsize_t n = hsize_t(s.numel);
        h5::Handle src(H5Screate_simple(1, &n, nullptr), H5Sclose);
        for (const Segment& run : range_segments(shard_boxes(s.layout), s.offset, s.offset + s.numel)) {
          std::vector<hsize_t> start{hsize_t(run.box.row0)}, count{hsize_t(run.box.rows)};
          if (dims.size() > 1) {
            start.push_back(hsize_t(run.box.col0));
            count.push_back(hsize_t(run.box.cols));
          }
          const hsize_t src_start = hsize_t(run.offset), src_count = hsize_t(run.box.numel());
          H5Sselect_hyperslab(vspace.id(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr);
          H5Sselect_hyperslab(src.id(), H5S_SELECT_SET, &src_start, nullptr, &src_count, nullptr);
          // Relative names: HDF5 looks for the source next to the index file.
          if (H5Pset_virtual(dcpl.id(), vspace.id(), s.file.c_str(), s.path.c_str(), src.id()) < 0) {
            throw RuntimeFailure("cannot map " + s.path + " of " + s.file + " into " + path.string());
          }
          mapped += run.box.numel();
        }
      }
      int64_t whole = 1;
      for (int64_t d : g.shape) whole *= d;
      if (mapped != whole) {
        throw RuntimeFailure(fmt::format("{}: the rank files hold {} of the {} elements of {}/{} "
                                         "(a rank's file is missing pieces)",
                                         dir.string(), mapped, whole, kind, name));
      }
      h5::Handle type = h5::file_type(g.dtype);
      h5::Handle all(H5Screate_simple(int(dims.size()), dims.data(), nullptr), H5Sclose);
      const std::string dpath = "/" + kind + "/" + name;
      h5::Handle d(H5Dcreate2(file.id(), dpath.c_str(), type.id(), all.id(), lcpl.id(), dcpl.id(),
                              H5P_DEFAULT),
                   H5Dclose);
      if (!d.valid()) throw RuntimeFailure("cannot create " + dpath + " in " + path.string());
      h5::set_attr(d.id(), "split", split_name(g.split));
      h5::set_attr(d.id(), "parts", g.parts);
    }
    if (H5Fflush(file.id(), H5F_SCOPE_GLOBAL) < 0) throw RuntimeFailure("cannot write " + path.string());
  }
  sync_path(path);
}

}  // namespace megatron::ckpt
