#include "ckpt/directory.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <vector>

#include "ckpt/checkpoint_writer.hpp"
#include "ckpt/format.hpp"
#include "core/error.hpp"

namespace megatron::ckpt {
namespace fs = std::filesystem;
namespace {

// The iteration of a directory named iter_NNNNNNN, or -1.
int64_t iteration_of(const std::string& name) {
  // More than 18 digits would overflow int64 (stoll throws): no iteration of ours.
  if (name.rfind("iter_", 0) != 0 || name.size() <= 5 || name.size() > 5 + 18) return -1;
  const std::string digits = name.substr(5);
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) return -1;
  return std::stoll(digits);
}

std::string read_latest(const fs::path& save) {
  std::ifstream in(save / "latest");
  std::string name;
  std::getline(in, name);
  return name;
}

}  // namespace

std::string iteration_dir_name(int64_t iteration) { return fmt::format("iter_{:07d}", iteration); }

fs::path staging_dir(const fs::path& save, int64_t iteration) {
  std::string name = ".";
  name += iteration_dir_name(iteration);
  name += ".partial";
  return save / name;
}

fs::path publish(const fs::path& save, int64_t iteration) {
  const fs::path final_dir = save / iteration_dir_name(iteration);
  std::error_code ec;
  if (read_latest(save) == iteration_dir_name(iteration)) {
    // Re-saving the iteration latest names: point latest away only after the new copy is
    // complete, so never at a missing directory. Not reached by the trainer (it does not save
    // an iteration it loaded), kept for safety.
    throw RuntimeFailure(save.string() + ": " + iteration_dir_name(iteration) +
                         " is the latest checkpoint already");
  }
  fs::remove_all(final_dir, ec);
  fs::rename(staging_dir(save, iteration), final_dir, ec);
  if (ec) throw RuntimeFailure("cannot rename the checkpoint to " + final_dir.string() + ": " + ec.message());
  sync_path(save);
  const fs::path tmp = save / ".latest.tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << iteration_dir_name(iteration) << "\n";
    if (!out.flush()) throw RuntimeFailure("cannot write " + tmp.string());
  }
  sync_path(tmp);
  fs::rename(tmp, save / "latest", ec);
  if (ec) throw RuntimeFailure("cannot replace " + (save / "latest").string() + ": " + ec.message());
  sync_path(save);
  return final_dir;
}

std::optional<int64_t> latest_iteration(const fs::path& save) {
  std::error_code ec;
  if (!fs::is_regular_file(save / "latest", ec)) return std::nullopt;
  const int64_t iteration = iteration_of(read_latest(save));
  if (iteration < 0) return std::nullopt;
  return iteration;
}

void prune(const fs::path& save, int64_t keep) {
  const std::string latest = read_latest(save);
  std::vector<std::pair<int64_t, fs::path>> complete;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(save, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 8 && name.front() == '.' && name.ends_with(".partial")) {
      fs::remove_all(entry.path(), ec);  // an interrupted save
    } else if (const int64_t it = iteration_of(name); it >= 0 && entry.is_directory()) {
      complete.emplace_back(it, entry.path());
    }
  }
  if (keep <= 0) return;
  std::sort(complete.begin(), complete.end());
  for (size_t i = 0; i + size_t(keep) < complete.size(); ++i) {
    if (complete[i].second.filename() == latest) continue;
    fs::remove_all(complete[i].second, ec);
  }
}

std::optional<fs::path> resolve_checkpoint(const fs::path& path) {
  std::error_code ec;
  if (fs::is_regular_file(path / kIndexFile, ec)) return path;
  if (!fs::exists(path / "latest", ec)) return std::nullopt;
  const std::string name = read_latest(path);
  if (name.empty() || name.find('/') != std::string::npos) {
    throw UserError((path / "latest").string() + ": does not name a checkpoint (expected a line "
                                                 "like iter_0001000)");
  }
  if (!fs::is_regular_file(path / name / kIndexFile, ec)) {
    throw UserError((path / "latest").string() + " names " + name + ", but " +
                    (path / name / kIndexFile).string() +
                    " is missing; point checkpoint.load at an existing iter_ directory");
  }
  return path / name;
}

fs::path existing_checkpoint(const std::string& path) {
  const std::optional<fs::path> dir = resolve_checkpoint(path);
  if (!dir) {
    throw UserError(path + ": not a checkpoint (no " + kIndexFile + ", no latest); pass an "
                           "iter_NNNNNNN directory or a save directory");
  }
  return *dir;
}

}  // namespace megatron::ckpt
