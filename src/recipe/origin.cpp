#include "recipe/origin.hpp"

#include "core/printable.hpp"

namespace megatron::recipe {

std::string Origin::describe() const {
  // Overrides come from the command line, where any bytes can be typed or pasted.
  if (is_override()) return "override '" + printable(override_) + "'";
  if (file.empty()) return "default";
  if (line == 0) return file;
  return file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

}  // namespace megatron::recipe
