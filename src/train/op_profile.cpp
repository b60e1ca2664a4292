#include "train/op_profile.hpp"

#include <algorithm>
#include <fstream>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "core/error.hpp"

namespace megatron::train {
namespace {

bool sixteen_bit(tensor::DType d) { return d == tensor::DType::Bf16 || d == tensor::DType::F16; }

std::string rate_text(const OpRow& row) {
  if (row.ms <= 0.0) return "";
  return row.counts_flops() ? fmt::format("{:.3g} TFLOP/s", row.rate / 1e12)
                            : fmt::format("{:.3g} GB/s", row.rate / 1e9);
}

// Long shape descriptions are cut for the log line; the JSON keeps them whole.
std::string clipped(const std::string& s, size_t width) {
  return s.size() <= width ? s : s.substr(0, width - 3) + "...";
}

void write_json(const std::filesystem::path& path, const nlohmann::json& j) {
  const std::filesystem::path partial = path.string() + ".partial";
  {
    std::ofstream out(partial);
    out << j.dump(1) << '\n';
    if (!out) throw RuntimeFailure("cannot write the profile " + partial.string());
  }
  std::filesystem::rename(partial, path);
}

}  // namespace

DevicePeaks peaks_of(const plan::HardwareProfile& h) {
  return {.name = h.name,
          .flops_16bit = h.peak_flops_16bit,
          .flops_32bit = h.peak_flops_32bit,
          .bandwidth = h.memory_bandwidth};
}

OpProfile summarize(const tensor::ProfileRecord& record, const DevicePeaks& peaks, int rank) {
  OpProfile p{.rank = rank, .device = record.device, .peaks = peaks, .steps = record.steps,
              .peak_bytes = record.peak_bytes};
  for (const tensor::ProfiledStep& s : record.steps) p.step_ms += s.ms;
  std::map<std::pair<std::string, std::string>, OpRow> rows;
  for (const tensor::ProfiledCall& c : record.calls) {
    OpRow& row = rows[{c.op, c.shapes}];
    row.op = c.op;
    row.shapes = c.shapes;
    row.dtype = c.dtype;
    ++row.calls;
    row.ms += c.ms;
    row.flops += c.flops;
    row.bytes += c.bytes;
    p.ops_ms += c.ms;
  }
  for (auto& [key, row] : rows) {
    row.share = p.step_ms > 0.0 ? row.ms / p.step_ms : 0.0;
    const double seconds = row.ms / 1e3;
    const double peak = row.counts_flops()
                            ? (sixteen_bit(row.dtype) ? peaks.flops_16bit : peaks.flops_32bit)
                            : peaks.bandwidth;
    row.rate = seconds > 0.0 ? (row.counts_flops() ? row.flops : row.bytes) / seconds : 0.0;
    row.of_peak = peak > 0.0 ? row.rate / peak : 0.0;
    p.rows.push_back(std::move(row));
  }
  std::stable_sort(p.rows.begin(), p.rows.end(),
                   [](const OpRow& a, const OpRow& b) { return a.ms > b.ms; });
  return p;
}

std::vector<std::string> profile_table(const OpProfile& p, size_t top) {
  std::vector<std::string> lines;
  const size_t n = p.steps.size();
  lines.push_back(fmt::format(
      "profile of rank {}, iteration{} {}{}: {:.2f} ms per step, {:.1f}% in backend ops, peak "
      "tensors {:.1f} MiB; rates against {}'s peaks",
      p.rank, n == 1 ? "" : "s", n ? p.steps.front().iteration : 0,
      n > 1 ? fmt::format("-{}", p.steps.back().iteration) : "", n ? p.step_ms / double(n) : 0.0,
      p.step_ms > 0.0 ? 100.0 * p.ops_ms / p.step_ms : 0.0, double(p.peak_bytes) / 1048576.0,
      p.peaks.name));
  lines.push_back(fmt::format("  {:<24} {:<52} {:>7} {:>10} {:>6} {:>9} {:>16} {:>7}", "op",
                              "shapes", "calls", "total ms", "share", "ms/call", "rate",
                              "of peak"));
  for (size_t i = 0; i < std::min(top, p.rows.size()); ++i) {
    const OpRow& r = p.rows[i];
    lines.push_back(fmt::format("  {:<24} {:<52} {:>7} {:>10.3f} {:>5.1f}% {:>9.4f} {:>16} {:>6.1f}%",
                                r.op, clipped(r.shapes, 52), r.calls, r.ms, 100.0 * r.share,
                                r.ms / double(r.calls), rate_text(r), 100.0 * r.of_peak));
  }
  if (p.rows.size() > top) {
    double rest = 0.0;
    for (size_t i = top; i < p.rows.size(); ++i) rest += p.rows[i].ms;
    lines.push_back(fmt::format("  {:<77} {:>10.3f} {:>5.1f}%",
                                fmt::format("({} more rows)", p.rows.size() - top), rest,
                                p.step_ms > 0.0 ? 100.0 * rest / p.step_ms : 0.0));
  }
  lines.push_back(fmt::format("  {:<77} {:>10.3f} {:>5.1f}%",
                              "(outside backend ops: communication, host work, gaps)",
                              p.outside_ms(),
                              p.step_ms > 0.0 ? 100.0 * p.outside_ms() / p.step_ms : 0.0));
  return lines;
}

nlohmann::json profile_json(const OpProfile& p) {
  nlohmann::json steps = nlohmann::json::array(), ops = nlohmann::json::array();
  for (const tensor::ProfiledStep& s : p.steps) {
    steps.push_back({{"iteration", s.iteration}, {"ms", s.ms}});
  }
  for (const OpRow& r : p.rows) {
    nlohmann::json row = {{"op", r.op},       {"shapes", r.shapes},
                          {"dtype", std::string(tensor::name(r.dtype))},
                          {"calls", r.calls}, {"total_ms", r.ms},
                          {"share", r.share}, {"ms_per_call", r.ms / double(r.calls)},
                          {"flops", r.flops}, {"bytes", r.bytes},
                          {"of_peak", r.of_peak}};
    if (r.counts_flops()) {
      row["tflops_per_s"] = r.rate / 1e12;
    } else {
      row["gb_per_s"] = r.rate / 1e9;
    }
    ops.push_back(std::move(row));
  }
  return {{"rank", p.rank},
          {"device", p.device},
          {"peaks",
           {{"hardware", p.peaks.name},
            {"flops_16bit", p.peaks.flops_16bit},
            {"flops_32bit", p.peaks.flops_32bit},
            {"bandwidth_bytes_per_s", p.peaks.bandwidth}}},
          {"steps", steps},
          {"step_ms", p.step_ms},
          {"ops_ms", p.ops_ms},
          {"outside_ops_ms", p.outside_ms()},
          {"peak_tensor_bytes", p.peak_bytes},
          {"ops", ops}};
}

nlohmann::json chrome_trace(const tensor::ProfileRecord& record, int rank) {
  nlohmann::json events = nlohmann::json::array();
  const auto us = [](double ms) { return ms * 1e3; };
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", rank},
                    {"args", {{"name", fmt::format("rank {} ({})", rank, record.device)}}}});
  events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", rank}, {"tid", 0},
                    {"args", {{"name", "steps"}}}});
  events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", rank}, {"tid", 1},
                    {"args", {{"name", "backend ops"}}}});
  for (const tensor::ProfiledStep& s : record.steps) {
    events.push_back({{"name", fmt::format("iteration {}", s.iteration)}, {"cat", "step"},
                      {"ph", "X"}, {"pid", rank}, {"tid", 0}, {"ts", us(s.start_ms)},
                      {"dur", us(s.ms)}});
  }
  for (const tensor::ProfiledCall& c : record.calls) {
    nlohmann::json args = {{"shapes", c.shapes}};
    if (c.flops > 0.0) args["flops"] = c.flops;
    args["bytes"] = c.bytes;
    events.push_back({{"name", c.op}, {"cat", "op"}, {"ph", "X"}, {"pid", rank}, {"tid", 1},
                      {"ts", us(c.start_ms)}, {"dur", us(c.ms)}, {"args", std::move(args)}});
    events.push_back({{"name", "live tensors (MiB)"}, {"ph", "C"}, {"pid", rank},
                      {"ts", us(c.start_ms + c.ms)},
                      {"args", {{"MiB", double(c.allocated_bytes) / 1048576.0}}}});
  }
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}

std::filesystem::path write_profile(const std::filesystem::path& run_dir, const OpProfile& p,
                                    const tensor::ProfileRecord& record) {
  const std::filesystem::path dir = run_dir / "profile";
  std::filesystem::create_directories(dir);
  const std::filesystem::path table = dir / fmt::format("rank-{}.json", p.rank);
  write_json(table, profile_json(p));
  write_json(dir / fmt::format("rank-{}.trace.json", p.rank), chrome_trace(record, p.rank));
  return table;
}

}  // namespace megatron::train
