#include <fmt/format.h>
#include <yaml-cpp/depthguard.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "core/error.hpp"
#include "core/printable.hpp"
#include "recipe/documents.hpp"
#include "recipe/entries.hpp"
#include "recipe/schema.hpp"
#include "recipe/suggest.hpp"

namespace megatron::recipe {
namespace {

namespace fs = std::filesystem;

// yaml-cpp stops deep nesting (its stack would overflow) with the message "bad file".
constexpr const char* kTooDeep =
    "nested too deeply (a recipe nests section, key and list: 3 levels)";

// Keys of which a recipe gives one: a later layer or an override that sets one replaces the
// others an earlier layer set (`training.train_iters=10` on a recipe that counts samples).
const std::vector<std::vector<std::string>> kOneOf = {
    {"training.train_iters", "training.train_samples", "training.train_tokens"},
    {"training.lr_warmup_iters", "training.lr_warmup_fraction"},
};

// Drops the keys of `path`'s group other than `path` unless `keep` holds for where they came
// from (a file's own keys, or an override's): the later setting replaces them.
void replace_one_of(Entries& entries, const std::string& path, const YAML::Node& value,
                    const std::function<bool(const Origin&)>& keep) {
  if (value.IsNull()) return;
  for (const auto& group : kOneOf) {
    if (std::find(group.begin(), group.end(), path) == group.end()) continue;
    for (const std::string& other : group) {
      const auto it = entries.values.find(other);
      if (other != path && it != entries.values.end() && !keep(it->second.origin)) entries.values.erase(it);
    }
  }
}

Origin origin_of(const YAML::Node& node, const std::string& file) {
  const YAML::Mark mark = node.Mark();
  Origin o;
  o.file = file;
  if (mark.line >= 0) {
    o.line = mark.line + 1;
    o.column = mark.column + 1;
  }
  return o;
}

std::string unknown_key_message(const std::string& section, const std::string& key) {
  std::string message = "unknown key '" + printable(key) + "' in section " + section + ":";
  if (auto guess = closest(key, field_keys_of(section)))
    return message + " (did you mean " + *guess + "?)";
  // The right key in the wrong section is a common slip ("hidden_size" under training:).
  for (const auto& f : fields())
    if (f.key == key) return message + " (it belongs in section " + f.section + ":, as " + f.path + ")";
  return message + "; `megatron recipe schema --markdown` lists the keys of every section";
}

class Loader {
 public:
  Entries load(const fs::path& file, const std::string& display) {
    fs::path canonical = fs::weakly_canonical(fs::absolute(file));
    for (std::size_t i = 0; i < stack_.size(); ++i) {
      if (stack_[i].first == canonical) {
        std::string chain;
        for (std::size_t j = i; j < stack_.size(); ++j) chain += stack_[j].second + " -> ";
        throw UserError(base_origin_.describe() + ": base recipes form a cycle: " + chain + display +
                        "; remove one of these base: entries");
      }
    }
    if (!fs::exists(file)) {
      std::string where = stack_.empty() ? "" : base_origin_.describe() + ": ";
      throw UserError(where + "recipe file '" + printable(display, 200) + "' does not exist");
    }
    if (fs::is_directory(file))
      throw UserError("'" + display + "' is a directory; give the path of a recipe .yaml file");

    YAML::Node root;
    try {
      std::ifstream in(file);
      if (!in) throw UserError("cannot read recipe file '" + display + "'");
      if (const auto second = ignored_document(in))
        throw UserError(fmt::format(
            "{}:{}:{}: a recipe is one YAML document, but a second one starts here and would be "
            "ignored; remove this `---` and merge what follows into the first document (or put "
            "it in its own file and name that in base:)",
            display, second->line + 1, second->column + 1));
      root = YAML::LoadFile(file.string());
    } catch (const YAML::DeepRecursion& e) {
      throw UserError(fmt::format("{}:{}:{}: invalid YAML: {}", display, e.mark.line + 1,
                                  e.mark.column + 1, kTooDeep));
    } catch (const YAML::ParserException& e) {
      throw UserError(fmt::format("{}:{}:{}: invalid YAML: {}", display, e.mark.line + 1,
                                  e.mark.column + 1, e.msg));
    } catch (const YAML::BadFile&) {
      throw UserError("cannot read recipe file '" + display + "'");
    }

    Entries result;
    if (!root.IsDefined() || root.IsNull()) return result;  // an empty recipe sets nothing
    if (!root.IsMap())
      throw UserError(fmt::format(
          "{}: a recipe is a mapping of sections (model:, parallel:, training:, ...), got {}",
          origin_of(root, display).describe(), root.IsSequence() ? "a list" : "a scalar"));

    stack_.emplace_back(canonical, display);
    std::set<std::string> seen;
    // base: first, so this file's own keys replace what its bases set.
    for (const auto& kv : root) {
      const std::string key = kv.first.Scalar();
      if (key != "base") continue;
      for (const auto& base : base_list(kv.second, display)) {
        base_origin_ = origin_of(base, display);
        const fs::path base_path = file.parent_path() / base.Scalar();
        const std::string base_display =
            (fs::path(display).parent_path() / base.Scalar()).lexically_normal().string();
        merge(result, load(base_path, base_display));
      }
    }
    for (const auto& kv : root) {
      const std::string key = kv.first.Scalar();
      const Origin key_origin = origin_of(kv.first, display);
      if (!seen.insert(key).second)
        throw UserError(key_origin.describe() + ": duplicate key '" + printable(key) + "'");
      if (key == "base") continue;
      const auto names = section_names();
      if (std::find(names.begin(), names.end(), key) == names.end()) {
        std::string hint = did_you_mean(key, names);
        if (hint.empty() && find_section_of(key))
          hint = " (it belongs in section " + *find_section_of(key) + ":)";
        throw UserError(key_origin.describe() + ": unknown section '" + printable(key) + "'" +
                        hint +
                        "; sections are model, parallel, precision, training, data, checkpoint, "
                        "logging, eval, finetune, cluster");
      }
      result.sections[key] = key_origin;
      read_section(result, key, kv.second, display);
    }
    stack_.pop_back();
    return result;
  }

