#include "core/output_dir.hpp"

#include <stdlib.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "core/error.hpp"

namespace megatron {
namespace fs = std::filesystem;

std::vector<fs::path> prepare_output_dir(const std::string& flag, const std::string& dir) {
  std::error_code ec;
  std::vector<fs::path> created;
  for (fs::path p = fs::absolute(dir, ec); !p.empty() && !fs::exists(p, ec) && p != p.parent_path();
       p = p.parent_path()) {
    created.push_back(p);
  }
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) {
    throw UserError(fmt::format("{} {}: cannot create this directory ({}); choose a writable "
                                "location",
                                flag, dir, ec ? ec.message() : "a file is in the way"));
  }
  std::string probe = (fs::path(dir) / ".megatron-probe-XXXXXX").string();
  if (::mkdtemp(probe.data()) == nullptr) {
    const std::string why = std::strerror(errno);
    for (const fs::path& p : created) fs::remove(p, ec);
    throw UserError(fmt::format("{} {}: cannot write into this directory ({}); choose a writable "
                                "directory",
                                flag, dir, why));
  }
  fs::remove(probe, ec);
  return created;
}

void remove_created(const std::vector<fs::path>& created) {
  std::error_code ec;
  for (const fs::path& p : created) fs::remove(p, ec);  // never removes a non-empty directory
}

}  // namespace megatron
