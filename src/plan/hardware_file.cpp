#include "plan/hardware_file.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>

#include "core/error.hpp"
#include "core/printable.hpp"

namespace megatron::plan {
namespace {

constexpr std::string_view kFormat = "megatron-hardware-profile";
constexpr int kVersion = 1;
constexpr std::uintmax_t kMaxFileBytes = 16u << 20;

using nlohmann::json;

struct GridKeys {
  const char* name;
  std::vector<const char*> axes;
};
const GridKeys kGemm{"gemm", {"m", "n", "k"}};
const GridKeys kAttentionForward{"attention_forward", {"seq", "head_dim"}};
const GridKeys kAttentionBackward{"attention_backward", {"seq", "head_dim"}};

json grid_to_json(const RateGrid& grid, const GridKeys& keys) {
  json out = json::object();
  for (std::size_t i = 0; i < keys.axes.size() && i < grid.axes.size(); ++i)
    out[keys.axes[i]] = grid.axes[i];
  out["flops_per_s"] = grid.rates;
  return out;
}

json rates_to_json(const KernelRates& rates) {
  json out = json::object();
  if (!rates.gemm.empty()) out[kGemm.name] = grid_to_json(rates.gemm, kGemm);
  if (!rates.attention_forward.empty())
    out[kAttentionForward.name] = grid_to_json(rates.attention_forward, kAttentionForward);
  if (!rates.attention_backward.empty())
    out[kAttentionBackward.name] = grid_to_json(rates.attention_backward, kAttentionBackward);
  return out;
}

// Reading: every accessor names the key path it reads in its error.
class Reader {
 public:
  explicit Reader(std::string origin) : origin_(std::move(origin)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw UserError(origin_ + ": " + key + ": " + what);
  }
  // Every number of a profile is a size, rate, fraction or time: 1e-9 to 1e18 keeps whatever the
  // cost model computes from them finite (a 1e-300 bandwidth would make a step last forever).
  double number(const json& value, const std::string& path, bool allow_zero) const {
    if (!value.is_number()) fail(path, "must be a number");
    const double v = value.get<double>();
    if (!std::isfinite(v) || v < 0 || (!allow_zero && v == 0))
      fail(path, allow_zero ? "must be a finite number >= 0" : "must be a finite number > 0");
    if (v != 0 && (v < 1e-9 || v > 1e18))
      fail(path, fmt::format("must be within 1e-9 and 1e18 (got {:g})", v));
    return v;
  }
  double field(const json& parent, const std::string& key, bool required, bool allow_zero,
               double fallback) const {
    const auto it = parent.find(key);
    if (it == parent.end()) {
      if (required) fail(key, "missing");
      return fallback;
    }
    return number(*it, key, allow_zero);
  }
  std::string text(const json& parent, const std::string& key, bool required) const {
    const auto it = parent.find(key);
    if (it == parent.end()) {
      if (required) fail(key, "missing");
      return {};
    }
    if (!it->is_string()) fail(key, "must be a string");
    std::string value = it->get<std::string>();
    if (value.size() > 4096) fail(key, "longer than 4096 characters");
    return value;
  }
  std::vector<double> numbers(const json& parent, const std::string& key,
                              const std::string& path) const {
    const auto it = parent.find(key);
    if (it == parent.end()) fail(path, "missing");
    if (!it->is_array()) fail(path, "must be a list of numbers");
    if (it->size() > (1u << 20)) fail(path, "has more than 2^20 entries");
    std::vector<double> out;
    out.reserve(it->size());
    for (const json& v : *it) out.push_back(number(v, path, false));
    return out;
  }
  RateGrid grid(const json& parent, const GridKeys& keys, const std::string& prefix) const {
    const auto it = parent.find(keys.name);
    if (it == parent.end()) return {};
    const std::string path = prefix + "." + keys.name;
    if (!it->is_object()) fail(path, "must be an object");
    RateGrid grid;
    for (const char* axis : keys.axes) grid.axes.push_back(numbers(*it, axis, path + "." + axis));
    grid.rates = numbers(*it, "flops_per_s", path + ".flops_per_s");
    for (const auto& [key, value] : it->items()) {
      bool known = key == "flops_per_s";
      for (const char* axis : keys.axes) known = known || key == axis;
      if (!known) fail(path + "." + printable(key), "unknown key");
    }
    try {
      check_rate_grid(grid, path);
    } catch (const UserError& error) {
      throw UserError(origin_ + ": " + error.what());
    }
    return grid;
  }
  KernelRates rates(const json& parent, const std::string& key) const {
    const auto it = parent.find(key);
    if (it == parent.end()) return {};
    if (!it->is_object()) fail(key, "must be an object");
    for (const auto& [name, value] : it->items())
      if (name != kGemm.name && name != kAttentionForward.name && name != kAttentionBackward.name)
        fail(key + "." + printable(name), "unknown key (gemm, attention_forward, attention_backward)");
    return {grid(*it, kGemm, key), grid(*it, kAttentionForward, key),
            grid(*it, kAttentionBackward, key)};
  }

