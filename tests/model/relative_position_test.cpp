// T5's relative position buckets against PyTorch's (tests/model/reference_buckets.py, the
// formula of Hugging Face's T5 and Megatron-Core), and the bias table's lookup and gradient.
#include "model/relative_position.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "support/temp_dir.hpp"
#include "tensor/cpu_backend.hpp"
#include "tensor/host_io.hpp"

namespace megatron::model {
namespace {

constexpr const char* kPython = "/usr/bin/python3";

TEST(RelativeBucket, EveryPositionFallsInTorchsBucket) {
  if (std::system((std::string(kPython) + " -c 'import torch' >/dev/null 2>&1").c_str()) != 0)
    GTEST_SKIP() << "PyTorch is not installed for " << kPython;
  test_support::TempDir dir;
  const auto out = dir.path() / "buckets.txt";
  ASSERT_EQ(std::system((std::string(kPython) + " " + MEGATRON_SOURCE_DIR +
                         "/tests/model/reference_buckets.py " + out.string()).c_str()),
            0);
  std::ifstream in(out);
  int cases = 0;
  for (const bool bidirectional : {true, false}) {
    for (const auto [buckets, distance] : {std::pair{32, 128}, {16, 64}, {8, 20}, {64, 1000}}) {
      std::string line;
      ASSERT_TRUE(std::getline(in, line));
      std::istringstream words(line);
      for (int64_t rp = -1100; rp < 1100; ++rp) {
        int64_t want = -1;
        words >> want;
        ASSERT_EQ(relative_bucket(rp, bidirectional, buckets, distance), want)
            << "relative position " << rp << ", bidirectional " << bidirectional << ", "
            << buckets << " buckets, max distance " << distance;
      }
      ++cases;
    }
  }
  EXPECT_EQ(cases, 8);
}

TEST(RelativeBucket, TheDecoderNeverLooksAhead) {
  for (int64_t rp = 1; rp < 300; ++rp) EXPECT_EQ(relative_bucket(rp, false, 32, 128), 0);
}

TEST(RelativePositionBias, LooksUpEachPairsBucketForThisRanksHeads) {
  tensor::CpuBackend b(1);
  ModelConfig c{.heads = 4, .relative_buckets = 8, .relative_max_distance = 20};
  ParameterSet params(b, tensor::DType::F32, {.group = nullptr, .rank = 1, .size = 2});
  const RelativePositionBias bias(params, c, "encoder_relative_pos_emb.relative_attention_bias.weight", true);
  Parameter& table = *params.all()[0];
  ASSERT_EQ(table.value.shape(), (tensor::Shape{8, 2}));  // heads 2 and 3 of the whole table
  std::vector<float> values(16);
  for (size_t i = 0; i < values.size(); ++i) values[i] = float(i);
  b.write(table.value, values.data());
  const int64_t seq = 5;
  const std::vector<float> got = tensor::to_floats(b, bias.forward(b, seq));
  ASSERT_EQ(got.size(), size_t(seq * seq * 2));
  for (int64_t i = 0; i < seq; ++i)
    for (int64_t j = 0; j < seq; ++j)
      for (int64_t h = 0; h < 2; ++h)
        EXPECT_EQ(got[size_t((i * seq + j) * 2 + h)],
                  values[size_t(relative_bucket(j - i, true, 8, 20) * 2 + h)]);
}

TEST(RelativePositionBias, BackwardSumsEachBucketsGradient) {
  tensor::CpuBackend b(1);
  ModelConfig c{.heads = 2, .relative_buckets = 8, .relative_max_distance = 20};
  ParameterSet params(b, tensor::DType::F32);
  const RelativePositionBias bias(params, c, "decoder_relative_pos_emb.relative_attention_bias.weight", false);
  Parameter& table = *params.all()[0];
  b.fill(table.grad, 0.0);
  const int64_t seq = 6;
  std::vector<float> d(size_t(seq * seq * 2));
  for (size_t i = 0; i < d.size(); ++i) d[i] = float(i % 7) - 3.0f;
  bias.backward(b, seq, tensor::from_floats(b, d, {seq * seq, 2}));
  std::vector<double> want(16, 0.0);
  for (int64_t i = 0; i < seq; ++i)
    for (int64_t j = 0; j < seq; ++j)
      for (int64_t h = 0; h < 2; ++h)
        want[size_t(relative_bucket(j - i, false, 8, 20) * 2 + h)] += d[size_t((i * seq + j) * 2 + h)];
  const std::vector<float> got = tensor::to_floats(b, table.grad);
  for (size_t k = 0; k < want.size(); ++k) EXPECT_FLOAT_EQ(got[k], float(want[k])) << k;
}

}  // namespace
}  // namespace megatron::model
