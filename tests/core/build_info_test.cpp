// Build information is filled in by CMake, not left as template text.
#include <gtest/gtest.h>

#include "core/build_info.hpp"

namespace megatron {
namespace {

TEST(BuildInfo, VersionIsSemanticVersionFromCMake) {
  EXPECT_EQ(build_info::version(), "0.1.0");
}

TEST(BuildInfo, NoFieldIsLeftAsAConfigurePlaceholder) {
  for (auto field : {build_info::version(), build_info::git_commit(), build_info::build_type(),
                     build_info::blas(), build_info::mpi()}) {
    EXPECT_EQ(field.find('@'), std::string_view::npos) << field;
    EXPECT_FALSE(field.empty());
  }
}

TEST(BuildInfo, CudaVersionIsKnownExactlyWhenCudaIsBuilt) {
  EXPECT_EQ(build_info::cuda_enabled(), !build_info::cuda_version().empty());
}

}  // namespace
}  // namespace megatron
