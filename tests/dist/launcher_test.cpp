// Which launcher started this process, read from its environment: each test sets the variables
// one launcher sets (and clears the others), restoring what mpiexec set when it ends.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "dist/launcher.hpp"

namespace megatron::dist {
namespace {

const char* const kVariables[] = {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                  "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_PROCID", "SLURM_NTASKS",
                                  "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID", "PMI_RANK", "PMI_SIZE",
                                  "MPI_LOCALRANKID"};

// Clears every launcher variable for the test's lifetime, then puts back what was there.
class LaunchInfoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : kVariables) {
      if (const char* value = std::getenv(name)) saved_[name] = value;
      unsetenv(name);
    }
  }
  void TearDown() override {
    for (const char* name : kVariables) unsetenv(name);
    for (const auto& [name, value] : saved_) setenv(name.c_str(), value.c_str(), 1);
  }
  static void set(const char* name, const char* value) { setenv(name, value, 1); }

 private:
  std::map<std::string, std::string> saved_;
};

TEST_F(LaunchInfoTest, NoLauncherIsOneRank) {
  const LaunchInfo info = launch_info();
  EXPECT_EQ(info.world_size, 1);
  EXPECT_EQ(info.rank, 0);
  EXPECT_EQ(info.launcher, "none");
}

TEST_F(LaunchInfoTest, OpenMpisMpirunGivesRankAndWorld) {
  set("OMPI_COMM_WORLD_RANK", "3");
  set("OMPI_COMM_WORLD_SIZE", "8");
  set("OMPI_COMM_WORLD_LOCAL_RANK", "1");
  const LaunchInfo info = launch_info();
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.world_size, 8);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.launcher, "mpirun");
}

TEST_F(LaunchInfoTest, AnSrunStepGivesItsOwnTaskCount) {
  set("SLURM_PROCID", "5");
  set("SLURM_NTASKS", "64");  // the allocation's
  set("SLURM_STEP_NUM_TASKS", "16");
  set("SLURM_LOCALID", "2");
  const LaunchInfo info = launch_info();
  EXPECT_EQ(info.rank, 5);
  EXPECT_EQ(info.world_size, 16);
  EXPECT_EQ(info.local_rank, 2);
  EXPECT_EQ(info.launcher, "srun");
}

TEST_F(LaunchInfoTest, ABatchScriptsOwnShellIsOneProcessNotTheAllocation) {
  set("SLURM_PROCID", "0");
  set("SLURM_NTASKS", "64");
  EXPECT_EQ(launch_info().world_size, 1);
}

TEST_F(LaunchInfoTest, MpichsHydraIsReadFromThePmiVariables) {
  set("PMI_RANK", "2");
  set("PMI_SIZE", "4");
  const LaunchInfo info = launch_info();
  EXPECT_EQ(info.rank, 2);
  EXPECT_EQ(info.world_size, 4);
  EXPECT_EQ(info.launcher, "mpirun");
}

}  // namespace
}  // namespace megatron::dist
