// Damaged and tampered checkpoints: each class of bad index or rank file is refused, by
// `verify` and by reading, with one line naming the file, before any of it is used.
#include "ckpt/checkpoint_checks.hpp"

#include <gtest/gtest.h>

#include <cstring>

#include "checkpoint_tamper.hpp"
#include "ckpt/checkpoint_reader.hpp"
#include "ckpt/checkpoint_writer.hpp"
#include "core/error.hpp"
#include "support/temp_dir.hpp"

namespace megatron::ckpt {
namespace {
namespace fs = std::filesystem;
using test_support::edit_mappings;
using test_support::Mapping;
using test_support::set_attribute;

std::vector<std::byte> floats(int64_t n, int64_t first) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = float(first + i);
  std::vector<std::byte> out(v.size() * 4);
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// /model/w [8, 6] split by columns over 2 tensor ranks; rank 1's shard of 24 elements is cut
// in two slices (7 + 17) as a distributed optimizer would: three rank files and an index.
struct Sharded : ::testing::Test {
  void SetUp() override {
    const std::vector<int64_t> shape{8, 6};
    const ShardLayout t0{.global_shape = shape, .split = Split::Columns, .tp_rank = 0, .tp_size = 2};
    const ShardLayout t1{.global_shape = shape, .split = Split::Columns, .tp_rank = 1, .tp_size = 2};
    write_rank_file(dir.path(), 0, {Piece{.kind = kModel, .name = "w", .layout = t0, .bytes = floats(24, 0)}});
    write_rank_file(dir.path(), 1, {Piece{.kind = kModel, .name = "w", .layout = t1, .bytes = floats(7, 100)}});
    write_rank_file(dir.path(), 2, {Piece{.kind = kModel, .name = "w", .layout = t1, .offset = 7,
                                          .bytes = floats(17, 200)}});
    write_index(dir.path(), meta());
  }
  static CheckpointMeta meta() {
    CheckpointMeta m;
    m.state.iteration = 7;
    m.layout.world = 3;
    m.layout.data = 3;  // data-parallel ranks slice the shards
    m.dtype = "f32";
    m.optimizer = "adamw";
    return m;
  }
  fs::path index() const { return dir.path() / kIndexFile; }
  fs::path rank(int r) const { return dir.path() / rank_file_name(r); }
  // Reading the whole tensor, which uses every piece.
  void read_all() const {
    CheckpointReader reader(dir.path());
    std::vector<float> out(48);
    reader.read_f32(reader.tensors().at(0), {Box{0, 8, 0, 6}}, out);
  }
  test_support::TempDir dir;
};

// The UserError `f` throws says each of `words`.
void expect_refused(const std::function<void()>& f, const std::vector<std::string>& words) {
  try {
    f();
    ADD_FAILURE() << "accepted; expected an error saying " << words.front();
  } catch (const UserError& e) {
    for (const std::string& w : words) EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "one line";
  }
}

void expect_verify_says(const fs::path& dir, const std::vector<std::string>& words) {
  expect_refused(
      [&] {
        const std::string problem = CheckpointReader(dir).verify(0, 1);
        if (!problem.empty()) throw UserError(problem);
      },
      words);
}

TEST_F(Sharded, IsWholeAndReadsBackBeforeAnyDamage) {
  EXPECT_EQ(CheckpointReader(dir.path()).verify(0, 1), "");
  EXPECT_NO_THROW(read_all());
}

TEST_F(Sharded, APieceShorterThanTheIndexMapsIsRefusedByVerifyAndByReading) {
  test_support::shorten_piece(rank(1), "/model/w", 3);  // its CRC matches its 3 elements
  const std::vector<std::string> words{"rank_00001.h5: tensor /model/w holds 3 elements, but the "
                                       "index maps elements ["};
  expect_verify_says(dir.path(), words);
  expect_refused([&] { read_all(); }, words);
}

TEST_F(Sharded, APieceOutsideItsShardIsRefused) {
  set_attribute(rank(2), "/model/w", "shard_offset", int64_t(20));
  const std::vector<std::string> words{"rank_00002.h5: tensor /model/w holds elements [20, +17) of a shard of 24"};
  expect_verify_says(dir.path(), words);
  expect_refused([&] { read_all(); }, words);
}

TEST_F(Sharded, APieceRecordingAnotherGlobalShapeIsRefused) {
  set_attribute(rank(0), "/model/w", "global_shape", std::vector<int64_t>{8, 7});
  expect_verify_says(dir.path(), {"rank_00000.h5: tensor /model/w records global shape [8, 7]",
                                  "the index [8, 6]"});
}

TEST_F(Sharded, NegativeOrHugeCountsAreRefused) {
  set_attribute(index(), "/", "iteration", int64_t(-1));
  expect_refused([&] { CheckpointReader r(dir.path()); },
                 {"checkpoint.h5: attribute iteration is -1, expected 0 to 1000000000000"});
  set_attribute(index(), "/", "iteration", int64_t(7));
  set_attribute(index(), "/", "consumed_samples", int64_t(1) << 62);
  expect_refused([&] { read_checkpoint_meta(dir.path()); },
                 {"attribute consumed_samples is 4611686018427387904"});
}

TEST_F(Sharded, AnArrayWhereOneValueBelongsIsRefused) {
  set_attribute(index(), "/", "iteration", std::vector<int64_t>{1, 2, 3});
  expect_refused([&] { CheckpointReader r(dir.path()); }, {"attribute 'iteration' is not one integer"});
}

TEST_F(Sharded, AnUnknownDtypeAttributeIsRefusedWithItsBytesEscaped) {
  set_attribute(index(), "/", "dtype", std::string("f64\x01"));
  expect_refused([&] { CheckpointReader r(dir.path()); },
                 {"attribute dtype is 'f64\\x01', expected f32, bf16 or f16"});
}

TEST_F(Sharded, TensorsOfAnotherDtypeThanTheRecordedOneAreRefused) {
  set_attribute(index(), "/", "dtype", std::string("bf16"));
  expect_refused([&] { CheckpointReader r(dir.path()); },
                 {"tensor /model/w is f32, but the checkpoint's model tensors are bf16"});
}

TEST_F(Sharded, ALayoutThatDoesNotDivideTheWorldIsRefused) {
  set_attribute(index(), "/", "tensor_parallel", int64_t(2));
  expect_refused([&] { CheckpointReader r(dir.path()); }, {"6 ranks does not divide world_size 3"});
}

TEST_F(Sharded, VirtualSourcesOutsideTheCheckpointDirectoryAreRefused) {
  for (const std::string& source : {"/tmp/elsewhere/rank_00000.h5", "../other/rank_00000.h5",
                                    "sub/rank_00000.h5", "rank_00009.h5", "."}) {
    SCOPED_TRACE(source);
    edit_mappings(index(), "/model/w", [&](std::vector<Mapping>& maps) { maps[0].file = source; });
    expect_refused([&] { CheckpointReader r(dir.path()); },
                   {"tensor /model/w maps a piece from '" + source + "'",
                    "not one of the checkpoint's rank files rank_00000.h5 to rank_00002.h5"});
  }
}

TEST_F(Sharded, AMappingFromAnotherDatasetIsRefused) {
  edit_mappings(index(), "/model/w", [](std::vector<Mapping>& maps) { maps[0].dataset = "/model/v"; });
  expect_refused([&] { CheckpointReader r(dir.path()); }, {"maps a piece from dataset '/model/v'"});
}

TEST_F(Sharded, MappingsThatLeaveElementsOutAreRefused) {
  edit_mappings(index(), "/model/w", [](std::vector<Mapping>& maps) {
    maps[0].start[0] += 1;  // rank 0's columns 0..2 from row 1 on only
    maps[0].count[0] -= 1;
    maps[0].source_count -= 3;
  });
  expect_refused([&] { CheckpointReader r(dir.path()); },
                 {"tensor /model/w: its pieces leave out row 0 at column 0"});
}

TEST_F(Sharded, MappingsThatFillAnElementTwiceAreRefused) {
  edit_mappings(index(), "/model/w", [](std::vector<Mapping>& maps) { maps.push_back(maps[0]); });
  expect_refused([&] { CheckpointReader r(dir.path()); }, {"its pieces map twice row 0 at column 0"});
}

TEST_F(Sharded, AMappingOutsideTheTensorIsRefused) {
  edit_mappings(index(), "/model/w", [](std::vector<Mapping>& maps) {
    maps[0].source_start = 1;  // 24 elements from element 1 of a 24-element piece
    maps[0].source_extent = 25;
  });
  // The index's own record of the source's extent is not trusted: the piece itself is measured.
  expect_refused([&] { read_all(); }, {"rank_00000.h5: tensor /model/w holds 24 elements",
                                       "maps elements [1, 25)"});
}

TEST_F(Sharded, AnExternalLinkInPlaceOfATensorIsRefused) {
  {
    h5::Handle f = test_support::open_for_writing(index());
    H5Lcreate_external("/etc/other.h5", "/model/w", f.id(), "/model/x", H5P_DEFAULT, H5P_DEFAULT);
  }
  expect_refused([&] { CheckpointReader r(dir.path()); }, {"/model/x is a soft or external link"});
}

TEST(CheckpointChecks, BigEndianFloatsAreNotAnyDtype) {
  test_support::TempDir dir;
  h5::Handle f = h5::create_file(dir.path() / "x.h5");
  const hsize_t n = 4;
  h5::Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose);
  h5::Handle d(H5Dcreate2(f.id(), "x", H5T_IEEE_F32BE, space.id(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
               H5Dclose);
  expect_refused([&] { h5::dtype_of_dataset(d.id()); }, {"not an f32, f16 or bf16 tensor"});
}

TEST(CheckpointChecks, RawDataInAnotherFileIsRefused) {
  test_support::TempDir dir;
  h5::Handle f = h5::create_file(dir.path() / "x.h5");
  const hsize_t n = 4;
  h5::Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose);
  h5::Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  H5Pset_external(dcpl.id(), "/etc/hostname", 0, 16);
  h5::Handle d(H5Dcreate2(f.id(), "x", H5T_IEEE_F32LE, space.id(), H5P_DEFAULT, dcpl.id(), H5P_DEFAULT),
               H5Dclose);
  expect_refused([&] { h5::check_plain_storage(d.id()); }, {"not stored as contiguous bytes in this file"});
}

TEST(CheckpointChecks, RankFileNamesHaveOneSpellingPerRank) {
  EXPECT_EQ(rank_of_file_name("rank_00003.h5"), 3);
  EXPECT_EQ(rank_of_file_name("rank_123456.h5"), 123456);
  EXPECT_EQ(rank_of_file_name("rank_3.h5"), -1);
  EXPECT_EQ(rank_of_file_name("rank_000003.h5"), -1);
  EXPECT_EQ(rank_of_file_name("../rank_00000.h5"), -1);
  EXPECT_EQ(rank_of_file_name("rank_0000a.h5"), -1);
}

TEST(CheckpointChecks, TensorShapesMustBeOneOrTwoPositiveDimensionsThatFitInBytes) {
  CheckpointMeta meta = Sharded::meta();
  const auto with_shape = [&](std::vector<int64_t> shape) {
    return [&meta, shape] { check_tensor({.kind = kModel, .name = "w", .shape = shape}, meta, "i.h5"); };
  };
  expect_refused(with_shape({0, 3}), {"i.h5: tensor /model/w has shape 0 x 3"});
  expect_refused(with_shape({2, 2, 2}), {"expected 1 or 2 positive dimensions"});
  expect_refused(with_shape({int64_t(1) << 40, int64_t(1) << 40}), {"overflows"});
  expect_refused(
      [&] {
        check_tensor({.kind = kModel, .name = "w", .shape = {8, 2}, .split = Split::Rows, .parts = 3},
                     meta, "i.h5");
      },
      {"parts = 3 does not divide its 8 rows"});
}

TEST(CheckpointChecks, OptimizerStateMustBeF32) {
  CheckpointMeta meta = Sharded::meta();
  meta.dtype = "bf16";
  expect_refused(
      [&] {
        check_tensor({.kind = kExpAvg, .name = "w", .shape = {4}, .dtype = tensor::DType::Bf16}, meta, "i.h5");
      },
      {"is bf16, but the checkpoint's optimizer/exp_avg tensors are f32"});
}

}  // namespace
}  // namespace megatron::ckpt
