#include "ckpt/hf_json.hpp"

#include <fmt/format.h>

#include <fstream>

#include "core/error.hpp"
#include "core/printable.hpp"

namespace megatron::ckpt {

namespace fs = std::filesystem;

// These files are a few kilobytes; a file far larger is not one of them.
constexpr std::uintmax_t kMaxJsonBytes = std::uintmax_t(64) << 20;

nlohmann::json read_hf_json(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw UserError("cannot read " + path.string() + ": no such file");
  if (const std::uintmax_t size = fs::file_size(path, ec); !ec && size > kMaxJsonBytes) {
    throw UserError(fmt::format("{}: {} bytes is too large for a Hugging Face JSON file (at most {})",
                                path.string(), size, kMaxJsonBytes));
  }
  std::ifstream in(path);
  if (!in) throw UserError("cannot read " + path.string());
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw UserError(fmt::format("{}: not valid JSON: {}", path.string(), printable(e.what(), 200)));
  }
}

}  // namespace megatron::ckpt
