// The timing cases' names: megatron-op-bench's --only picks them from the same namespace as the
// op cases, as a comma-separated list.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "ops/op_case.hpp"

namespace megatron::ops_test {
namespace {

TEST(TimingCases, NamesAreDistinctFromEachOtherAndFromTheOpCases) {
  std::set<std::string> names;
  for (const OpCase& c : all_op_cases()) names.insert(c.name);
  for (const TimingCase& c : timing_op_cases()) {
    EXPECT_TRUE(names.insert(c.name).second) << c.name << " names two cases";
  }
}

TEST(TimingCases, NamesAreLettersDigitsAndUnderscores) {
  for (const TimingCase& c : timing_op_cases()) {
    EXPECT_EQ(c.name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_"), std::string::npos)
        << c.name;
  }
}

}  // namespace
}  // namespace megatron::ops_test
