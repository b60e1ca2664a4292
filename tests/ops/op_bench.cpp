// megatron-op-bench, mode 3 of the op harness (docs/op-harness.md): every case's forward, and its
// forward and backward together, timed on one backend; and the timing-only cases on realistic
// shapes (megatron-gpu-bench's kernel rows), with GB/s. Not a test: ctest never runs it.
//
// usage: megatron-op-bench [--backend cpu|cuda] [--set ops|timing|all] [--only NAME,NAME]
//                          [--reps N] [--warmup N] [--scale N] [--threads N] [--json FILE] [--list]
//
// Timing: ops_test::time_op (tests/ops/op_timer.hpp): std::chrono::steady_clock around each call,
// then Backend::synchronize(), so queued device work is counted; `warmup` untimed calls first,
// then the median of `reps`. The op cases' shapes are the checks' tiny ones times --scale in their
// leading dimension (rows, sequences): at scale 1 the figures measure per-op overhead more than
// arithmetic. The timing cases' shapes are fixed (a training step's; --scale does not apply).
//
// Exit status: 0 when every case ran, 1 when one failed (it says why), 2 for bad arguments, 3
// when the backend cannot be made (a CUDA backend without a GPU or in a CPU-only build).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/build_info.hpp"
#include "ops/op_case.hpp"
#include "ops/op_timer.hpp"
#include "tensor/make_backend.hpp"

namespace {

namespace ops = megatron::ops_test;
namespace mt = megatron::tensor;

struct Options {
  mt::Device device = mt::Device::Cpu;
  bool ops = true, timing = false;  // --set: which list runs when --only names none
  std::set<std::string> only;
  int reps = 20;
  int warmup = 3;
  int64_t scale = 1;
  int threads = 0;
  std::string json;
  bool list = false;
};

void usage(std::FILE* to) {
  std::fprintf(to,
               "usage: megatron-op-bench [--backend cpu|cuda] [--set ops|timing|all] "
               "[--only NAME,NAME] [--reps N] [--warmup N] [--scale N] [--threads N] "
               "[--json FILE] [--list]\n"
               "  --backend B   cpu (default) or cuda\n"
               "  --set S       ops: the checked cases (default); timing: the timing-only cases\n"
               "                on a training step's shapes (GB/s; gigabytes of memory); all\n"
               "  --only LIST   the cases to time, by name, from either set (--list names them)\n"
               "  --reps N      timed calls per case, median reported (default 20)\n"
               "  --warmup N    untimed calls first (default 3)\n"
               "  --scale N     multiplies each op case's leading dimension (default 1)\n"
               "  --threads N   cpu: threads (default: OMP_NUM_THREADS, else every core)\n"
               "  --json FILE   also write every figure as JSON\n"
               "  --list        print the cases and what each computes, then exit\n");
}

bool parse_int(const std::string& text, long low, long high, long& out) {
  try {
    size_t used = 0;
    out = std::stol(text, &used);
    return used == text.size() && out >= low && out <= high;
  } catch (const std::exception&) {
    return false;
  }
}

bool parse_args(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      usage(stdout);
      std::exit(0);
    }
    if (arg == "--list") {
      o.list = true;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "megatron-op-bench: unknown option or missing value: %s\n", arg.c_str());
      return false;
    }
    const std::string value = argv[++i];
    long n = 0;
    bool ok = true;
    if (arg == "--backend") {
      ok = value == "cpu" || value == "cuda";
      o.device = value == "cuda" ? mt::Device::Cuda : mt::Device::Cpu;
    } else if (arg == "--set") {
      ok = value == "ops" || value == "timing" || value == "all";
      o.ops = value != "timing";
      o.timing = value != "ops";
    } else if (arg == "--only") {
      std::stringstream names(value);
      for (std::string name; std::getline(names, name, ',');) {
        if (!name.empty()) o.only.insert(name);
      }
    } else if (arg == "--reps") {
      ok = parse_int(value, 1, 10000, n);
      o.reps = int(n);
    } else if (arg == "--warmup") {
      ok = parse_int(value, 0, 10000, n);
      o.warmup = int(n);
    } else if (arg == "--scale") {
      ok = parse_int(value, 1, 1 << 20, n);
      o.scale = n;
    } else if (arg == "--threads") {
      ok = parse_int(value, 0, 4096, n);
      o.threads = int(n);
    } else if (arg == "--json") {
      o.json = value;
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "megatron-op-bench: bad option %s %s\n", arg.c_str(), value.c_str());
      return false;
    }
  }
  return true;
}

