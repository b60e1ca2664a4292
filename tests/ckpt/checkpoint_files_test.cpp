// Rank files, the index's virtual datasets and the save directory: what one rank writes is what
// any layout reads back, and `latest` only ever names a complete checkpoint.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <numeric>

#include <zlib.h>

#include "ckpt/checkpoint_reader.hpp"
#include "ckpt/checksum.hpp"
#include "ckpt/checkpoint_writer.hpp"
#include "ckpt/directory.hpp"
#include "ckpt/rewrite.hpp"
#include "core/error.hpp"
#include "support/temp_dir.hpp"

namespace megatron::ckpt {
namespace {
namespace fs = std::filesystem;

std::vector<std::byte> bytes_of(const std::vector<float>& v) {
  std::vector<std::byte> out(v.size() * 4);
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// A [rows, cols] tensor whose element (r, c) is r * 1000 + c.
std::vector<float> global(int64_t rows, int64_t cols) {
  std::vector<float> v(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) v[size_t(r * cols + c)] = float(r * 1000 + c);
  return v;
}

// The elements of `boxes` of a global tensor, in order.
std::vector<float> take(const std::vector<float>& g, int64_t cols, const std::vector<Box>& boxes) {
  std::vector<float> out;
  for (const Box& b : boxes)
    for (int64_t r = 0; r < b.rows; ++r)
      for (int64_t c = 0; c < b.cols; ++c) out.push_back(g[size_t((b.row0 + r) * cols + b.col0 + c)]);
  return out;
}

CheckpointMeta meta_for(int64_t world, int64_t iteration) {
  CheckpointMeta m;
  m.state.iteration = iteration;
  m.state.consumed_samples = 40;
  m.layout.world = world;
  m.dtype = "f32";
  m.optimizer = "adamw";
  m.model = {{"model.num_layers", "2"}};
  m.recipe = "model:\n  num_layers: 2\n";
  return m;
}

// Writes `name` [8, 6] split by columns over 2 tensor ranks, the second rank's shard further
// cut in two slices as a distributed optimizer would (3 rank files).
void write_sharded(const fs::path& dir, const std::vector<float>& g) {
  const std::vector<int64_t> shape{8, 6};
  const ShardLayout t0{.global_shape = shape, .split = Split::Columns, .tp_rank = 0, .tp_size = 2};
  const ShardLayout t1{.global_shape = shape, .split = Split::Columns, .tp_rank = 1, .tp_size = 2};
  const std::vector<float> s0 = take(g, 6, shard_boxes(t0)), s1 = take(g, 6, shard_boxes(t1));
  write_rank_file(dir, 0, {Piece{.kind = kModel, .name = "w", .layout = t0, .bytes = bytes_of(s0)}});
  write_rank_file(dir, 1, {Piece{.kind = kModel, .name = "w", .layout = t1, .offset = 0,
                                 .bytes = bytes_of({s1.begin(), s1.begin() + 7})}});
  write_rank_file(dir, 2, {Piece{.kind = kModel, .name = "w", .layout = t1, .offset = 7,
                                 .bytes = bytes_of({s1.begin() + 7, s1.end()})}});
}

TEST(CheckpointFiles, TheIndexPresentsPiecesOfEveryRankAsOneGlobalTensor) {
  test_support::TempDir dir;
  const std::vector<float> g = global(8, 6);
  write_sharded(dir.path(), g);
  write_index(dir.path(), meta_for(3, 7));
  CheckpointReader reader(dir.path());
  ASSERT_EQ(reader.tensors().size(), 1u);
  EXPECT_EQ(reader.tensors()[0].shape, (std::vector<int64_t>{8, 6}));
  EXPECT_EQ(reader.tensors()[0].split, Split::Columns);
  std::vector<float> whole(48);
  reader.read_f32(reader.tensors()[0], {Box{0, 8, 0, 6}}, whole);
  EXPECT_EQ(whole, g);
  EXPECT_EQ(reader.meta().state.iteration, 7);
  EXPECT_EQ(reader.meta().model, meta_for(3, 7).model);
  EXPECT_EQ(reader.verify(0, 1), "");
}

TEST(CheckpointFiles, AnotherLayoutReadsItsOwnShard) {
  test_support::TempDir dir;
  const std::vector<float> g = global(8, 6);
  write_sharded(dir.path(), g);
  write_index(dir.path(), meta_for(3, 7));
  CheckpointReader reader(dir.path());
  // Tensor parallel 3 by columns, rank 2, and a flat slice of it.
  const ShardLayout mine{.global_shape = {8, 6}, .split = Split::Columns, .tp_rank = 2, .tp_size = 3};
  std::vector<float> shard(16);
  reader.read_f32(reader.tensors()[0], shard_boxes(mine), shard);
  EXPECT_EQ(shard, take(g, 6, shard_boxes(mine)));
  std::vector<Box> slice;
  for (const Segment& s : range_segments(shard_boxes(mine), 3, 11)) slice.push_back(s.box);
  std::vector<float> part(8);
  reader.read_f32(reader.tensors()[0], slice, part);
  EXPECT_EQ(part, std::vector<float>(shard.begin() + 3, shard.begin() + 11));
}

TEST(CheckpointFiles, RowsPastTheEndRepeatTheLastRowOrAreZeros) {
  test_support::TempDir dir;
  const std::vector<float> g = global(4, 3);
  write_rank_file(dir.path(), 0, {Piece{.kind = kModel, .name = "emb",
                                        .layout = {.global_shape = {4, 3}}, .bytes = bytes_of(g)}});
  write_index(dir.path(), meta_for(1, 1));
  CheckpointReader reader(dir.path());
  std::vector<float> out(6);
  reader.read_f32(reader.tensors()[0], {Box{3, 2, 0, 3}}, out);
  EXPECT_EQ(out, (std::vector<float>{3000, 3001, 3002, 3000, 3001, 3002}));
  reader.read_f32(reader.tensors()[0], {Box{3, 2, 0, 3}}, out, /*zero_past_end=*/true);
  EXPECT_EQ(out, (std::vector<float>{3000, 3001, 3002, 0, 0, 0}));
}

TEST(CheckpointFiles, SixteenBitTensorsKeepTheirBits) {
  test_support::TempDir dir;
  std::vector<std::byte> raw(10 * 2);
  for (size_t i = 0; i < raw.size(); ++i) raw[i] = std::byte(i * 37 + 1);
  for (tensor::DType dtype : {tensor::DType::Bf16, tensor::DType::F16}) {
    write_rank_file(dir.path(), 0, {Piece{.kind = kModel, .name = "x", .layout = {.global_shape = {10}},
                                          .dtype = dtype, .bytes = raw}});
    CheckpointMeta meta = meta_for(1, 1);
    meta.dtype = std::string(tensor::name(dtype));
    write_index(dir.path(), meta);
    CheckpointReader reader(dir.path());
    EXPECT_EQ(reader.tensors()[0].dtype, dtype);
    std::vector<std::byte> back(raw.size());
    reader.read_raw(reader.tensors()[0], {Box{0, 10, 0, 1}}, back);
    EXPECT_EQ(back, raw);
  }
}

TEST(CheckpointFiles, AMissingPieceIsRefusedWhenTheIndexIsWritten) {
  test_support::TempDir dir;
  const std::vector<float> g = global(8, 6);
  write_sharded(dir.path(), g);
  fs::remove(dir.path() / "rank_00002.h5");
  write_rank_file(dir.path(), 2, {});
  EXPECT_THROW(write_index(dir.path(), meta_for(3, 7)), RuntimeFailure);
}

TEST(CheckpointFiles, VerifyNamesAMissingRankFile) {
  test_support::TempDir dir;
  write_sharded(dir.path(), global(8, 6));
  write_index(dir.path(), meta_for(3, 7));
  fs::remove(dir.path() / "rank_00001.h5");
  CheckpointReader reader(dir.path());
  EXPECT_NE(reader.verify(0, 1).find("rank_00001.h5: no such file"), std::string::npos);
  EXPECT_EQ(reader.verify(0, 2), "");  // rank files 0 and 2 are this part's
}

TEST(SaveDirectory, PublishMovesTheStagingDirectoryThenLatest) {
  test_support::TempDir save;
  fs::create_directories(staging_dir(save.path(), 5));
  write_rank_file(staging_dir(save.path(), 5), 0,
                  {Piece{.kind = kModel, .name = "x", .layout = {.global_shape = {2}}, .bytes = bytes_of({1, 2})}});
  write_index(staging_dir(save.path(), 5), meta_for(1, 5));
  EXPECT_EQ(resolve_checkpoint(save.path()), std::nullopt);  // not published yet
  const fs::path dir = publish(save.path(), 5);
  EXPECT_EQ(dir, save.path() / "iter_0000005");
  EXPECT_FALSE(fs::exists(staging_dir(save.path(), 5)));
  EXPECT_EQ(resolve_checkpoint(save.path()), dir);
  EXPECT_EQ(resolve_checkpoint(dir), dir);
}

TEST(SaveDirectory, PruneKeepsTheNewestAndLatestAndClearsInterruptedSaves) {
  test_support::TempDir save;
  for (int it : {2, 4, 6, 8}) fs::create_directories(save.path() / iteration_dir_name(it));
  fs::create_directories(staging_dir(save.path(), 10));
  std::ofstream(save.path() / "latest") << "iter_0000002\n";
  prune(save.path(), 2);
  EXPECT_TRUE(fs::exists(save.path() / "iter_0000002"));  // latest, however old
  EXPECT_FALSE(fs::exists(save.path() / "iter_0000004"));
  EXPECT_TRUE(fs::exists(save.path() / "iter_0000006"));
  EXPECT_TRUE(fs::exists(save.path() / "iter_0000008"));
  EXPECT_FALSE(fs::exists(staging_dir(save.path(), 10)));
}

TEST(SaveDirectory, ALatestNamingAMissingCheckpointIsAUserError) {
  test_support::TempDir save;
  std::ofstream(save.path() / "latest") << "iter_0000009\n";
  EXPECT_THROW(resolve_checkpoint(save.path()), UserError);
}

TEST(Rewrite, StagesFollowLayerNumbers) {
  const std::vector<int64_t> stages{0, 0, 1, 1};
  EXPECT_EQ(stage_of("embedding.word_embeddings.weight", stages, 2), 0);
  EXPECT_EQ(stage_of("decoder.layers.2.mlp.linear_fc1.weight", stages, 2), 1);
  EXPECT_EQ(stage_of("decoder.layers.1.input_layernorm.weight", stages, 2), 0);
  EXPECT_EQ(stage_of("decoder.final_layernorm.weight", stages, 2), 1);
  EXPECT_EQ(stage_of("output_layer.weight", stages, 2), 1);
  EXPECT_EQ(stage_of("embedding.tokentype_embeddings.weight", stages, 2), 0);
  EXPECT_EQ(stage_of("lm_head.dense.weight", stages, 2), 1);
  EXPECT_EQ(stage_of("pooler.dense.bias", stages, 2), 1);
  EXPECT_EQ(stage_of("binary_head.weight", stages, 2), 1);
  EXPECT_THROW(stage_of("decoder.layers.7.x", stages, 2), UserError);
}

TEST(Rewrite, T5DecoderLayersFollowTheEncodersOnTheStages) {
  // 2 encoder + 2 decoder layers on 2 stages: the encoder (and its final norm) first.
  const std::vector<int64_t> stages{0, 0, 1, 1};
  EXPECT_EQ(stage_of("encoder.layers.1.mlp.linear_fc1.weight", stages, 2, 2), 0);
  EXPECT_EQ(stage_of("encoder.final_layernorm.weight", stages, 2, 2), 0);
  EXPECT_EQ(stage_of("decoder.layers.0.cross_attention.linear_q.weight", stages, 2, 2), 1);
  EXPECT_EQ(stage_of("embedding.position_embeddings.weight", stages, 2, 2), 0);
  EXPECT_EQ(stage_of("encoder_relative_pos_emb.relative_attention_bias.weight", stages, 2, 2), 0);
  EXPECT_EQ(stage_of("decoder.final_layernorm.weight", stages, 2, 2), 1);
  EXPECT_EQ(stage_of("output_layer.bias", stages, 2, 2), 1);
  EXPECT_THROW(stage_of("decoder.layers.2.x", stages, 2, 2), UserError);
}

}  // namespace
}  // namespace megatron::ckpt

namespace megatron::ckpt {
namespace {

TEST(Checksum, IsZlibsCrc32) {
  const std::string check = "123456789";  // the CRC-32 check value
  EXPECT_EQ(crc32_of(std::as_bytes(std::span(check.data(), check.size()))), 0xCBF43926u);
}

TEST(Checksum, SplittingALargePieceOverThreadsGivesTheSameCrc) {
  std::vector<std::byte> big((size_t(40) << 20) + 12345);
  for (size_t i = 0; i < big.size(); ++i) big[i] = std::byte((i * 2654435761u) >> 13);
  uLong serial = crc32(0L, Z_NULL, 0);
  serial = crc32(serial, reinterpret_cast<const Bytef*>(big.data()), uInt(big.size()));
  EXPECT_EQ(crc32_of(big), uint32_t(serial));
}

}  // namespace
}  // namespace megatron::ckpt
