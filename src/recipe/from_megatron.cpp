#include "recipe/from_megatron.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <filesystem>
#include <map>
#include <numeric>
#include <sstream>

#include "core/error.hpp"
#include "core/printable.hpp"
#include "recipe/enum_names.hpp"
#include "recipe/megatron_command_line.hpp"
#include "recipe/megatron_flags.hpp"
#include "recipe/recipe_text.hpp"
#include "recipe/schema.hpp"
#include "recipe/suggest.hpp"

namespace megatron::recipe {
namespace {

std::optional<int64_t> parse_integer(const std::string& text) {
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<double> parse_number(const std::string& text) {
  // strtod reads what Python's float() reads ("6e-5", ".001"), which is what Megatron-LM took.
  if (text.empty() || std::isspace(static_cast<unsigned char>(text.front()))) return std::nullopt;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

// "1.0" rather than "1", so a number reads as one, as in the shipped recipes.
std::string number_text(double value) {
  std::string text = fmt::format("{}", value);
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

std::string with_separators(int64_t n) {
  const std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0 && digits[i - 1] != '-') out += ',';
    out += digits[i];
  }
  return out;
}

template <class E>
std::optional<std::string> canonical(const std::string& text) {
  if (auto value = parse_enum<E>(text)) return std::string(name_of(*value));
  return std::nullopt;
}

template <class E>
std::string choices_of() {
  return fmt::format("{}", fmt::join(canonical_names<E>(), ", "));
}

// Megatron-LM's spellings of the recipe's choices, by key.
std::optional<std::string> canonical_choice(const std::string& key, const std::string& text,
                                            std::string& choices) {
  if (key == "model.position_embedding") {
    choices = choices_of<PositionEmbedding>();
    return canonical<PositionEmbedding>(text);
  }
  if (key == "model.normalization") {
    choices = choices_of<Norm>();
    return canonical<Norm>(text);
  }
  if (key == "training.optimizer") {
    choices = choices_of<Optimizer>();
    return canonical<Optimizer>(text);
  }
  if (key == "training.lr_decay_style") {
    choices = choices_of<LrDecay>();
    return canonical<LrDecay>(text);
  }
  if (key == "training.lr_wsd_decay_style") {
    choices = choices_of<WsdDecay>();
    return canonical<WsdDecay>(text);
  }
  if (key == "training.recompute") {
    choices = choices_of<Recompute>();
    return canonical<Recompute>(text);
  }
  throw std::logic_error("from-megatron: no choice table for " + key);
}

Arch family_of(const MegatronCommandLine& line, const std::optional<std::string>& given) {
  std::optional<Arch> from_script;
  if (line.script) {
    const std::string name = std::filesystem::path(*line.script).filename().string();
    for (const auto& [script, arch] : {std::pair{"pretrain_gpt.py", Arch::Gpt},
                                       std::pair{"pretrain_bert.py", Arch::Bert},
                                       std::pair{"pretrain_t5.py", Arch::T5}})
      if (name == script) from_script = arch;
  }
  std::optional<Arch> from_option;
  if (given) {
    from_option = parse_enum<Arch>(*given);
    if (!from_option)
      throw UserError(fmt::format("--model '{}' is not one of gpt, bert, t5{}", printable(*given),
                                  did_you_mean(*given, canonical_names<Arch>())));
  }
  if (from_option && from_script && *from_option != *from_script)
    throw UserError(fmt::format("--model {} contradicts the script {}; keep one",
                                name_of(*from_option), printable(*line.script)));
  if (from_option) return *from_option;
  if (from_script) return *from_script;
  if (line.script)
    throw UserError(fmt::format("the model family of script '{}' is not known; say it with "
                                "--model gpt|bert|t5",
                                printable(*line.script)));
  throw UserError("say which model the flags are for: --model gpt|bert|t5, or start them with "
                  "the script (pretrain_gpt.py, pretrain_bert.py or pretrain_t5.py)");
}

class Translator {
 public:
  Translator(const MegatronCommandLine& line, Arch arch) : line_(line), arch_(arch) {}

  MegatronTranslation run() {
    collect();
    check_exclusive();
    check_essentials();
    set(std::string("model.arch"), std::string(name_of(arch_)), "", script_comment());
    for (const GivenFlag* flag : order_) translate(*flag);
    translate_family_flags();
    translate_attention();
    translate_layout();
    translate_recompute();
    translate_batch();
    translate_schedule_samples();
    translate_data();
    translate_tokenizer_and_vocab();
    translate_logging_level();
    megatron_defaults();
    cluster();
    out_.yaml = text_.render(header());
    return std::move(out_);
  }

 private:
  // The last occurrence of each flag counts, as with argparse.
  void collect() {
    std::vector<std::string> known;
    for (const MegatronFlag& flag : megatron_flags()) known.emplace_back(flag.name);
    for (const GivenFlag& flag : line_.flags) {
      if (!flag.known) {
        for (const RefusedPrefix& refused : refused_flag_prefixes())
          if (flag.name.starts_with(refused.prefix))
            throw UserError(fmt::format("{}: {}", flag.name, refused.why));
        out_.unknown.push_back(flag_text(flag) + did_you_mean(flag.name, known));
        continue;
      }
      const MegatronFlag& spec = *find_megatron_flag(flag.name);
      if (spec.fate == Fate::Refused) throw UserError(fmt::format("{}: {}", flag.name, spec.why));
      if (auto it = given_.find(flag.name); it != given_.end()) {
        if (it->second->values != flag.values)
          out_.notes.push_back(fmt::format("{} is given more than once; the last, {}, counts, as "
                                           "in Megatron-LM",
                                           flag.name, flag_text(flag)));
        std::erase(order_, it->second);
      }
      given_[flag.name] = &flag;
      order_.push_back(&flag);
    }
  }

  void check_exclusive() const {
    for (const ExclusiveFlags& pair : exclusive_megatron_flags())
      if (given(pair.first) && given(pair.second))
        throw UserError(fmt::format("{} and {} exclude each other: {}; keep one", pair.first,
                                    pair.second, pair.why));
  }

  void check_essentials() const {
    std::vector<std::string> missing;
    auto need = [&](std::initializer_list<const char*> any) {
      for (const char* name : any)
        if (given(name)) return;
      std::string alternatives;
      for (const char* name : any) alternatives += (alternatives.empty() ? "" : " or ") + std::string(name);
      missing.push_back(alternatives);
    };
    need({"--num-layers", "--encoder-num-layers"});
    need({"--hidden-size"});
    need({"--num-attention-heads"});
    need({"--seq-length", "--encoder-seq-length"});
    need({"--micro-batch-size"});
    need({"--lr"});
    need({"--train-iters", "--train-samples"});
    if (!missing.empty())
      throw UserError(fmt::format("a recipe needs {} too, which the flags do not give",
                                  fmt::join(missing, ", ")));
  }

  bool given(std::string_view name) const { return given_.contains(std::string(name)); }

  const std::string& value(std::string_view name) const {
    return given_.at(std::string(name))->values.front();
  }

  int64_t integer(std::string_view name) const {
    const auto v = parse_integer(value(name));
    if (!v) throw UserError(fmt::format("{}: expected an integer, got '{}'", name, printable(value(name))));
    return *v;
  }

  std::optional<int64_t> integer_key(const std::string& path) const {
    const auto* entry = text_.find(path);
    return entry ? parse_integer(entry->value) : std::nullopt;
  }

  // Sets a key for `flag`; two different flags giving one key different values contradict.
  void set(const std::string& path, std::string yaml, std::string_view flag,
           std::string comment = "") {
    if (auto it = set_by_.find(path); it != set_by_.end() && it->second != flag) {
      const auto* entry = text_.find(path);
      if (entry && entry->value != yaml)
        throw UserError(fmt::format("{} and {} contradict each other: {} would be {} and {}; keep one",
                                    it->second, flag, path, entry->value, yaml));
    }
    set_by_[path] = std::string(flag);
    text_.set(path, std::move(yaml), std::move(comment));
  }

  // The flag's value as the YAML of `path`'s type.
  std::string value_as(const std::string& path, const GivenFlag& flag) const {
    const std::string& text = flag.values.front();
    const FieldSpec& field = *find_field(path);
    switch (field.kind) {
      case ValueKind::Integer:
        if (!parse_integer(text))
          throw UserError(fmt::format("{}: expected an integer, got '{}'", flag.name, printable(text)));
        return text;
      case ValueKind::Number:
        if (auto v = parse_number(text)) return number_text(*v);
        throw UserError(fmt::format("{}: expected a number, got '{}'", flag.name, printable(text)));
      case ValueKind::Choice: {
        std::string choices;
        if (auto v = canonical_choice(path, text, choices)) return *v;
        throw UserError(fmt::format("{}: '{}' has no counterpart here: recipes take one of {}",
                                    flag.name, printable(text), choices));
      }
      default:
        return yaml_string(text);
    }
  }

  void translate(const GivenFlag& flag) {
    const MegatronFlag& spec = *find_megatron_flag(flag.name);
    switch (spec.fate) {
      case Fate::Key: {
        const std::string path(spec.key);
        if (spec.arity == Arity::Many) {  // a list of integers (--profile-ranks 0 3)
          for (const std::string& w : flag.values) {
            if (!parse_integer(w))
              throw UserError(fmt::format("{}: expected integers, got '{}'", flag.name, printable(w)));
          }
          set(path, yaml_list(flag.values), flag.name);
          break;
        }
        set(path, spec.arity == Arity::Switch ? std::string(spec.value) : value_as(path, flag),
            flag.name);
        break;
      }
      case Fate::Ignored:
        out_.ignored.push_back(fmt::format("{}: {}", flag_text(flag), spec.why));
        break;
      case Fate::Untranslated:
        out_.untranslated.push_back(fmt::format("{}: {}", flag_text(flag), spec.why));
        break;
      case Fate::Special:
      case Fate::Refused:
        break;
    }
  }

  void ignore(std::string_view name, std::string_view why) {
    out_.ignored.push_back(fmt::format("{}: {}", flag_text(*given_.at(std::string(name))), why));
  }
  void untranslated(std::string_view name, std::string_view why) {
    out_.untranslated.push_back(
        fmt::format("{}: {}", flag_text(*given_.at(std::string(name))), why));
  }

  // Flags one script reads and the others do not.
  void translate_family_flags() {
    const std::string script = fmt::format("pretrain_{}.py", name_of(arch_));
    auto key_if = [&](const char* name, Arch arch, const std::string& path) {
      if (!given(name)) return;
      if (arch_ == arch)
        set(path, value_as(path, *given_.at(name)), name);
      else
        ignore(name, fmt::format("only pretrain_{}.py reads it, not {}", name_of(arch), script));
    };
    key_if("--decoder-num-layers", Arch::T5, "model.decoder_num_layers");
    key_if("--decoder-seq-length", Arch::T5, "data.decoder_seq_length");
    // Llama 3.1's scaling: Megatron applies it to rotary positions only and ignores it otherwise.
    const bool rope = given("--use-rotary-position-embeddings") ||
                      (given("--position-embedding-type") &&
                       canonical<PositionEmbedding>(value("--position-embedding-type")) == "rope");
    if (given("--use-rope-scaling") && rope) {
      set("model.rope_scaling", "llama3", "--use-rope-scaling");
      if (given("--rope-scaling-factor"))
        set("model.rope_scaling_factor", value_as("model.rope_scaling_factor", *given_.at("--rope-scaling-factor")),
            "--rope-scaling-factor");
    } else {
      for (const char* name : {"--use-rope-scaling", "--rope-scaling-factor"}) {
        if (given(name))
          ignore(name, rope ? "acts only with --use-rope-scaling" : "scales rotary positions, which this model does not have");
      }
    }
    if (given("--bert-no-binary-head")) {
      if (arch_ == Arch::Bert)
        set("model.bert_binary_head", "false", "--bert-no-binary-head");
      else
        ignore("--bert-no-binary-head", "only pretrain_bert.py reads it, not " + script);
    }
    for (const auto& [name, path] : {std::pair{"--mask-prob", "data.mask_prob"},
                                     std::pair{"--short-seq-prob", "data.short_seq_prob"}}) {
      if (!given(name)) continue;
      if (arch_ != Arch::Gpt)
        set(path, value_as(path, *given_.at(name)), name);
      else
        ignore(name, "pretrain_gpt.py does not mask");
    }
  }

  void translate_attention() {
    if (given("--group-query-attention")) {
      const bool groups = given("--num-query-groups");
      set("model.num_query_groups", groups ? std::to_string(integer("--num-query-groups")) : "1",
          "--group-query-attention", groups ? "" : "Megatron-LM's default for --num-query-groups");
    } else if (given("--num-query-groups")) {
      ignore("--num-query-groups", "Megatron-LM reads it only with --group-query-attention");
    }
    if (given("--attention-backend")) {
      const std::string backend = value("--attention-backend");
      if (backend == "flash" || backend == "fused")
        set("model.flash_attention", "true", "--attention-backend");
      else if (backend == "unfused" || backend == "local" || backend == "auto")
        // Every backend computes the same attention; this engine has only the memory-efficient
        // kernel, so the choice changes nothing but the memory Megatron-LM would use.
        ignore("--attention-backend", "this project always runs its memory-efficient attention "
                                      "kernel (model.flash_attention: true), with the same results");
      else
        throw UserError(fmt::format("--attention-backend: '{}' is not one of auto, flash, fused, "
                                    "unfused, local",
                                    printable(backend)));
    }
    // Megatron-LM's SwiGLU width differs from the recipe default (8h/3 rounded to 256).
    if (!text_.has("model.ffn_hidden_size") && text_.has("model.activation") &&
        text_.find("model.activation")->value == "swiglu") {
      const int64_t h = integer("--hidden-size");
      set("model.ffn_hidden_size", std::to_string((4 * h * 2 / 3) / 64 * 64), "--swiglu",
          "Megatron-LM's SwiGLU width: 8h/3 rounded down to a multiple of 64");
    }
  }

  void translate_layout() {
    if (given("--sequence-parallel")) {
      if (integer_key("parallel.tensor").value_or(1) > 1)
        set("parallel.sequence_parallel", "true", "--sequence-parallel");
      else
        ignore("--sequence-parallel", "Megatron-LM turns it off without tensor parallelism");
    }
    const int64_t pipeline = integer_key("parallel.pipeline").value_or(1);
    const int64_t layers = integer_key("model.num_layers").value_or(0);
    if (given("--num-layers-per-virtual-pipeline-stage")) {
      const int64_t per = integer("--num-layers-per-virtual-pipeline-stage");
      if (per < 1 || layers % (pipeline * per) != 0)
        throw UserError(fmt::format(
            "--num-layers-per-virtual-pipeline-stage {}: {} layers do not split into pipeline {} x "
            "chunks of {}",
            per, layers, pipeline, per));
      set("parallel.virtual_pipeline", std::to_string(layers / (pipeline * per)),
          "--num-layers-per-virtual-pipeline-stage",
          fmt::format("{} layers / (pipeline {} x {} layers per virtual stage)", layers, pipeline, per));
    }
    const bool first = given("--decoder-first-pipeline-num-layers");
    const bool last = given("--decoder-last-pipeline-num-layers");
    if (!first && !last) return;
    const int64_t f = first ? integer("--decoder-first-pipeline-num-layers") : 0;
    const int64_t l = last ? integer("--decoder-last-pipeline-num-layers") : 0;
    const int64_t even_stages = pipeline - (first ? 1 : 0) - (last ? 1 : 0);
    const int64_t rest = layers - f - l;
    if (pipeline < 2 || even_stages < 0 || f < 0 || l < 0 || rest < 0 ||
        (even_stages == 0 ? rest != 0 : rest % even_stages != 0))
      throw UserError(fmt::format(
          "--decoder-first/last-pipeline-num-layers: {} layers do not split into {} pipeline "
          "stages with {} first and {} last and the rest even",
          layers, pipeline, first ? std::to_string(f) : "an even share",
          last ? std::to_string(l) : "an even share"));
    std::vector<std::string> stages;
    if (first) stages.push_back(std::to_string(f));
    for (int64_t s = 0; s < even_stages; ++s) stages.push_back(std::to_string(rest / even_stages));
    if (last) stages.push_back(std::to_string(l));
    set("parallel.layers_per_stage", yaml_list(stages),
        first ? "--decoder-first-pipeline-num-layers" : "--decoder-last-pipeline-num-layers");
  }

  void translate_recompute() {
    const bool full = text_.has("training.recompute") && text_.find("training.recompute")->value == "full";
    if (given("--recompute-method") && !full) {
      ignore("--recompute-method", "Megatron-LM reads it only with --recompute-granularity full");
      if (given("--recompute-num-layers"))
        ignore("--recompute-num-layers", "Megatron-LM reads it only with --recompute-granularity full");
      return;
    }
    if (!given("--recompute-method")) {
      if (given("--recompute-num-layers"))
        ignore("--recompute-num-layers", "Megatron-LM reads it only with --recompute-method");
      return;
    }
    const std::string method = value("--recompute-method");
    if (method == "block") {
      if (given("--recompute-num-layers"))
        set("training.recompute_num_layers", std::to_string(integer("--recompute-num-layers")),
            "--recompute-num-layers");
    } else if (method == "uniform") {
      if (given("--recompute-num-layers") && integer("--recompute-num-layers") != 1)
        untranslated("--recompute-num-layers",
                     "uniform recompute of groups of layers has no recipe key: here each layer is "
                     "recomputed on its own (the same result, less memory)");
    } else {
      throw UserError(fmt::format("--recompute-method: '{}' is not one of uniform, block",
                                  printable(method)));
    }
  }

  // Megatron-LM's step schedule ("0:16 2.4B:320 ...", thresholds in tokens) is the recipe's
  // ramp-up exactly when its steps are equal in samples and in batch size.
  void step_schedule(std::optional<int64_t>& global) {
    const int64_t seq = integer_key("data.seq_length").value_or(1);
    std::vector<std::pair<int64_t, int64_t>> steps;
    std::istringstream entries(value("--step-batch-size-schedule"));
    for (std::string entry; entries >> entry;) {
      const auto colon = entry.find(':');
      auto amount = [&](std::string t) -> std::optional<int64_t> {
        double scale = 1;
        if (!t.empty()) {
          const char suffix = static_cast<char>(std::toupper(static_cast<unsigned char>(t.back())));
          for (const auto& [s, f] : {std::pair{'K', 1e3}, std::pair{'M', 1e6}, std::pair{'B', 1e9},
                                     std::pair{'T', 1e12}})
            if (suffix == s) {
              scale = f;
              t.pop_back();
            }
        }
        const auto v = parse_number(t);
        if (!v || *v < 0) return std::nullopt;
        return std::llround(*v * scale);
      };
      const auto tokens = colon == std::string::npos ? std::nullopt : amount(entry.substr(0, colon));
      const auto batch = colon == std::string::npos ? std::nullopt : amount(entry.substr(colon + 1));
      if (!tokens || !batch || *batch < 1)
        throw UserError(fmt::format("--step-batch-size-schedule: '{}' is not TOKENS:BATCH",
                                    printable(entry)));
      steps.emplace_back(*tokens / seq, *batch);
    }
    if (steps.empty() || steps.front().first != 0)
      throw UserError("--step-batch-size-schedule must start with an entry at 0");
    if (global && *global != steps.back().second)
      throw UserError(fmt::format("--global-batch-size {} contradicts --step-batch-size-schedule, "
                                  "which ends at {}; keep one",
                                  *global, steps.back().second));
    global = steps.back().second;
    if (steps.size() == 1) return;
    const int64_t every = steps[1].first;
    const int64_t increment = steps[1].second - steps[0].second;
    for (size_t i = 1; i < steps.size(); ++i)
      if (steps[i].first != static_cast<int64_t>(i) * every ||
          steps[i].second - steps[i - 1].second != increment || increment < 1)
        throw UserError(
            "--step-batch-size-schedule: only a schedule of equal steps (equal token intervals, "
            "equal batch increments) has a recipe form, training.rampup_batch_size [start, "
            "increment, samples]; give such a schedule or --rampup-batch-size");
    set("training.rampup_batch_size",
        yaml_list({std::to_string(steps[0].second), std::to_string(increment),
                   std::to_string(steps.back().first)}),
        "--step-batch-size-schedule",
        fmt::format("from {} to {} by {} every {} samples ({} tokens / seq_length {})",
                    steps[0].second, steps.back().second, increment, with_separators(every),
                    with_separators(every * seq), seq));
  }

  void translate_batch() {
    std::optional<int64_t> global;
    if (given("--global-batch-size")) global = integer("--global-batch-size");
    if (given("--step-batch-size-schedule")) step_schedule(global);
    if (given("--rampup-batch-size")) {
      const auto& words = given_.at("--rampup-batch-size")->values;
      std::vector<std::string> ramp;
      for (const auto& w : words) {
        if (!parse_integer(w))
          throw UserError(fmt::format("--rampup-batch-size: expected an integer, got '{}'", printable(w)));
        ramp.push_back(w);
      }
      if (ramp.size() != 3)
        throw UserError(fmt::format("--rampup-batch-size takes 3 values (start, increment, ramp "
                                    "samples), got {}",
                                    ramp.size()));
      set("training.rampup_batch_size", yaml_list(ramp), "--rampup-batch-size");
    }
    if (global) {
      set("training.global_batch_size", std::to_string(*global),
          given("--global-batch-size") ? "--global-batch-size" : "--step-batch-size-schedule");
    } else {
      const int64_t micro = integer("--micro-batch-size");
      set("training.global_batch_size", std::to_string(micro * data_parallel()), "--micro-batch-size",
          fmt::format("Megatron-LM's default: micro batch x data-parallel size {}", data_parallel()));
    }
  }

  // Megatron-LM counts the schedule in samples with --train-samples; the recipe in iterations.
  void translate_schedule_samples() {
    const int64_t global = *integer_key("training.global_batch_size");
    const bool ramp = text_.has("training.rampup_batch_size");
    for (const auto& [name, path] : {std::pair{"--lr-decay-samples", "training.lr_decay_iters"},
                                     std::pair{"--lr-warmup-samples", "training.lr_warmup_iters"},
                                     std::pair{"--lr-wsd-decay-samples", "training.lr_wsd_decay_iters"}}) {
      if (!given(name)) continue;
      const int64_t samples = integer(name);
      set(path, std::to_string(ceil_div(samples, global)), name,
          fmt::format("Megatron-LM's {} samples / {}, rounded up{}", with_separators(samples),
                      global, ramp ? " (approximate under the batch ramp-up)" : ""));
    }
  }

  void translate_data() {
    if (given("--split")) {
      std::string split;
      for (const char c : value("--split"))
        if (!std::isspace(static_cast<unsigned char>(c))) split += c;
      set("data.split", yaml_string(split), "--split");
    }
    if (!given("--data-path")) return;
    // Megatron-LM reads "W1 P1 W2 P2 ..." as a weighted blend, anything else as prefixes.
    std::vector<std::string> words;
    for (const auto& value : given_.at("--data-path")->values) {
      std::istringstream split(value);
      for (std::string w; split >> w;) words.push_back(w);
    }
    bool weighted = words.size() % 2 == 0 && !words.empty();
    for (size_t i = 0; weighted && i < words.size(); i += 2) weighted = parse_number(words[i]).has_value();
    std::vector<std::string> prefixes, weights;
    for (size_t i = 0; i < words.size(); ++i) {
      if (weighted && i % 2 == 0)
        weights.push_back(number_text(*parse_number(words[i])));
      else
        prefixes.push_back(yaml_string(words[i]));
    }
    set("data.prefixes", yaml_list(prefixes), "--data-path");
    if (weighted) set("data.weights", yaml_list(weights), "--data-path");
  }

  struct KnownVocabulary {
    std::string tokenizer;
    int64_t size;
    std::string why;
  };

  void translate_tokenizer_and_vocab() {
    std::string tokenizer;
    if (given("--tokenizer-type")) {
      const std::string& type = value("--tokenizer-type");
      if (auto t = canonical<Tokenizer>(type)) {
        tokenizer = *t;
      } else if (type == "GPTSentencePieceTokenizer" || type == "Llama2Tokenizer") {
        tokenizer = "sentencepiece";
        out_.notes.push_back(fmt::format("--tokenizer-type {} is read as sentencepiece, the model "
                                         "file's own pieces",
                                         type));
      } else {
        throw UserError(fmt::format("--tokenizer-type {} has no counterpart here; recipes take "
                                    "GPT2BPETokenizer, BertWordPieceLowerCase, BertWordPieceCase, "
                                    "SentencePieceTokenizer, HuggingFaceTokenizer or NullTokenizer",
                                    printable(type)));
      }
    } else {
      tokenizer = given("--merge-file")        ? "gpt2-bpe"
                  : given("--tokenizer-model") ? "sentencepiece"
                  : arch_ == Arch::Gpt         ? "gpt2-bpe"
                                               : "bert-wordpiece-lowercase";
      out_.notes.push_back(fmt::format("no --tokenizer-type: took {}, as {}", tokenizer,
                                       given("--merge-file")        ? "--merge-file implies"
                                       : given("--tokenizer-model") ? "--tokenizer-model implies"
                                                                    : "the model family suggests"));
    }
    set("data.tokenizer", tokenizer, given("--tokenizer-type") ? "--tokenizer-type" : "(inferred)",
        given("--tokenizer-type") ? "" : "inferred: no --tokenizer-type");

    const int64_t extra = given("--vocab-extra-ids") ? integer("--vocab-extra-ids") : 0;
    if (given("--vocab-extra-ids") && arch_ != Arch::Gpt)
      set("data.vocab_extra_ids", std::to_string(extra), "--vocab-extra-ids");
    const std::string extra_text = extra ? fmt::format(" + {} --vocab-extra-ids", extra) : "";
    if (given("--vocab-size")) {
      set("model.vocab_size", std::to_string(integer("--vocab-size") + extra), "--vocab-size",
          extra ? "--vocab-size" + extra_text : "");
      return;
    }
    static const std::map<std::string, std::pair<int64_t, std::string>> sizes{
        {"gpt2-bpe", {50257, "GPT-2 BPE's 50,257 tokens"}},
        {"bert-wordpiece-lowercase",
         {30524, "bert-base-uncased's 30,522 + [BOS] and [EOS] that Megatron-LM adds"}},
        {"bert-wordpiece-cased",
         {28998, "bert-base-cased's 28,996 + [BOS] and [EOS] that Megatron-LM adds"}},
    };
    const auto it = sizes.find(tokenizer);
    if (it == sizes.end())
      throw UserError(fmt::format("the vocabulary size of a {} tokenizer is not in the flags (Megatron-LM "
                                  "reads it from the tokenizer's files); add --vocab-size N",
                                  tokenizer));
    set("model.vocab_size", std::to_string(it->second.first + extra), "(inferred)",
        it->second.second + extra_text + "; Megatron-LM counts the vocabulary file: set yours if it differs");
  }

  void translate_logging_level() {
    if (!given("--logging-level")) return;
    const int64_t level = integer("--logging-level");
    const char* name = level <= 10 ? "debug" : level <= 20 ? "info" : level <= 30 ? "warn" : "error";
    set("logging.level", name, "--logging-level", fmt::format("Python logging level {}", level));
  }

  // Where Megatron-LM's defaults differ from the recipe's, the recipe says Megatron-LM's.
  void megatron_defaults() {
    for (const auto& [path, value] : {std::pair{"training.lr_decay_style", "linear"},
                                      std::pair{"logging.interval", "100"},
                                      std::pair{"eval.interval", "1000"},
                                      std::pair{"eval.iters", "100"}})
      if (!text_.has(path)) set(path, value, "(default)", "Megatron-LM's default");
  }

  int64_t model_parallel() const {
    return integer_key("parallel.tensor").value_or(1) * integer_key("parallel.pipeline").value_or(1) *
           integer_key("parallel.context").value_or(1);
  }

  // The launcher's world when it fits the layout; else one data-parallel replica.
  std::pair<int64_t, int64_t> world() const {
    const int64_t m = model_parallel();
    if (line_.gpus_per_node) {
      const int64_t nodes = line_.nodes.value_or(1);
      if ((nodes * *line_.gpus_per_node) % m == 0) return {nodes, *line_.gpus_per_node};
    }
    const int64_t gpus = std::gcd(m, int64_t{8});
    return {m / gpus, gpus};
  }

  int64_t data_parallel() const {
    const auto [nodes, gpus] = world();
    return nodes * gpus / model_parallel();
  }

  void cluster() {
    const auto [nodes, gpus] = world();
    const bool from_launcher = line_.gpus_per_node && gpus == *line_.gpus_per_node &&
                               nodes == line_.nodes.value_or(1);
    if (line_.gpus_per_node && !from_launcher)
      out_.notes.push_back(fmt::format(
          "the launcher's world ({} x {} GPUs) is not a multiple of tensor x pipeline x context = "
          "{}, which Megatron-LM would refuse: the recipe takes {} x {}, one data-parallel replica",
          line_.nodes.value_or(1), *line_.gpus_per_node, model_parallel(), nodes, gpus));
    const std::string comment =
        from_launcher ? "from the launcher"
                      : "one data-parallel replica: Megatron-LM takes the world from its launcher";
    set("cluster.nodes", std::to_string(nodes), "(cluster)", comment);
    set("cluster.gpus_per_node", std::to_string(gpus), "(cluster)");
  }

  std::string script_comment() const {
    return line_.script ? "from " + printable(*line_.script) : "from --model";
  }

  std::vector<std::string> header() const {
    std::vector<std::string> lines{
        fmt::format("Translated from Megatron-LM's pretrain_{}.py flags by `megatron recipe "
                    "from-megatron`.",
                    name_of(arch_)),
        "Set cluster.hardware (a100-80gb, h100-sxm, h200) for `megatron plan`'s estimates and "
        "GPU runs."};
    auto list = [&](const char* title, const std::vector<std::string>& items) {
      if (items.empty()) return;
      lines.push_back(title);
      for (const auto& item : items) lines.push_back("  " + item);
    };
    list("Not translated (no counterpart in the recipe):", out_.untranslated);
    list("Ignored (no effect here):", out_.ignored);
    list("Unknown flags, left out:", out_.unknown);
    return lines;
  }

  const MegatronCommandLine& line_;
  Arch arch_;
  std::map<std::string, const GivenFlag*> given_;
  std::vector<const GivenFlag*> order_;
  std::map<std::string, std::string> set_by_;  // recipe key -> the flag that set it
  RecipeText text_;
  MegatronTranslation out_;
};

}  // namespace

MegatronTranslation from_megatron(const std::vector<std::string>& words,
                                  const std::optional<std::string>& family) {
  const MegatronCommandLine line = parse_megatron_command_line(words);
  return Translator(line, family_of(line, family)).run();
}

}  // namespace megatron::recipe
