#include "data/hf_post_processor.hpp"

#include "core/printable.hpp"

namespace megatron::data {

namespace {

int32_t read_id(const HfJsonNode& node) { return static_cast<int32_t>(node.integer(0, INT32_MAX)); }

// BertProcessing's and RobertaProcessing's ["[CLS]", 101].
int32_t token_pair_id(const HfJsonNode& pair) {
  if (!pair.json().is_array() || pair.size() != 2) pair.fail("must be a [token, id] pair");
  pair.at(std::size_t{0}).string();
  return read_id(pair.at(std::size_t{1}));
}

HfSpecialWrap read_template(const HfJsonNode& node) {
  node.only({"single", "pair", "special_tokens"});
  const HfJsonNode single = node.at("single");
  single.array();
  const std::optional<HfJsonNode> specials = node.find("special_tokens");
  HfSpecialWrap wrap;
  int sequences = 0;
  for (std::size_t i = 0; i < single.size(); ++i) {
    const HfJsonNode item = single.at(i);
    if (const auto seq = item.find("Sequence")) {
      const std::string id = seq->string("id");
      if (id != "A") seq->at("id").fail("a single-sequence template takes sequence A, not '" + printable(id, 20) + "'");
      ++sequences;
      continue;
    }
    const auto special = item.find("SpecialToken");
    if (!special) item.fail("must be a SpecialToken or a Sequence");
    const std::string name = special->string("id");
    if (!specials || !specials->json().contains(name)) {
      special->at("id").fail("'" + printable(name, 40) + "' is not in special_tokens");
    }
    const HfJsonNode entry = specials->at(name);
    const HfJsonNode ids = entry.at("ids");
    ids.array();
    auto& side = sequences == 0 ? wrap.before : wrap.after;
    for (std::size_t k = 0; k < ids.size(); ++k) side.push_back(read_id(ids.at(k)));
  }
  if (sequences != 1) single.fail("must hold sequence A exactly once");
  return wrap;
}

}  // namespace

HfSpecialWrap read_hf_post_processor(const HfJsonNode& node) {
  node.check_nesting();
  const std::string type = node.type();
  if (type == "TemplateProcessing") return read_template(node);
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    if (type == "BertProcessing") {
      node.only({"sep", "cls"});
    } else {
      node.only({"sep", "cls", "trim_offsets", "add_prefix_space"});
    }
    return {{token_pair_id(node.at("cls"))}, {token_pair_id(node.at("sep"))}};
  }
  if (type == "ByteLevel") {
    node.only({"add_prefix_space", "trim_offsets", "use_regex"});
    return {};
  }
  if (type == "Sequence") {
    node.only({"processors"});
    const HfJsonNode list = node.at("processors");
    list.array();
    HfSpecialWrap all;
    for (std::size_t i = 0; i < list.size(); ++i) {
      const HfSpecialWrap one = read_hf_post_processor(list.at(i));
      all.before.insert(all.before.begin(), one.before.begin(), one.before.end());
      all.after.insert(all.after.end(), one.after.begin(), one.after.end());
    }
    return all;
  }
  node.at("type").fail("unknown post-processor '" + type + "'; known: TemplateProcessing, BertProcessing, "
                       "RobertaProcessing, ByteLevel, Sequence");
}

}  // namespace megatron::data
