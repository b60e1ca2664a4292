// MEGATRON_FAULT's grammar. The faults themselves (SIGKILL, SIGSTOP) are exercised by the
// fault drill under mpiexec (fault_drill.cpp, run by ctest).
#include "dist/fault_injection.hpp"

#include <gtest/gtest.h>

#include "core/error.hpp"

namespace megatron::dist {
namespace {

TEST(FaultInjection, ParsesKillAndHang) {
  const auto kill = parse_fault("kill:rank=1:iteration=3");
  ASSERT_TRUE(kill.has_value());
  EXPECT_EQ(kill->kind, Fault::Kind::Kill);
  EXPECT_EQ(kill->rank, 1);
  EXPECT_EQ(kill->iteration, 3);
  const auto hang = parse_fault("hang:rank=12:iteration=40000000000");
  ASSERT_TRUE(hang.has_value());
  EXPECT_EQ(hang->kind, Fault::Kind::Hang);
  EXPECT_EQ(hang->rank, 12);
  EXPECT_EQ(hang->iteration, 40'000'000'000);
}

TEST(FaultInjection, ParsesKillDuringSave) {
  const auto fault = parse_fault("kill_during_save:rank=0:iteration=4");
  ASSERT_TRUE(fault.has_value());
  EXPECT_EQ(fault->kind, Fault::Kind::KillDuringSave);
  EXPECT_EQ(fault->rank, 0);
  EXPECT_EQ(fault->iteration, 4);
}

TEST(FaultInjection, EmptyMeansNoFault) { EXPECT_FALSE(parse_fault("").has_value()); }

TEST(FaultInjection, MalformedValuesNameTheExpectedForm) {
  for (const char* bad :
       {"kill", "crash:rank=1:iteration=3", "kill:rank=1", "kill:rank=x:iteration=3",
        "kill:rank=1:iteration=3:", "kill:rank=1:iteration=3x", "kill:iteration=3:rank=1",
        "hang:rank=-1:iteration=3", "kill:rank=:iteration=3"}) {
    try {
      parse_fault(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("MEGATRON_FAULT=") + bad +
                                           ": expected kill:rank="),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(FaultInjection, DoesNothingWhenRankOrIterationDiffer) {
  // Would SIGKILL this process if either matched.
  setenv("MEGATRON_FAULT", "kill:rank=99:iteration=5", 1);
  inject_fault(0, 5);
  inject_fault(99, 4);
  unsetenv("MEGATRON_FAULT");
  inject_fault(99, 5);
}

TEST(FaultInjection, InjectRefusesAMalformedEnvironment) {
  setenv("MEGATRON_FAULT", "kill:rank=1", 1);
  EXPECT_THROW(inject_fault(0, 1), UserError);
  unsetenv("MEGATRON_FAULT");
}

}  // namespace
}  // namespace megatron::dist
