#include "launch/local_job.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "core/parallelism.hpp"
#include "dist/launcher.hpp"

namespace megatron::launch {

std::string self_path() {
  std::error_code ec;
  const auto path = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw RuntimeFailure("cannot find the megatron executable: " + ec.message());
  return path.string();
}

int job_world_size(int nproc) {
  const dist::LaunchInfo launch = dist::launch_info();
  if (nproc > 0 && launch.world_size > 1) {
    throw UserError(fmt::format("--nproc starts its own job, but this process is already rank {} "
                                "of {} under {}: drop --nproc",
                                launch.rank, launch.world_size, launch.launcher));
  }
  return nproc > 0 ? nproc : launch.world_size;
}

std::vector<std::string> own_arguments_without(const std::string& option) {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> all;
  for (std::string a; std::getline(in, a, '\0');) all.push_back(a);
  if (all.empty()) throw RuntimeFailure("cannot read this process's arguments (/proc/self/cmdline)");
  std::vector<std::string> out;
  for (size_t i = 1; i < all.size(); ++i) {
    if (all[i] == option) {
      ++i;  // its value
    } else if (!all[i].starts_with(option + "=")) {
      out.push_back(all[i]);
    }
  }
  return out;
}

int threads_per_rank(int threads, int nproc) {
  return threads > 0 ? threads : std::max(1, int(usable_cores()) / nproc);
}

void exec_local_job(int nproc, const std::vector<std::string>& arguments) {
  std::vector<std::string> argv = {"mpirun"};
  if (geteuid() == 0) argv.push_back("--allow-run-as-root");
  // More ranks than cores: Open MPI refuses unless told; ranks then yield when they wait.
  if (unsigned(nproc) > usable_cores()) argv.push_back("--oversubscribe");
  // Each rank runs its own OpenMP team: pinning a rank to one core would starve it.
  for (const char* a : {"--bind-to", "none", "-np"}) argv.emplace_back(a);
  argv.push_back(std::to_string(nproc));
  argv.push_back(self_path());
  argv.insert(argv.end(), arguments.begin(), arguments.end());
  std::vector<char*> raw;
  for (std::string& a : argv) raw.push_back(a.data());
  raw.push_back(nullptr);
  std::fflush(stdout);
  execvp(raw[0], raw.data());
  throw RuntimeFailure(fmt::format("cannot start mpirun ({}): install Open MPI (see "
                                   "docs/building.md) or start the ranks yourself",
                                   std::strerror(errno)));
}

void exec_local_job_if_asked(int nproc, int threads) {
  if (nproc <= 1) return;
  std::vector<std::string> args = own_arguments_without("--nproc");
  if (threads == 0) {
    args.push_back("--threads");
    args.push_back(std::to_string(threads_per_rank(0, nproc)));
  }
  exec_local_job(nproc, args);
}

}  // namespace megatron::launch