 private:
  std::string origin_;
};

}  // namespace

json hardware_to_json(const HardwareProfile& p) {
  json out = {
      {"format", kFormat},
      {"version", kVersion},
      {"name", p.name},
      {"description", p.description},
      {"device", p.device},
      {"source", p.source},
      {"peak_flops_16bit", p.peak_flops_16bit},
      {"peak_flops_32bit", p.peak_flops_32bit},
      {"achievable_fraction", p.achievable_fraction},
      {"memory_bytes", p.memory_bytes},
      {"memory_bandwidth", p.memory_bandwidth},
      {"intra_node_bandwidth", p.intra_node_bandwidth},
      {"inter_node_bandwidth", p.inter_node_bandwidth},
      {"dp_overlap", p.dp_overlap},
      {"runtime_overhead_bytes", p.runtime_overhead_bytes},
      {"kernel_overhead_s", p.kernel_overhead_s},
  };
  out["rates_16bit"] = rates_to_json(p.rates_16bit);
  out["rates_32bit"] = rates_to_json(p.rates_32bit);
  return out;
}

HardwareProfile hardware_from_json(const json& in, const std::string& origin) {
  const Reader r(origin);
  if (!in.is_object()) r.fail("(top level)", "must be a JSON object");
  if (r.text(in, "format", true) != kFormat)
    r.fail("format", "must be \"" + std::string(kFormat) + "\"");
  const auto version = in.find("version");
  if (version == in.end() || !version->is_number_integer() || version->get<int64_t>() != kVersion)
    r.fail("version", "must be " + std::to_string(kVersion) + " (written by this megatron)");
  static const char* const known[] = {
      "format", "version", "name", "description", "device", "source", "peak_flops_16bit",
      "peak_flops_32bit", "achievable_fraction", "memory_bytes", "memory_bandwidth",
      "intra_node_bandwidth", "inter_node_bandwidth", "dp_overlap", "runtime_overhead_bytes",
      "kernel_overhead_s", "rates_16bit", "rates_32bit"};
  for (const auto& [key, value] : in.items()) {
    bool ok = false;
    for (const char* k : known) ok = ok || key == k;
    if (!ok) r.fail(printable(key), "unknown key");
  }

  HardwareProfile p;
  p.name = r.text(in, "name", true);
  if (p.name.empty()) r.fail("name", "must not be empty");
  p.description = r.text(in, "description", false);
  p.device = r.text(in, "device", true);
  if (p.device != "cpu" && p.device != "cuda") r.fail("device", "must be \"cpu\" or \"cuda\"");
  p.source = r.text(in, "source", false);
  if (p.source.empty()) p.source = origin;
  p.peak_flops_16bit = r.field(in, "peak_flops_16bit", true, false, 0);
  p.peak_flops_32bit = r.field(in, "peak_flops_32bit", true, false, 0);
  p.achievable_fraction = r.field(in, "achievable_fraction", true, false, 0);
  if (p.achievable_fraction > 1) r.fail("achievable_fraction", "must be at most 1");
  p.memory_bytes = r.field(in, "memory_bytes", true, false, 0);
  p.memory_bandwidth = r.field(in, "memory_bandwidth", true, false, 0);
  p.intra_node_bandwidth = r.field(in, "intra_node_bandwidth", true, false, 0);
  p.inter_node_bandwidth = r.field(in, "inter_node_bandwidth", true, false, 0);
  p.dp_overlap = r.field(in, "dp_overlap", false, true, 0);
  if (p.dp_overlap > 1) r.fail("dp_overlap", "must be at most 1");
  p.runtime_overhead_bytes = r.field(in, "runtime_overhead_bytes", false, true, 0);
  p.kernel_overhead_s = r.field(in, "kernel_overhead_s", false, true, 0);
  if (p.kernel_overhead_s > 1) r.fail("kernel_overhead_s", "must be at most 1 (seconds)");
  p.rates_16bit = r.rates(in, "rates_16bit");
  p.rates_32bit = r.rates(in, "rates_32bit");
  return p;
}

HardwareProfile read_hardware_file(const std::string& path) {
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) throw UserError(printable(path) + ": cannot read the hardware profile: " + ec.message());
  if (size > kMaxFileBytes)
    throw UserError(printable(path) + ": a hardware profile is at most 16 MiB; this file has " +
                    std::to_string(size) + " bytes");
  std::ifstream file(path, std::ios::binary);
  if (!file) throw UserError(printable(path) + ": cannot open the hardware profile");
  std::ostringstream text;
  text << file.rdbuf();
  const json parsed = json::parse(text.str(), nullptr, false);
  if (parsed.is_discarded())
    throw UserError(printable(path) + ": not valid JSON (a hardware profile is written by "
                    "`megatron plan --calibrate`)");
  return hardware_from_json(parsed, printable(path));
}

void write_hardware_file(const HardwareProfile& profile, const std::string& path) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    if (!file) throw UserError(printable(path) + ": cannot write the hardware profile here");
    file << hardware_to_json(profile).dump(2) << '\n';
    if (!file.flush())
      throw RuntimeFailure(printable(path) + ": writing the hardware profile failed");
  }
  std::error_code ec;
  std::filesystem::rename(temporary, path, ec);
  if (ec) {
    std::filesystem::remove(temporary, ec);
    throw RuntimeFailure(printable(path) + ": cannot move the hardware profile into place");
  }
}

}  // namespace megatron::plan
