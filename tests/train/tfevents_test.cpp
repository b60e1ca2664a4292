// TensorBoard event files: CRC-32C and its mask as TFRecord defines them, the record framing,
// and the protobuf bytes of a scalar event, checked against values worked out by hand.
#include "train/tfevents.hpp"

#include <gtest/gtest.h>

#include <cstring>

#include "support/temp_dir.hpp"

namespace megatron::train {
namespace {

uint32_t u32_at(const std::string& s, size_t at) {
  uint32_t v = 0;
  std::memcpy(&v, s.data() + at, 4);
  return v;
}

TEST(Tfevents, Crc32cIsCastagnolisCheckValue) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);  // the CRC catalogue's check value
  EXPECT_EQ(crc32c(""), 0u);
  const uint32_t c = crc32c("123456789");
  EXPECT_EQ(masked_crc32c("123456789"), ((c >> 15) | (c << 17)) + 0xA282EAD8u);
}

TEST(Tfevents, ARecordIsLengthItsCrcDataAndItsCrc) {
  const std::string r = tf_record("abc");
  ASSERT_EQ(r.size(), 8u + 4u + 3u + 4u);
  uint64_t length = 0;
  std::memcpy(&length, r.data(), 8);
  EXPECT_EQ(length, 3u);
  EXPECT_EQ(u32_at(r, 8), masked_crc32c(r.substr(0, 8)));
  EXPECT_EQ(r.substr(12, 3), "abc");
  EXPECT_EQ(u32_at(r, 15), masked_crc32c("abc"));
}

TEST(Tfevents, AScalarEventIsWallTimeStepAndASummaryValue) {
  const std::string e = scalar_event(1.5, 300, "lm loss", 2.0f);
  // wall_time (field 1, fixed64) 1.5, step (field 2, varint) 300 = ac 02,
  // summary (field 5) { value (field 1) { tag (1) "lm loss", simple_value (2, fixed32) 2.0 } }.
  const std::string expected = std::string("\x09\x00\x00\x00\x00\x00\x00\xf8\x3f", 9) + "\x10\xac\x02" +
                               "\x2a\x10" + "\x0a\x0e" + "\x0a\x07lm loss" +
                               std::string("\x15\x00\x00\x00\x40", 5);
  EXPECT_EQ(e, expected);
}

TEST(Tfevents, AFileStartsWithTheVersionEventAndEndsEachEventFlushed) {
  test_support::TempDir dir;
  EventFile f(dir.path() / "tb");
  f.scalar("grad-norm", 1.25, 7);
  EXPECT_NE(f.path().filename().string().find("events.out.tfevents."), std::string::npos);
  std::ifstream in(f.path(), std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t first = 0;
  std::memcpy(&first, all.data(), 8);
  EXPECT_NE(all.substr(12, first).find("brain.Event:2"), std::string::npos);
  EXPECT_NE(all.find("grad-norm"), std::string::npos);
}

}  // namespace
}  // namespace megatron::train
