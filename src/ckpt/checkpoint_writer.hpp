// Writing a checkpoint directory: each rank's shard file, then (rank 0, once every shard is on
// disk) the index file whose virtual datasets present every tensor whole.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "ckpt/format.hpp"
#include "ckpt/hdf5.hpp"

namespace megatron::ckpt {

std::string rank_file_name(int rank);  // rank_00003.h5

// Writes dir/rank_NNNNN.h5 piece by piece, each with its CRC-32; finish() syncs it to disk.
class RankFileWriter {
 public:
  RankFileWriter(const std::filesystem::path& dir, int rank);
  void add(const Piece& piece);
  void finish();

 private:
  std::filesystem::path path_;
  h5::Handle file_;
};

// The whole file at once.
void write_rank_file(const std::filesystem::path& dir, int rank, const std::vector<Piece>& pieces);

// Writes dir/checkpoint.h5: `meta` as attributes, and for every tensor the rank files hold a
// virtual dataset of its global shape mapping each piece to its place. Syncs it to disk.
void write_index(const std::filesystem::path& dir, const CheckpointMeta& meta);

// Writes `meta` as attributes of `file` / reads them back (the index file's root).
void write_meta(hid_t file, const CheckpointMeta& meta);
CheckpointMeta read_meta(hid_t file, const std::string& file_name);

// fsync of a file or directory (a checkpoint is complete only once its bytes are on disk).
void sync_path(const std::filesystem::path& path);

}  // namespace megatron::ckpt
