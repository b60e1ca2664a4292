// Starting a local job of N ranks: the process replaces itself with `mpirun -np N megatron ...`,
// as `megatron run --nproc` and `megatron eval --nproc` do.
#pragma once

#include <string>
#include <vector>

namespace megatron::launch {

// The running megatron executable's path.
std::string self_path();

// The job's world size: `nproc` when --nproc starts a local job (refused inside an mpirun or
// srun job, which already has its ranks), else the launcher's.
int job_world_size(int nproc);

// This process's own arguments (after the executable), less `option` and its value (as
// "--option V" or "--option=V").
std::vector<std::string> own_arguments_without(const std::string& option);

// CPU threads per rank when N ranks share this machine's cores (`threads` when given).
int threads_per_rank(int threads, int nproc);

// Replaces this process with mpirun running `megatron <arguments>` on `nproc` ranks. Throws
// RuntimeFailure when mpirun cannot start.
[[noreturn]] void exec_local_job(int nproc, const std::vector<std::string>& arguments);

// With --nproc N above 1: replaces this process with an mpirun job of N ranks running this same
// command (less --nproc; with the cores shared out as --threads unless `threads` was given).
// Otherwise returns.
void exec_local_job_if_asked(int nproc, int threads);

}  // namespace megatron::launch
