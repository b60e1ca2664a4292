#include "recipe/eval_tasks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "core/printable.hpp"
#include "recipe/codec.hpp"
#include "recipe/suggest.hpp"

namespace megatron::recipe {
namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kTasks = {"perplexity", "cloze", "multiple-choice", "classification",
                                         "generation"};
const std::vector<std::string> kWindows = {"rolling", "megatron", "both"};
const std::vector<std::string> kMetrics = {"exact_match", "f1", "bleu", "chrf"};

// Each key and the tasks that take it (empty: every task).
const std::vector<std::pair<std::string, std::vector<std::string>>> kKeys = {
    {"task", {}},
    {"data", {}},
    {"field", {"perplexity", "cloze"}},
    {"stride", {"perplexity"}},
    {"windows", {"perplexity"}},
    {"context_field", {"multiple-choice"}},
    {"choices_field", {"multiple-choice"}},
    {"gold_field", {"multiple-choice"}},
    {"num_fewshot", {"multiple-choice"}},
    {"fewshot_data", {"multiple-choice"}},
    {"prompt_field", {"generation"}},
    {"answer_field", {"generation"}},
    {"metrics", {"generation"}},
    {"max_tokens", {"generation"}},
};

// A nested value's own position in the file (an override keeps the override's).
Origin origin_at(const YAML::Node& node, const Origin& outer) {
  if (outer.is_override() || outer.file.empty() || node.Mark().line < 0) return outer;
  Origin o = outer;
  o.line = node.Mark().line + 1;
  o.column = node.Mark().column + 1;
  return o;
}

// A path as written, against the recipe's directory (the working directory for an override), so
// that a checkpoint's copy of the recipe still finds the file.
std::string resolve(const std::string& path, const Origin& origin) {
  const fs::path p(path);
  if (p.is_absolute()) return p.lexically_normal().string();
  const fs::path base =
      origin.is_override() || origin.file.empty() ? fs::current_path() : fs::absolute(origin.file).parent_path();
  return (base / p).lexically_normal().string();
}

EvalTask parse_task(const YAML::Node& item, const FieldSpec& spec, const Origin& outer, size_t index) {
  const Origin at = origin_at(item, outer);
  const std::string where = fmt::format("{}[{}]", spec.path, index);
  if (!item.IsMap()) {
    fail_at(at, fmt::format("{}: expected a task (a mapping with task: and data:), got {}", where,
                            codec::describe_node(item)));
  }
  FieldSpec scalar = spec;  // the scalar checks below name the entry's key
  const auto string_of = [&](const YAML::Node& v, const std::string& key) {
    scalar.path = where + "." + key;
    scalar.kind = ValueKind::String;
    return codec::parse_string(v, scalar, origin_at(v, outer));
  };
  const auto integer_of = [&](const YAML::Node& v, const std::string& key, int64_t min, int64_t max) {
    scalar.path = where + "." + key;
    scalar.kind = ValueKind::Integer;
    scalar.minimum = double(min);
    scalar.maximum = double(max);
    scalar.maximum_is_ceiling = false;
    scalar.minimum_exclusive = false;
    return codec::parse_integer(v, scalar, origin_at(v, outer));
  };
  const auto one_of = [&](const YAML::Node& v, const std::string& key, const std::vector<std::string>& names) {
    const std::string value = string_of(v, key);
    if (std::find(names.begin(), names.end(), value) == names.end()) {
      fail_at(origin_at(v, outer), fmt::format("{}.{}: '{}' is not one of {}{}", where, key, printable(value),
                                               fmt::join(names, ", "), did_you_mean(value, names)));
    }
    return value;
  };
  EvalTask t;
  if (!item["task"]) {
    fail_at(at, where + ": no task: (perplexity, cloze, multiple-choice, classification or generation)");
  }
  t.task = one_of(item["task"], "task", kTasks);
  if (!item["data"]) fail_at(at, where + ": no data: (the task's file)");
  for (const auto& kv : item) {
    const std::string key = kv.first.Scalar();
    const Origin key_at = origin_at(kv.first, outer);
    const auto known = std::find_if(kKeys.begin(), kKeys.end(), [&](const auto& k) { return k.first == key; });
    if (known == kKeys.end()) {
      std::vector<std::string> names;
      for (const auto& k : kKeys) names.push_back(k.first);
      fail_at(key_at, fmt::format("{}: unknown key '{}'{}", where, printable(key), did_you_mean(key, names)));
    }
    if (!known->second.empty() &&
        std::find(known->second.begin(), known->second.end(), t.task) == known->second.end()) {
      fail_at(key_at, fmt::format("{}.{}: only {} takes it, this entry is {}", where, key,
                                  fmt::join(known->second, " and "), t.task));
    }
    const YAML::Node& v = kv.second;
    if (key == "data") t.data = resolve(string_of(v, key), origin_at(v, outer));
    if (key == "fewshot_data") t.fewshot_data = resolve(string_of(v, key), origin_at(v, outer));
    if (key == "field") t.field = string_of(v, key);
    if (key == "context_field") t.context_field = string_of(v, key);
    if (key == "choices_field") t.choices_field = string_of(v, key);
    if (key == "gold_field") t.gold_field = string_of(v, key);
    if (key == "windows") t.windows = one_of(v, key, kWindows);
    if (key == "stride") t.stride = integer_of(v, key, 1, int64_t{1} << 30);
    if (key == "num_fewshot") t.num_fewshot = integer_of(v, key, 0, 1024);
    if (key == "prompt_field") t.prompt_field = string_of(v, key);
    if (key == "answer_field") t.answer_field = string_of(v, key);
    if (key == "metrics") {
      t.metrics = string_of(v, key);
      for (size_t begin = 0, end = 0; begin <= t.metrics->size(); begin = end + 1) {
        end = std::min(t.metrics->find(',', begin), t.metrics->size());
        const std::string name = t.metrics->substr(begin, end - begin);
        if (std::find(kMetrics.begin(), kMetrics.end(), name) == kMetrics.end()) {
          fail_at(origin_at(v, outer), fmt::format("{}.metrics: '{}' is not one of {} (a comma-separated "
                                                   "list, e.g. bleu,chrf){}",
                                                   where, printable(name), fmt::join(kMetrics, ", "),
                                                   did_you_mean(name, kMetrics)));
        }
      }
    }
    if (key == "max_tokens") t.max_tokens = integer_of(v, key, 1, 1 << 20);
  }
  return t;
}

std::vector<EvalTask> parse_tasks(const YAML::Node& node, const FieldSpec& spec, const Origin& origin) {
  if (!node.IsDefined() || node.IsNull()) return {};
  if (!node.IsSequence()) {
    fail_at(origin, spec.path + ": expected " + spec.type_description() + ", got " + codec::describe_node(node));
  }
  std::vector<EvalTask> out;
  for (size_t i = 0; i < node.size(); ++i) out.push_back(parse_task(node[i], spec, origin, i));
  return out;
}

// Inside a flow mapping a plain scalar may not hold a comma or a bracket: always double-quoted.
std::string flow_scalar(const std::string& text) {
  YAML::Emitter out;
  out << YAML::DoubleQuoted << text;
  return out.c_str();
}

std::string render_tasks(const std::vector<EvalTask>& tasks) {
  std::vector<std::string> items;
  for (const EvalTask& t : tasks) {
    std::vector<std::string> kv = {"task: " + t.task, "data: " + flow_scalar(t.data)};
    const auto add = [&](const char* key, const auto& value) {
      if (!value) return;
      if constexpr (std::is_same_v<std::decay_t<decltype(*value)>, std::string>) {
        kv.push_back(std::string(key) + ": " + flow_scalar(*value));
      } else {
        kv.push_back(fmt::format("{}: {}", key, *value));
      }
    };
    add("field", t.field);
    add("stride", t.stride);
    add("windows", t.windows);
    add("context_field", t.context_field);
    add("choices_field", t.choices_field);
    add("gold_field", t.gold_field);
    add("num_fewshot", t.num_fewshot);
    add("fewshot_data", t.fewshot_data);
    add("prompt_field", t.prompt_field);
    add("answer_field", t.answer_field);
    add("metrics", t.metrics);
    add("max_tokens", t.max_tokens);
    // One format string: `"{" + string` trips GCC 12's false -Wrestrict warning.
    items.push_back(fmt::format("{{{}}}", fmt::join(kv, ", ")));
  }
  return fmt::format("[{}]", fmt::join(items, ", "));
}

}  // namespace

std::vector<std::string> tasks_taking(std::string_view key) {
  const auto known = std::find_if(kKeys.begin(), kKeys.end(), [&](const auto& k) { return k.first == key; });
  return known == kKeys.end() ? std::vector<std::string>{} : known->second;
}

FieldSpec eval_tasks_field() {
  FieldSpec f;
  f.section = "eval";
  f.key = "tasks";
  f.path = "eval.tasks";
  f.kind = ValueKind::TaskList;
  f.doc = "Downstream tasks `megatron eval CHECKPOINT` runs when given no --task: each a mapping "
          "of task (perplexity, cloze, multiple-choice, classification or generation), data (its file, "
          "relative to the recipe) and optionally the flags of `megatron eval` as keys (field, "
          "stride, windows, context_field, choices_field, gold_field, num_fewshot, fewshot_data, "
          "prompt_field, answer_field, metrics, max_tokens); docs/eval.md.";
  f.parse_into = [](const FieldSpec& spec, Recipe& r, const YAML::Node& node, const Origin& origin) {
    r.eval.tasks = parse_tasks(node, spec, origin);
  };
  f.render = [](const Recipe& r) -> std::optional<std::string> { return render_tasks(r.eval.tasks); };
  return f;
}

}  // namespace megatron::recipe
