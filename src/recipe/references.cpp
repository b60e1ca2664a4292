#include <fmt/format.h>

#include <set>

#include "core/error.hpp"
#include "core/printable.hpp"
#include "recipe/entries.hpp"
#include "recipe/schema.hpp"
#include "recipe/suggest.hpp"

namespace megatron::recipe {
namespace {

constexpr std::size_t kMaxResolvedBytes = 65536;

class Resolver {
 public:
  explicit Resolver(Entries& entries) : entries_(entries) {}

  void resolve(const std::string& path) {
    if (done_.contains(path)) return;
    auto it = entries_.values.find(path);
    if (it == entries_.values.end()) return;
    if (active_.contains(path)) {
      std::string chain;
      for (const auto& p : order_) chain += p + " -> ";
      throw UserError(it->second.origin.describe() + ": ${...} references form a cycle: " + chain +
                      path);
    }
    Entry& entry = it->second;
    if (entry.value.IsScalar() && entry.value.Scalar().find("${") != std::string::npos) {
      active_.insert(path);
      order_.push_back(path);
      entry.value = substitute(entry);
      order_.pop_back();
      active_.erase(path);
    }
    done_.insert(path);
  }

 private:
  YAML::Node substitute(const Entry& entry) {
    const std::string text = entry.value.Scalar();
    std::string out;
    std::size_t pos = 0;
    while (pos < text.size()) {
      const auto start = text.find("${", pos);
      if (start == std::string::npos) {
        out += text.substr(pos);
        break;
      }
      const auto end = text.find('}', start);
      if (end == std::string::npos)
        throw UserError(entry.origin.describe() + ": unterminated reference in '" +
                        printable(text) + "'; write ${section.key}");
      out += text.substr(pos, start - pos);
      const std::string ref = text.substr(start + 2, end - start - 2);
      const YAML::Node value = lookup(ref, entry.origin);
      // A value that is nothing but one reference keeps the referenced value's type.
      if (start == 0 && end + 1 == text.size()) return value;
      if (!value.IsScalar())
        throw UserError(entry.origin.describe() + ": ${" + printable(ref) +
                        "} is a list and cannot be spliced into text");
      out += value.Scalar();
      // References that splice a value into itself level after level grow it exponentially.
      if (out.size() > kMaxResolvedBytes)
        throw UserError(fmt::format(
            "{}: ${{...}} references make this value longer than {} bytes; splice fewer "
            "references into it",
            entry.origin.describe(), kMaxResolvedBytes));
      pos = end + 1;
    }
    return YAML::Node(out);
  }

  YAML::Node lookup(const std::string& ref, const Origin& where) {
    const FieldSpec* field = find_field(ref);
    if (!field)
      throw UserError(where.describe() + ": ${" + printable(ref) + "} names no recipe key" +
                      did_you_mean(ref, field_paths()));
    resolve(ref);
    auto it = entries_.values.find(ref);
    if (it != entries_.values.end() && !it->second.value.IsNull()) return it->second.value;
    auto fallback = field->render(Recipe{});
    if (!fallback || field->required)
      throw UserError(where.describe() + ": ${" + ref + "} refers to " + ref +
                      ", which is not set");
    return YAML::Load(*fallback);
  }

  Entries& entries_;
  std::set<std::string> active_, done_;
  std::vector<std::string> order_;
};

}  // namespace

void resolve_references(Entries& entries) {
  Resolver resolver(entries);
  std::vector<std::string> paths;
  for (const auto& [path, entry] : entries.values) paths.push_back(path);
  for (const auto& path : paths) resolver.resolve(path);
}

}  // namespace megatron::recipe
