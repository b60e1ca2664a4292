#include <iostream>

#include "cli/commands.hpp"
#include "core/build_info.hpp"

namespace megatron::cli {

void print_version() {
  namespace b = build_info;
  std::cout << "megatron " << b::version() << " (commit " << b::git_commit() << ")\n"
            << "build: " << b::build_type() << ", " << b::compiler() << "\n"
            << "cuda: "
            << (b::cuda_enabled() ? "on (nvcc " + std::string(b::cuda_version()) + ")"
                                  : std::string("off"))
            << "\n"
            << "blas: " << b::blas() << "\n"
            << "mpi: " << b::mpi() << "\n";
}

}  // namespace megatron::cli
