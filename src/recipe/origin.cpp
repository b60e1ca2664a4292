#include "recipe/origin.hpp"

namespace megatron::recipe {

std::string Origin::describe() const {
  if (is_override()) return "override '" + override_ + "'";
  if (file.empty()) return "default";
  if (line == 0) return file;
  return file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

}  // namespace megatron::recipe
