// The line reader on compressed input: a .gz or .zst corpus cut short is an error, never a
// silently smaller corpus; legal multi-member and multi-frame files read through.
#include "data/line_reader.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>
#include <zstd.h>

#include <filesystem>

#include "core/error.hpp"
#include "support/bytes.hpp"
#include "support/temp_dir.hpp"

namespace megatron::data {
namespace {

using test_support::slurp;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::string lines(int first, int count) {
  std::string out;
  for (int i = first; i < first + count; ++i)
    out += "{\"text\": \"line " + std::to_string(i) + "\"}\n";
  return out;
}

// Reads `path` to the end: the lines it holds, or the UserError's message.
std::string read_all(const std::filesystem::path& path, int64_t* count = nullptr) {
  try {
    LineReader reader(path.string());
    std::string_view line;
    int64_t n = 0;
    while (reader.next(line)) ++n;
    if (count) *count = n;
    return "";
  } catch (const UserError& e) {
    return e.what();
  }
}

// A gzip member holding `text`.
std::string gzip(const std::string& text) {
  z_stream z{};
  deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, text.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// A gzip member of `head` then `tail`, flushed between them so that the compressed bytes up to
// the returned `cut` decode to exactly `head`: a file cut there ends on a line boundary.
std::string gzip_with_cut(const std::string& head, const std::string& tail, std::size_t& cut) {
  z_stream z{};
  deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, head.size() + tail.size()) + 64, '\0');
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(head.data()));
  z.avail_in = static_cast<uInt>(head.size());
  deflate(&z, Z_FULL_FLUSH);
  cut = z.total_out;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(tail.data()));
  z.avail_in = static_cast<uInt>(tail.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// A zstd frame of `head` then `tail`, flushed between them (as gzip_with_cut).
std::string zstd_with_cut(const std::string& head, const std::string& tail, std::size_t& cut) {
  ZSTD_CCtx* c = ZSTD_createCCtx();
  std::string out(ZSTD_compressBound(head.size() + tail.size()) + 64, '\0');
  ZSTD_outBuffer o{out.data(), out.size(), 0};
  ZSTD_inBuffer in{head.data(), head.size(), 0};
  while (ZSTD_compressStream2(c, &o, &in, ZSTD_e_flush) != 0) {
  }
  cut = o.pos;
  in = {tail.data(), tail.size(), 0};
  while (ZSTD_compressStream2(c, &o, &in, ZSTD_e_end) != 0) {
  }
  out.resize(o.pos);
  ZSTD_freeCCtx(c);
  return out;
}

std::string zstd(const std::string& text) {
  std::string out(ZSTD_compressBound(text.size()), '\0');
  out.resize(ZSTD_compress(out.data(), out.size(), text.data(), text.size(), 3));
  return out;
}

TEST(LineReader, AGzipFileCutAtALineBoundaryIsTruncated) {
  test_support::TempDir dir;
  std::size_t cut = 0;
  const std::string whole = gzip_with_cut(lines(0, 1000), lines(1000, 1000), cut);
  int64_t count = 0;
  ASSERT_EQ(read_all(dir.write("whole.jsonl.gz", whole), &count), "");
  ASSERT_EQ(count, 2000);
  EXPECT_THAT(read_all(dir.write("cut.jsonl.gz", whole.substr(0, cut))),
              AllOf(HasSubstr("cut.jsonl.gz' is truncated or corrupt"),
                    HasSubstr("gzip stream ends before its trailer")));
}

TEST(LineReader, AGzipFileMissingOnlyItsTrailerIsTruncated) {
  test_support::TempDir dir;
  const std::string whole = gzip(lines(0, 10));
  EXPECT_THAT(read_all(dir.write("c.jsonl.gz", whole.substr(0, whole.size() - 8))),
              HasSubstr("c.jsonl.gz' is truncated or corrupt"));
}

TEST(LineReader, ConcatenatedGzipMembersReadAsOneStream) {
  test_support::TempDir dir;
  int64_t count = 0;
  EXPECT_EQ(read_all(dir.write("c.jsonl.gz", gzip(lines(0, 3)) + gzip(lines(3, 4))), &count), "");
  EXPECT_EQ(count, 7);
}

TEST(LineReader, AZstdFileCutAtABlockBoundaryIsTruncated) {
  test_support::TempDir dir;
  std::size_t cut = 0;
  const std::string whole = zstd_with_cut(lines(0, 1000), lines(1000, 1000), cut);
  int64_t count = 0;
  ASSERT_EQ(read_all(dir.write("whole.jsonl.zst", whole), &count), "");
  ASSERT_EQ(count, 2000);
  EXPECT_THAT(read_all(dir.write("cut.jsonl.zst", whole.substr(0, cut))),
              AllOf(HasSubstr("cut.jsonl.zst' is truncated or corrupt"),
                    HasSubstr("zstd stream ends inside a frame")));
}

TEST(LineReader, AZstdFileCutInsideABlockIsTruncated) {
  test_support::TempDir dir;
  const std::string whole = zstd(lines(0, 1000));
  EXPECT_THAT(read_all(dir.write("c.jsonl.zst", whole.substr(0, whole.size() / 2))),
              HasSubstr("c.jsonl.zst' is truncated or corrupt"));
}

TEST(LineReader, SeveralZstdFramesReadAsOneStream) {
  test_support::TempDir dir;
  int64_t count = 0;
  EXPECT_EQ(read_all(dir.write("c.jsonl.zst", zstd(lines(0, 3)) + zstd(lines(3, 4))), &count), "");
  EXPECT_EQ(count, 7);
}

TEST(LineReader, ALargeZstdFrameIsReadWhole) {
  // Larger than the reader's 1 MB blocks, so the decoder holds output between calls.
  test_support::TempDir dir;
  int64_t count = 0;
  EXPECT_EQ(read_all(dir.write("c.jsonl.zst", zstd(lines(0, 200000))), &count), "");
  EXPECT_EQ(count, 200000);
}

}  // namespace
}  // namespace megatron::data
