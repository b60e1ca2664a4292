#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "core/checked.hpp"

namespace megatron {
namespace {

TEST(Checked, ProductsThatFitAreExact) {
  EXPECT_EQ(checked_mul<int64_t>(1 << 20, 1 << 20, "x"), int64_t(1) << 40);
  EXPECT_EQ(checked_add<int64_t>(-5, 7, "x"), 2);
}

TEST(Checked, AnOverflowIsAUserErrorNamingTheQuantity) {
  try {
    checked_mul<int64_t>(std::numeric_limits<int64_t>::max(), 2, "model.hidden_size: parameters");
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("model.hidden_size: parameters overflows"), std::string::npos);
  }
  EXPECT_THROW(checked_add<uint64_t>(~uint64_t(0), 1, "x"), UserError);
  EXPECT_THROW(checked_sub<int32_t>(std::numeric_limits<int32_t>::min(), 1, "x"), UserError);
}

TEST(Checked, DivisionByZeroIsAUserErrorNotSigfpe) {
  EXPECT_THROW(checked_div<int64_t>(10, 0, "x"), UserError);
  EXPECT_THROW(checked_div<int64_t>(std::numeric_limits<int64_t>::min(), -1, "x"), UserError);
  EXPECT_EQ(checked_div<int64_t>(10, 3, "x"), 3);
}

TEST(Checked, CastsRefuseValuesThatDoNotFit) {
  EXPECT_EQ(checked_cast<int32_t>(int64_t(7), "x"), 7);
  EXPECT_THROW(checked_cast<int32_t>(int64_t(1) << 40, "x"), UserError);
  EXPECT_THROW(checked_cast<uint64_t>(int64_t(-1), "x"), UserError);
}

}  // namespace
}  // namespace megatron
