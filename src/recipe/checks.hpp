// Cross-field checks and derived values: everything that needs more than one field.
// Each failure names the field to change, shows the arithmetic, and says what would fix it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/error.hpp"
#include "recipe/derived.hpp"
#include "recipe/origin.hpp"
#include "recipe/recipe.hpp"
#include "recipe/schema.hpp"

namespace megatron::recipe {

// Where to point an error about `path`: where it was set, else the recipe file itself.
class Locator {
 public:
  Locator(const Provenance& provenance, std::string file)
      : provenance_(provenance), file_(std::move(file)) {}
  Origin at(const std::string& path) const;
  // "parallel.tensor (8)" or "parallel.tensor (1, the default)"
  std::string name(const std::string& path, const std::string& value) const;
  // Whether a file or override set `path` (rather than its default).
  bool set(const std::string& path) const { return provenance_.contains(path); }

 private:
  const Provenance& provenance_;
  std::string file_;
};

// Overflow-checked arithmetic (core/checked.hpp) for values derived from the recipe: an
// overflow is an error at `path`'s origin that names the quantity (`what`) and the key.
int64_t mul_at(const Locator& where, const std::string& path, int64_t a, int64_t b,
               std::string_view what);
int64_t add_at(const Locator& where, const std::string& path, int64_t a, int64_t b,
               std::string_view what);
// Runs `compute`; a UserError it throws (an overflow inside it) is re-thrown at `path`.
template <class F>
auto at_key(const Locator& where, const std::string& path, F&& compute) -> decltype(compute());

// Field combinations that are invalid whatever the world (exclusive options, list lengths).
void check_fields(const Recipe& recipe, const Locator& where);
// The cluster keys `megatron submit` writes into a batch script (check_slurm.cpp).
void check_slurm_fields(const Recipe& recipe, const Locator& where);
// A Slurm time (MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS) in seconds; nullopt if not one.
std::optional<int64_t> slurm_time_seconds(const std::string& text);

// Derives the values the recipe implies whatever the world (widths, padded vocabulary, training
// lengths), checking divisibility on the way; the world's are plan::place's.
Derived derive(const Recipe& recipe, const Locator& where);

template <class F>
auto at_key(const Locator& where, const std::string& path, F&& compute) -> decltype(compute()) {
  try {
    return compute();
  } catch (const UserError& e) {
    fail_at(where.at(path), std::string(e.what()) + "; make " + path + " smaller");
  }
}

}  // namespace megatron::recipe