 private:
  static std::optional<std::string> find_section_of(const std::string& key) {
    for (const auto& f : fields())
      if (f.key == key) return f.section;
    return std::nullopt;
  }

  static std::vector<YAML::Node> base_list(const YAML::Node& node, const std::string& display) {
    std::vector<YAML::Node> out;
    if (node.IsScalar()) {
      out.push_back(node);
    } else if (node.IsSequence()) {
      for (const auto& item : node) {
        if (!item.IsScalar())
          throw UserError(origin_of(item, display).describe() +
                          ": base: takes a file name or a list of file names");
        out.push_back(item);
      }
    } else {
      throw UserError(origin_of(node, display).describe() +
                      ": base: takes a file name or a list of file names");
    }
    return out;
  }

  static void read_section(Entries& result, const std::string& section, const YAML::Node& body,
                           const std::string& display) {
    if (body.IsNull()) return;
    if (!body.IsMap())
      throw UserError(origin_of(body, display).describe() + ": section " + section +
                      ": expects a mapping of keys, got " +
                      (body.IsSequence() ? std::string("a list")
                                         : fmt::format("'{}'", printable(body.Scalar()))));
    std::set<std::string> seen;
    for (const auto& kv : body) {
      const std::string key = kv.first.Scalar();
      const Origin key_origin = origin_of(kv.first, display);
      if (!seen.insert(key).second)
        throw UserError(key_origin.describe() + ": duplicate key '" + printable(key) +
                        "' in section " + section + ":");
      const std::string path = section + "." + key;
      if (!find_field(path)) throw UserError(key_origin.describe() + ": " + unknown_key_message(section, key));
      // Point at the value when there is one, at the key for `key:` with nothing after it.
      const Origin value_origin = kv.second.IsNull() ? key_origin : origin_of(kv.second, display);
      // This file's training length (or warmup) replaces its bases' (two in one file still
      // conflict).
      replace_one_of(result, path, kv.second, [&](const Origin& o) { return o.file == display; });
      result.values[path] = Entry{kv.second, value_origin};
    }
  }

  static void merge(Entries& into, const Entries& layer) {
    for (const auto& [path, entry] : layer.values) into.values[path] = entry;
    for (const auto& [name, origin] : layer.sections)
      if (!into.sections.contains(name)) into.sections[name] = origin;
  }

  std::vector<std::pair<fs::path, std::string>> stack_;
  Origin base_origin_;
};

}  // namespace

Entries load_recipe_file(const fs::path& file) {
  Loader loader;
  return loader.load(file, file.string());
}

void apply_overrides(Entries& entries, const std::vector<std::string>& overrides) {
  for (const auto& text : overrides) {
    Origin origin;
    origin.override_ = text;
    const auto eq = text.find('=');
    if (eq == std::string::npos || eq == 0)
      throw UserError("override '" + printable(text) +
                      "' is not of the form section.key=value (e.g. training.lr=3e-4)");
    const std::string path = text.substr(0, eq);
    const std::string value = text.substr(eq + 1);
    if (!find_field(path)) {
      const auto dot = path.find('.');
      std::string problem;
      if (dot == std::string::npos) {
        problem = "'" + printable(path) + "' is not a section.key path (e.g. training.lr=3e-4)" +
                  did_you_mean(path, field_paths());
      } else {
        const std::string section = path.substr(0, dot);
        const auto names = section_names();
        if (std::find(names.begin(), names.end(), section) == names.end())
          problem = "unknown section '" + printable(section) + "'" + did_you_mean(section, names);
        else
          problem = unknown_key_message(section, path.substr(dot + 1));
      }
      throw UserError(origin.describe() + ": " + problem);
    }
    YAML::Node node;
    try {
      std::istringstream in(value);
      if (ignored_document(in))
        throw UserError(origin.describe() +
                        ": the value holds more than one YAML document; give one value");
      node = YAML::Load(value);
    } catch (const YAML::DeepRecursion&) {
      throw UserError(origin.describe() + ": the value is not valid YAML: " + kTooDeep);
    } catch (const YAML::ParserException& e) {
      throw UserError(origin.describe() + ": the value is not valid YAML: " + e.msg);
    }
    // An override of the training length (or warmup) replaces the files' (two overrides still
    // conflict).
    replace_one_of(entries, path, node, [](const Origin& o) { return o.is_override(); });
    entries.values[path] = Entry{node, origin};
  }
}

}  // namespace megatron::recipe
