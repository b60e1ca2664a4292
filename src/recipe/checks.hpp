// Cross-field checks and derived values: everything that needs more than one field.
// Each failure names the field to change, shows the arithmetic, and says what would fix it.
#pragma once

#include <optional>
#include <string>

#include "recipe/derived.hpp"
#include "recipe/origin.hpp"
#include "recipe/recipe.hpp"

namespace megatron::recipe {

// Where to point an error about `path`: where it was set, else the recipe file itself.
class Locator {
 public:
  Locator(const Provenance& provenance, std::string file)
      : provenance_(provenance), file_(std::move(file)) {}
  Origin at(const std::string& path) const;
  // "parallel.tensor (8)" or "parallel.tensor (1, the default)"
  std::string name(const std::string& path, const std::string& value) const;

 private:
  const Provenance& provenance_;
  std::string file_;
};

// Field combinations that are invalid whatever the world (exclusive options, list lengths).
void check_fields(const Recipe& recipe, const Locator& where);

// Derives world-dependent and implied values, checking divisibility on the way.
Derived derive(const Recipe& recipe, const Locator& where, std::optional<int64_t> world_size);

}  // namespace megatron::recipe
