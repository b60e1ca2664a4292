// safetensors files: the writer's bytes read back by hand (header size, JSON, 8-byte
// alignment, offsets), a hand-spelled file read by the reader, and the checks on both sides.
#include "ckpt/safetensors.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "support/bytes.hpp"
#include "support/temp_dir.hpp"

namespace megatron::ckpt {
namespace {

using tensor::DType;

std::vector<std::byte> pattern(size_t n, int seed) {
  std::vector<std::byte> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = std::byte((i * 37 + size_t(seed) * 11 + 5) & 0xFF);
  return out;
}

TEST(Safetensors, WriterBytesAreTheFormatAndTheReaderGetsThemBack) {
  test_support::TempDir dir;
  const auto path = dir.path() / "m.safetensors";
  const auto a = pattern(2 * 3 * 4, 1), b = pattern(5 * 2, 2), c = pattern(1 * 2 * 2, 3);
  {
    SafetensorsWriter w(
        path,
        {{"a.weight", DType::F32, {2, 3}}, {"b", DType::Bf16, {5}}, {"c", DType::F16, {1, 2}}},
        {{"format", "pt"}});
    w.append(std::span(a).first(7));  // chunks need not follow tensor boundaries
    w.append(std::span(a).subspan(7));
    w.append(b);
    w.append(c);
    w.finish();
  }
  const std::string file = test_support::slurp(path);
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | uint8_t(file[size_t(i)]);
  EXPECT_EQ((8 + header_size) % 8, 0u) << "data must start 8-byte aligned";
  ASSERT_EQ(file.size(), 8 + header_size + a.size() + b.size() + c.size());
  const auto header = nlohmann::json::parse(file.substr(8, header_size));
  EXPECT_EQ(header["__metadata__"]["format"], "pt");
  EXPECT_EQ(header["a.weight"]["dtype"], "F32");
  EXPECT_EQ(header["a.weight"]["shape"], nlohmann::json({2, 3}));
  EXPECT_EQ(header["a.weight"]["data_offsets"], nlohmann::json({0, 24}));
  EXPECT_EQ(header["b"]["dtype"], "BF16");
  EXPECT_EQ(header["b"]["data_offsets"], nlohmann::json({24, 34}));
  EXPECT_EQ(header["c"]["dtype"], "F16");
  EXPECT_EQ(header["c"]["data_offsets"], nlohmann::json({34, 38}));
  EXPECT_EQ(std::memcmp(file.data() + 8 + header_size + 24, b.data(), b.size()), 0);

  SafetensorsFile f(path);
  ASSERT_EQ(f.entries().size(), 3u);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  const SafetensorsEntry* e = f.find("c");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->dtype, DType::F16);
  EXPECT_EQ(e->shape, (std::vector<int64_t>{1, 2}));
  std::vector<std::byte> got(c.size());
  f.read(*e, 0, got);
  EXPECT_EQ(got, c);
  std::vector<std::byte> part(10);
  f.read(*f.find("a.weight"), 5, part);
  EXPECT_TRUE(std::equal(part.begin(), part.end(), a.begin() + 5));
  EXPECT_THROW(f.read(*e, 1, got), RuntimeFailure);  // past the tensor's end
}

TEST(Safetensors, ReadsAFileSpelledByHandIncludingDtypesItDoesNotConvert) {
  test_support::TempDir dir;
  const std::string json = R"({"mask":{"dtype":"BOOL","shape":[2],"data_offsets":[4,6]},)"
                           R"("w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  std::string bytes = test_support::little_endian<uint64_t>({json.size()}) + json;
  bytes += test_support::little_endian<uint32_t>({0x3F800000u});  // 1.0f
  bytes += std::string("\x01\x00", 2);
  const auto path = dir.write("hand.safetensors", bytes);
  SafetensorsFile f(path);
  const SafetensorsEntry* w = f.find("w");
  ASSERT_NE(w, nullptr);
  float one = 0;
  f.read(*w, 0, std::as_writable_bytes(std::span(&one, 1)));
  EXPECT_EQ(one, 1.0f);
  const SafetensorsEntry* mask = f.find("mask");
  ASSERT_NE(mask, nullptr);
  EXPECT_EQ(mask->dtype_name, "BOOL");
  EXPECT_FALSE(mask->dtype.has_value());
}

void expect_bad(const std::string& bytes, const std::string& words) {
  test_support::TempDir dir;
  const auto path = dir.write("bad.safetensors", bytes);
  try {
    SafetensorsFile f(path);
    ADD_FAILURE() << "accepted a bad file; expected: " << words;
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not a valid safetensors file"), std::string::npos);
  }
}

TEST(Safetensors, MalformedFilesAreUserErrorsThatSayWhy) {
  expect_bad("abc", "8-byte header size");
  expect_bad(test_support::little_endian<uint64_t>({1000}) + "{}", "does not fit");
  const std::string past = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  expect_bad(test_support::little_endian<uint64_t>({past.size()}) + past + "1234", "outside");
  const std::string size = R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})";
  expect_bad(test_support::little_endian<uint64_t>({size.size()}) + size + "12345678",
             "8 bytes for 3 elements");
  const std::string json = "{not json";
  expect_bad(test_support::little_endian<uint64_t>({json.size()}) + json, "not JSON");
}

