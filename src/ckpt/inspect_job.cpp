#include "ckpt/inspect_job.hpp"

#include <fmt/format.h>

#include "ckpt/checkpoint_reader.hpp"
#include "ckpt/describe.hpp"
#include "ckpt/directory.hpp"
#include "core/error.hpp"

namespace megatron::ckpt {

void inspect_checkpoint(const std::string& path, bool recipe, std::ostream& out) {
  const CheckpointReader reader(existing_checkpoint(path));
  out << (recipe ? reader.meta().recipe : describe(reader));
}

void verify_checkpoint(const std::string& path, std::ostream& out) {
  const std::filesystem::path dir = existing_checkpoint(path);
  CheckpointReader reader(dir);
  if (const std::string problem = reader.verify(0, 1); !problem.empty()) throw UserError(problem);
  out << fmt::format("{}: {} rank files, every piece's checksum matches\n", dir.string(),
                     reader.meta().layout.world);
}

}  // namespace megatron::ckpt
