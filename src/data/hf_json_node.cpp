#include "data/hf_json_node.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/printable.hpp"
#include "data/unicode.hpp"

namespace megatron::data {

namespace {

std::string kind_of(const nlohmann::json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

}  // namespace

std::string HfJsonNode::where() const {
  return path_.empty() ? *file_ : *file_ + ": " + path_;
}

void HfJsonNode::fail(const std::string& message) const { throw UserError(where() + ": " + message); }

void HfJsonNode::check_nesting() const {
  constexpr int kMaxDepth = 64;
  if (depth_ > kMaxDepth) fail("nests components more than " + std::to_string(kMaxDepth) + " deep");
}

HfJsonNode HfJsonNode::at(std::string_view key) const {
  auto found = find(key);
  if (!found) {
    HfJsonNode(*value_, path_.empty() ? std::string(key) : path_ + "." + std::string(key), *file_)
        .fail("is missing");
  }
  return *found;
}

std::optional<HfJsonNode> HfJsonNode::find(std::string_view key) const {
  object();
  const auto it = value_->find(key);
  if (it == value_->end() || it->is_null()) return std::nullopt;
  return HfJsonNode(*it, path_.empty() ? std::string(key) : path_ + "." + std::string(key), *file_, depth_ + 1);
}

HfJsonNode HfJsonNode::at(std::size_t index) const {
  return HfJsonNode((*value_)[index], path_ + "[" + std::to_string(index) + "]", *file_, depth_ + 1);
}

const nlohmann::json& HfJsonNode::object() const {
  if (!value_->is_object()) fail("must be an object, not " + kind_of(*value_));
  return *value_;
}

const nlohmann::json& HfJsonNode::array() const {
  if (!value_->is_array()) fail("must be an array, not " + kind_of(*value_));
  return *value_;
}

std::string HfJsonNode::string() const {
  if (!value_->is_string()) fail("must be a string, not " + kind_of(*value_));
  return value_->get<std::string>();
}

bool HfJsonNode::boolean() const {
  if (!value_->is_boolean()) fail("must be true or false, not " + kind_of(*value_));
  return value_->get<bool>();
}

int64_t HfJsonNode::integer(int64_t min, int64_t max) const {
  if (!value_->is_number_integer()) fail("must be an integer, not " + printable(value_->dump(), 40));
  if (value_->is_number_unsigned() && value_->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    fail("is " + value_->dump() + "; it must be " + std::to_string(min) + ".." + std::to_string(max));
  }
  const auto v = value_->get<int64_t>();
  if (v < min || v > max) {
    fail("is " + std::to_string(v) + "; it must be " + std::to_string(min) + ".." + std::to_string(max));
  }
  return v;
}

double HfJsonNode::number() const {
  if (!value_->is_number()) fail("must be a number, not " + kind_of(*value_));
  const double v = value_->get<double>();
  if (!std::isfinite(v)) fail("must be finite");
  return v;
}

std::string HfJsonNode::character() const {
  const std::string s = string();
  const auto points = unicode::decode(s);
  if (points.size() != 1) fail("must be one character, not '" + printable(s, 40) + "'");
  return s;
}

std::string HfJsonNode::string_or(std::string_view key, std::string fallback) const {
  const auto found = find(key);
  return found ? found->string() : std::move(fallback);
}

bool HfJsonNode::boolean_or(std::string_view key, bool fallback) const {
  const auto found = find(key);
  return found ? found->boolean() : fallback;
}

void HfJsonNode::only(std::initializer_list<std::string_view> known) const {
  for (const auto& [key, value] : object().items()) {
    if (key == "type") continue;
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    const std::string type = value_->contains("type") && (*value_)["type"].is_string()
                                 ? (*value_)["type"].get<std::string>()
                                 : std::string("this component");
    fail("has the setting '" + printable(key, 60) + "', which megatron's reader of " + type +
         " does not know; it may change the token ids, so the file is refused");
  }
}

}  // namespace megatron::data