struct Row {
  std::string name;
  double forward_ms = 0.0, forward_backward_ms = 0.0;
  std::string error;  // empty when measured
};

// A timing case's figure: one call, and the bytes it moves.
struct TimingRow {
  const ops::TimingCase* c = nullptr;
  double ms = 0.0;
  int reps = 0;
  std::string error;  // empty when measured
};

// A JSON string's contents: quotes and backslashes escaped, control characters as spaces.
std::string escaped(const std::string& text) {
  std::string out;
  for (char ch : text) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (static_cast<unsigned char>(ch) < 0x20) {
      out += ' ';
    } else {
      out += ch;
    }
  }
  return out;
}

double gb_per_s(double bytes, double ms) { return bytes / (ms * 1e-3) / 1e9; }

void write_json(const std::string& path, const Options& o, const std::string& backend,
                const std::vector<Row>& rows, const std::vector<TimingRow>& timing_rows) {
  namespace bi = megatron::build_info;
  std::ofstream out(path);
  out.precision(12);  // byte counts whole, to the byte
  out << "{\n  \"backend\": \"" << escaped(backend) << "\",\n  \"build_type\": \"" << bi::build_type()
      << "\",\n  \"compiler\": \"" << escaped(std::string(bi::compiler())) << "\",\n  \"git_commit\": \""
      << bi::git_commit() << "\",\n  \"omp_num_threads\": \""
      << (std::getenv("OMP_NUM_THREADS") ? std::getenv("OMP_NUM_THREADS") : "") << "\",\n"
      << "  \"reps\": " << o.reps << ",\n  \"warmup\": " << o.warmup << ",\n  \"scale\": "
      << o.scale << ",\n  \"cases\": [\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    out << "    {\"name\": \"" << r.name << "\", ";
    if (r.error.empty()) {
      out << "\"forward_ms\": " << r.forward_ms
          << ", \"forward_backward_ms\": " << r.forward_backward_ms;
    } else {
      out << "\"error\": \"" << escaped(r.error) << "\"";
    }
    out << "}" << (i + 1 < rows.size() ? "," : "") << "\n";
  }
  out << "  ],\n  \"timing_cases\": [\n";
  for (size_t i = 0; i < timing_rows.size(); ++i) {
    const TimingRow& r = timing_rows[i];
    out << "    {\"name\": \"" << r.c->name << "\", \"label\": \"" << escaped(r.c->label)
        << "\", \"shape\": \"" << escaped(r.c->shape) << "\", \"bytes_formula\": \""
        << escaped(r.c->bytes_formula) << "\", \"bytes\": " << r.c->bytes << ", ";
    if (r.error.empty()) {
      out << "\"ms\": " << r.ms << ", \"gbps\": " << gb_per_s(r.c->bytes, r.ms)
          << ", \"reps\": " << r.reps;
    } else {
      out << "\"error\": \"" << escaped(r.error) << "\"";
    }
    out << "}" << (i + 1 < timing_rows.size() ? "," : "") << "\n";
  }
  out << "  ]\n}\n";
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse_args(argc, argv, o)) {
    usage(stderr);
    return 2;
  }
  const std::vector<ops::OpCase> cases = ops::all_op_cases();
  const std::vector<ops::TimingCase> timing_cases = ops::timing_op_cases();
  if (o.list) {
    std::printf("op cases (--set ops; shapes x --scale):\n");
    for (const ops::OpCase& c : cases) std::printf("  %-28s %s\n", c.name.c_str(), c.what.c_str());
    std::printf("timing cases (--set timing; megatron-gpu-bench's kernel rows):\n");
    for (const ops::TimingCase& c : timing_cases) {
      std::printf("  %-28s %-30s bytes: %s\n", c.name.c_str(), c.shape.c_str(),
                  c.bytes_formula.c_str());
    }
    return 0;
  }
  const auto named = [&](const std::string& name) {
    return std::any_of(cases.begin(), cases.end(), [&](const auto& c) { return c.name == name; }) ||
           std::any_of(timing_cases.begin(), timing_cases.end(),
                       [&](const auto& c) { return c.name == name; });
  };
  for (const std::string& name : o.only) {
    if (!named(name)) {
      std::fprintf(stderr, "megatron-op-bench: no case named %s (--list names them)\n", name.c_str());
      return 2;
    }
  }
  // --only picks from both lists; without it, --set says which run.
  const auto wanted = [&](const std::string& name, bool in_set) {
    return o.only.empty() ? in_set : o.only.contains(name);
  };
  std::unique_ptr<mt::Backend> backend;
  try {
    backend = mt::make_backend(o.device, {.threads = o.threads, .allow_tf32 = false});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "megatron-op-bench: %s\n", e.what());
    return 3;
  }
  namespace bi = megatron::build_info;
  const char* omp = std::getenv("OMP_NUM_THREADS");
  std::printf("megatron-op-bench: %s; %s build, %s, commit %.12s, BLAS %s, OMP_NUM_THREADS=%s\n",
              backend->description().c_str(), std::string(bi::build_type()).c_str(),
              std::string(bi::compiler()).c_str(), std::string(bi::git_commit()).c_str(),
              std::string(bi::blas()).c_str(), omp ? omp : "(unset)");
  std::printf("timing: steady_clock and Backend::synchronize() around each call; median of %d "
              "after %d warm-up; TF32 off; op cases f32, shapes x%lld in their leading dimension\n",
              o.reps, o.warmup, static_cast<long long>(o.scale));
  const ops::TimerOptions timer{.warmup = o.warmup, .reps = o.reps};

  std::vector<Row> rows;
  bool failed = false;
  bool header = false;
  for (const ops::OpCase& c : cases) {
    if (!wanted(c.name, o.ops)) continue;
    if (!header) {
      std::printf("\n%-28s %12s %14s\n", "case", "forward ms", "fwd+bwd ms");
      header = true;
    }
    Row row{.name = c.name};
    try {
      ops::OpRun run = c.make(*backend, 1234, o.scale);
      const std::vector<mt::Tensor> weights = ops::output_weights(*backend, run.forward(), 1235);
      row.forward_ms = ops::time_op(*backend, [&] { run.forward(); }, timer).median_ms;
      // The backward runs its own forward first (what it keeps), as a training step does.
      row.forward_backward_ms =
          ops::time_op(*backend, [&] { run.backward(weights); }, timer).median_ms;
      std::printf("%-28s %12.4f %14.4f\n", c.name.c_str(), row.forward_ms, row.forward_backward_ms);
    } catch (const std::exception& e) {
      row.error = e.what();
      failed = true;
      std::printf("%-28s FAILED: %s\n", c.name.c_str(), e.what());
    }
    std::fflush(stdout);
    rows.push_back(std::move(row));
  }

  std::vector<TimingRow> timing_rows;
  header = false;
  for (const ops::TimingCase& c : timing_cases) {
    if (!wanted(c.name, o.timing)) continue;
    if (!header) {
      std::printf("\n%-20s %-30s %9s %10s %9s  %s\n", "timing case", "shape", "MB", "ms", "GB/s",
                  "bytes counted");
      header = true;
    }
    TimingRow row;
    row.c = &c;
    try {
      // The call holds its tensors (gigabytes for some): dropped before the next case's.
      const std::function<void()> call = c.make(*backend, 1234);
      const ops::OpTiming t = ops::time_op(*backend, call, timer);
      row.ms = t.median_ms;
      row.reps = t.reps;
      std::printf("%-20s %-30s %9.1f %10.4f %9.2f  %s\n", c.name.c_str(), c.shape.c_str(),
                  c.bytes / 1e6, row.ms, gb_per_s(c.bytes, row.ms), c.bytes_formula.c_str());
    } catch (const std::exception& e) {
      row.error = e.what();
      failed = true;
      std::printf("%-20s %-30s FAILED: %s\n", c.name.c_str(), c.shape.c_str(), e.what());
    }
    std::fflush(stdout);
    timing_rows.push_back(std::move(row));
  }
  if (!o.json.empty()) {
    write_json(o.json, o, backend->description(), rows, timing_rows);
    std::printf("\nwrote %s\n", o.json.c_str());
  }
  return failed ? 1 : 0;
}