std::string with_header(const std::string& json, const std::string& data = "") {
  return test_support::little_endian<uint64_t>({json.size()}) + json + data;
}

TEST(Safetensors, AHeaderSizeNearTwoToThe64DoesNotWrapAround) {
  expect_bad(test_support::little_endian<uint64_t>({0xFFFFFFFFFFFFFFF8ull}) + "{}", "does not fit");
}

TEST(Safetensors, AShapeWhoseElementCountOverflowsIsRefused) {
  expect_bad(with_header(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,4],"data_offsets":[0,0]}})"),
             "overflows");
}

TEST(Safetensors, FractionalOrOutOfRangeNumbersAreRefused) {
  expect_bad(with_header(R"({"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", "1234"),
             "is not a list of sizes");
  expect_bad(with_header(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,18446744073709551615]}})",
                         "1234"),
             "data_offsets must be [begin, end]");
}

TEST(Safetensors, ATensorNamedTwiceIsRefused) {
  expect_bad(with_header(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                         R"("w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                         "12345678"),
             "tensor \"w\" appears twice in the header");
}

TEST(Safetensors, OverlappingTensorsAreRefused) {
  expect_bad(with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                         R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                         "12345678"),
             "b (bytes [4, 8)) overlaps a (bytes [0, 8))");
}

TEST(Safetensors, BinaryBytesFromTheHeaderAreEscapedInTheError) {
  // JSON escapes decode to raw control bytes in the name and the dtype.
  expect_bad(with_header(R"({"w\u0001":{"dtype":"F\u007f","shape":[1],"data_offsets":[0,4]}})", "1234"),
             "w\\x01: unknown dtype F\\x7f");
}

TEST(Safetensors, ADirectoryIsNotASafetensorsFile) {
  test_support::TempDir dir;
  try {
    SafetensorsFile f(dir.path());
    ADD_FAILURE() << "accepted a directory";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
  }
}

TEST(Safetensors, AMalformedFileLeavesNoDescriptorOpen) {
  test_support::TempDir dir;
  const auto file = dir.write("bad.safetensors", std::string("\x10\0\0\0\0\0\0\0{not json}      ", 24));
  auto open_descriptors = [] {
    return std::distance(std::filesystem::directory_iterator("/proc/self/fd"),
                         std::filesystem::directory_iterator());
  };
  const auto before = open_descriptors();
  for (int i = 0; i < 20; ++i) EXPECT_THROW(ckpt::SafetensorsFile{file}, UserError);
  EXPECT_EQ(open_descriptors(), before);
}

TEST(Safetensors, AWriterLeavesNoFileUnlessEveryByteCame) {
  test_support::TempDir dir;
  const auto path = dir.path() / "short.safetensors";
  {
    SafetensorsWriter w(path, {{"x", DType::F32, {4}}});
    w.append(pattern(8, 0));
    EXPECT_THROW(w.finish(), RuntimeFailure);
    EXPECT_THROW(w.append(pattern(9, 0)), RuntimeFailure);  // more than declared
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_THROW(SafetensorsWriter bad(path, {{"i", DType::I32, {1}}}), UserError);
}

}  // namespace
}  // namespace megatron::ckpt
