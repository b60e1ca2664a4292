// Checked arithmetic that points at the recipe key its operands came from.

#include "core/checked.hpp"
#include "recipe/checks.hpp"

namespace megatron::recipe {

int64_t mul_at(const Locator& where, const std::string& path, int64_t a, int64_t b,
               std::string_view what) {
  return at_key(where, path, [&] { return checked_mul(a, b, what); });
}

int64_t add_at(const Locator& where, const std::string& path, int64_t a, int64_t b,
               std::string_view what) {
  return at_key(where, path, [&] { return checked_add(a, b, what); });
}

}  // namespace megatron::recipe
