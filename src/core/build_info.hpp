// What this binary is: version, git commit and the build options it was compiled with.
// Values come from CMake at configure time (src/core/build_info.cpp.in).
#pragma once

#include <string_view>

namespace megatron::build_info {

std::string_view version();
std::string_view git_commit();
std::string_view build_type();
std::string_view compiler();
bool cuda_enabled();
std::string_view cuda_version();  // empty when CUDA is off
std::string_view blas();
std::string_view mpi();

}  // namespace megatron::build_info
