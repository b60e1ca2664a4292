// megatron-gpu-bench: how fast the CUDA backend's GEMMs, kernels and flash attention run on this
// GPU, next to what the GPU can reach: cuBLAS's best on a large bf16 GEMM (compute) and a
// device-to-device copy (memory bandwidth), both measured in the same run.
//
// usage: megatron-gpu-bench [--json FILE] [--only gemm,kernels,attention] [--reps N]
//                           [--warmup N] [--budget-ms MS] [--device N]
//
// Timing: `warmup` untimed calls first, then the median of up to `reps` timed calls (fewer when
// `reps` calls would take longer than budget-ms). GEMM and attention rows: each call enqueued on
// the backend's stream between two cudaEvents. Kernel rows: the op harness's timer
// (tests/ops/op_timer.hpp, shared with megatron-op-bench), steady_clock around each call and
// Backend::synchronize() after it. Inputs are random normal (power draw, and so clocks, depend
// on the data a GEMM sees).
//
// Sections:
//   GEMM       gpt-125m and gpt-1.3b training-step shapes at 8 x 2048 tokens in bf16 (forward
//              y = x W^T, data gradient dx = dy W, weight gradient dW += dy^T x into f32), and
//              8192^3 in bf16 and f32 (TF32). TFLOP/s = 2 m n k / time; "vs peak" divides by the
//              best cublasGemmEx (legacy cuBLAS, CUBLAS_COMPUTE_32F, default algorithm) of the
//              NN, NT and TN layouts of an 8192^3 bf16 product (the f32 row: the same with
//              CUBLAS_COMPUTE_32F_FAST_TF32).
//   kernels    every other op on realistic shapes: the op harness's timing cases
//              (tests/ops/timing_op_cases.cpp, which megatron-op-bench --set timing also runs);
//              GB/s = bytes read + written (the formula is printed on each row) / time; "vs copy"
//              divides by a 1 GiB device-to-device cudaMemcpyAsync, counted as 2 GiB moved (read
//              + write), measured first with cudaEvents.
//   attention  CudaBackend::attention_forward/backward in bf16; forward FLOPs 4 B H S^2 D
//              (half when causal), backward 2.5x forward; "vs peak" as for the GEMMs.
//
// Exit status: 0 when everything was measured, 1 when some row failed (it says why), 2 for bad
// arguments, 3 when there is no CUDA device.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/device.hpp"
#include "ops/op_case.hpp"
#include "ops/op_timer.hpp"
#include "tensor/backend.hpp"
#include "tensor/cuda_backend.hpp"

namespace {

namespace mt = megatron::tensor;
namespace ops = megatron::ops_test;
using mt::Backend;
using mt::DType;
using mt::Shape;
using mt::Tensor;

constexpr int64_t kTokens = ops::kTimingTokens;  // a micro-batch of 8 sequences of 2048
constexpr int64_t kVocab = ops::kTimingVocab;    // GPT-2's 50257 padded to a multiple of 128
constexpr int kSquare = 8192;  // the square GEMMs: 8192^3
constexpr uint32_t kKernelSeed = 1234;  // the timing cases' inputs

void check_cuda(cudaError_t status, const std::string& what) {
  if (status != cudaSuccess) {
    cudaGetLastError();
    throw std::runtime_error(what + ": " + cudaGetErrorString(status));
  }
}

void check_cublas(cublasStatus_t status, const std::string& what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(what + ": " + cublasGetStatusString(status));
  }
}

struct Options {
  std::string json;
  int reps = 15;
  int warmup = 3;
  double budget_ms = 1000.0;
  int device = 0;
  bool gemm = true, kernels = true, attention = true;
};

void usage(std::FILE* to) {
  std::fprintf(to,
               "usage: megatron-gpu-bench [--json FILE] [--only gemm,kernels,attention] "
               "[--reps N] [--warmup N] [--budget-ms MS] [--device N]\n"
               "  --json FILE     also write every number as JSON\n"
               "  --only LIST     sections to run (default: all three)\n"
               "  --reps N        timed calls per row, median reported (default 15, at most 200)\n"
               "  --warmup N      untimed calls first (default 3)\n"
               "  --budget-ms MS  fewer timed calls when N would take longer (default 1000)\n"
               "  --device N      CUDA device index (default 0)\n");
}

bool parse_int(const std::string& text, int low, int high, int& out) {
  try {
    size_t used = 0;
    const long v = std::stol(text, &used);
    if (used != text.size() || v < low || v > high) return false;
    out = int(v);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

// Returns false (after a message) on bad arguments.
bool parse_args(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      usage(stdout);
      std::exit(0);
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "megatron-gpu-bench: unknown option or missing value: %s\n",
                   arg.c_str());
      return false;
    }
    const std::string value = argv[++i];
    bool ok = true;
    if (arg == "--json") {
      o.json = value;
    } else if (arg == "--reps") {
      ok = parse_int(value, 1, 200, o.reps);
    } else if (arg == "--warmup") {
      ok = parse_int(value, 0, 100, o.warmup);
    } else if (arg == "--device") {
      ok = parse_int(value, 0, 1023, o.device);
    } else if (arg == "--budget-ms") {
      int ms = 0;
      ok = parse_int(value, 1, 600000, ms);
      o.budget_ms = ms;
    } else if (arg == "--only") {
      o.gemm = o.kernels = o.attention = false;
      std::stringstream list(value);
      for (std::string part; std::getline(list, part, ',');) {
        if (part == "gemm") o.gemm = true;
        else if (part == "kernels") o.kernels = true;
        else if (part == "attention") o.attention = true;
        else ok = false;
      }
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "megatron-gpu-bench: bad option %s %s\n", arg.c_str(), value.c_str());
      return false;
    }
  }
  return true;
}

// --- timing ----------------------------------------------------------------------------------

class Stopwatch {
 public:
  Stopwatch(cudaStream_t stream, int max_reps) : stream_(stream) {
    events_.resize(2 * size_t(max_reps) + 2, nullptr);
    for (cudaEvent_t& e : events_) check_cuda(cudaEventCreate(&e), "cudaEventCreate");
  }
  ~Stopwatch() {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }
  Stopwatch(const Stopwatch&) = delete;
  Stopwatch& operator=(const Stopwatch&) = delete;

  ops::OpTiming measure(const std::function<void()>& op, int warmup, double budget_ms) {
    using Clock = std::chrono::steady_clock;
    const auto begin = Clock::now();
    for (int i = 0; i < warmup; ++i) {
      op();
      check_cuda(cudaStreamSynchronize(stream_), "warm-up call");
      const double spent = std::chrono::duration<double, std::milli>(Clock::now() - begin).count();
      if (spent > budget_ms / 2) break;  // a slow op: its first calls were warm-up enough
    }
    // One timed call decides how many fit in the budget.
    const double probe = timed(op, events_.size() - 2);
    const int max_reps = int(events_.size() / 2) - 1;
    int reps = max_reps;
    if (probe * reps > budget_ms) reps = std::max(3, int(budget_ms / std::max(probe, 1e-3)));
    reps = std::min(reps, max_reps);
    for (int i = 0; i < reps; ++i) {
      check_cuda(cudaEventRecord(events_[2 * size_t(i)], stream_), "cudaEventRecord");
      op();
      check_cuda(cudaEventRecord(events_[2 * size_t(i) + 1], stream_), "cudaEventRecord");
    }
    check_cuda(cudaEventSynchronize(events_[2 * size_t(reps) - 1]), "timed calls");
    std::vector<double> ms(size_t(reps), 0.0);
    for (int i = 0; i < reps; ++i) ms[size_t(i)] = elapsed(2 * size_t(i));
    std::sort(ms.begin(), ms.end());
    const size_t mid = ms.size() / 2;
    ops::OpTiming t;
    t.median_ms = ms.size() % 2 == 1 ? ms[mid] : 0.5 * (ms[mid - 1] + ms[mid]);
    t.reps = reps;
    return t;
  }

 private:
  double timed(const std::function<void()>& op, size_t first) {
    check_cuda(cudaEventRecord(events_[first], stream_), "cudaEventRecord");
    op();
    check_cuda(cudaEventRecord(events_[first + 1], stream_), "cudaEventRecord");
    check_cuda(cudaEventSynchronize(events_[first + 1]), "timed call");
    return elapsed(first);
  }
  double elapsed(size_t first) const {
    float ms = 0.0f;
    check_cuda(cudaEventElapsedTime(&ms, events_[first], events_[first + 1]),
               "cudaEventElapsedTime");
    return double(ms);
  }

  cudaStream_t stream_;
  std::vector<cudaEvent_t> events_;
};

// --- inputs ----------------------------------------------------------------------------------

class Inputs {
 public:
  explicit Inputs(Backend& be) : be_(be) {}

  // Random normal values (std `std`); a constant when the backend's normal() fails.
  Tensor random(const Shape& shape, DType dtype, float std = 1.0f) {
    Tensor x = be_.empty(shape, dtype);
    mt::RngKey key;
    key.seed = 1234;
    key.stream = ++stream_;
    try {
      be_.normal(x, 0.0f, std, key);
    } catch (const std::exception& e) {
      if (!warned_) {
        std::printf("# note: normal() failed (%s): inputs are constants\n", e.what());
        warned_ = true;
      }
      be_.fill(x, std * 0.5);
    }
    return x;
  }
  Tensor zeros(const Shape& shape, DType dtype) {
    Tensor x = be_.empty(shape, dtype);
    be_.fill(x, 0.0);
    return x;
  }
  Tensor empty(const Shape& shape, DType dtype) { return be_.empty(shape, dtype); }

 private:
  Backend& be_;
  uint64_t stream_ = 0;
  bool warned_ = false;
};

// --- results ---------------------------------------------------------------------------------

struct Row {
  std::string section;  // gemm, reference, kernels, attention
  std::string name;
  std::string shape;
  std::string formula;  // kernels: what the bytes count
  double work = 0.0;    // FLOPs (gemm, attention) or bytes (kernels)
  double ms = NAN;
  double rate = NAN;    // TFLOP/s or GB/s
  double ratio = NAN;   // against the section's reference
  int reps = 0;
  std::string error;
};

std::string number(const char* format, double v) {
  if (!std::isfinite(v)) return "-";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, format, v);
  return buffer;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buffer[8];
      std::snprintf(buffer, sizeof buffer, "\\u%04x", unsigned(static_cast<unsigned char>(c)));
      out += buffer;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.6g", v);
  return buffer;
}

std::string shape_text(const Shape& s, DType dtype) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "] " + std::string(mt::name(dtype));
}

class Bench {
 public:
  Bench(const Options& options, mt::CudaBackend& cuda)
      : o_(options),
        cuda_(cuda),
        be_(cuda),
        stream_(static_cast<cudaStream_t>(cuda.stream())),
        watch_(stream_, options.reps),
        in_(cuda) {}

  bool failed() const { return failed_; }
  const std::vector<Row>& rows() const { return rows_; }
  double bf16_peak() const { return bf16_peak_; }
  double tf32_peak() const { return tf32_peak_; }
  double copy_peak() const { return copy_peak_; }

  // Times the op that `setup` returns (setup allocates its tensors, which the op holds) with the
  // cudaEvents, and records the row.
  Row& run(Row row, const std::function<std::function<void()>()>& setup, double scale) {
    return record(std::move(row), [&] { return watch_.measure(setup(), o_.warmup, o_.budget_ms); },
                  scale);
  }

  // Records the row that `measure` times, its rate work / time / `scale`; a failure anywhere is
  // recorded, not thrown.
  Row& record(Row row, const std::function<ops::OpTiming()>& measure, double scale) {
    try {
      const ops::OpTiming t = measure();
      row.ms = t.median_ms;
      row.reps = t.reps;
      row.rate = row.work / (row.ms * 1e-3) / scale;
    } catch (const std::exception& e) {
      row.error = e.what();
      failed_ = true;
      // A failed op may leave work queued or the context in error: settle before going on.
      cudaStreamSynchronize(stream_);
      cudaGetLastError();
    }
    rows_.push_back(row);
    return rows_.back();
  }

  // --- GEMM --------------------------------------------------------------------------------

  void gemm_section() {
    std::printf("\n== GEMM (CudaBackend::gemm through cuBLASLt; %lld tokens) ==\n",
                static_cast<long long>(kTokens));
    cublas_references();
    std::printf("vs peak: TFLOP/s / the cuBLAS bf16 peak (the f32 row: / the cuBLAS TF32 peak)\n");
    std::printf("%-36s %-30s %9s %9s %8s\n", "GEMM", "m x n x k  a,b -> c", "ms", "TFLOP/s",
                "vs peak");
    struct Model {
      const char* name;
      int64_t hidden, ffn;
    };
    struct Layer {
      const char* name;
      int64_t in, out;
    };
    for (const Model model : {Model{"gpt-125m", 768, 3072}, Model{"gpt-1.3b", 2048, 8192}}) {
      const int64_t h = model.hidden;
      for (const Layer layer : {Layer{"qkv", h, 3 * h}, Layer{"proj", h, h},
                                Layer{"fc1", h, model.ffn}, Layer{"fc2", model.ffn, h},
                                Layer{"lm-head", h, kVocab}}) {
        const std::string base = std::string(model.name) + " " + layer.name;
        // forward y[T, out] = x[T, in] W[out, in]^T
        gemm_row(base + " fwd y=xW^T", kTokens, layer.out, layer.in, false, true, DType::Bf16,
                 DType::Bf16, false, false);
        // data gradient dx[T, in] = dy[T, out] W[out, in]
        gemm_row(base + " dgrad dx=dyW", kTokens, layer.in, layer.out, false, false, DType::Bf16,
                 DType::Bf16, false, false);
        // weight gradient dW[out, in] += dy[T, out]^T x[T, in], f32
        gemm_row(base + " wgrad dW+=dy^Tx", layer.out, layer.in, kTokens, true, false,
                 DType::Bf16, DType::F32, true, false);
        if (std::string(model.name) == "gpt-1.3b" && std::string(layer.name) == "fc1") {
          gemm_row(base + " fwd+bias (gemm_bias)", kTokens, layer.out, layer.in, false, true,
                   DType::Bf16, DType::Bf16, false, true);
        }
      }
    }
    gemm_row("square 8192^3 bf16 (xW^T)", 8192, 8192, 8192, false, true, DType::Bf16, DType::Bf16,
             false, false);
    gemm_row("square 8192^3 f32 (TF32, xW^T)", 8192, 8192, 8192, false, true, DType::F32,
             DType::F32, false, false);
  }

  // c[m, n] (+)= op(a) op(b) through the backend.
  void gemm_row(const std::string& name, int64_t m, int64_t n, int64_t k, bool ta, bool tb,
                DType ab, DType c_type, bool accumulate, bool bias) {
    Row row;
    row.section = "gemm";
    row.name = name;
    row.shape = std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + " " +
                std::string(mt::name(ab)) + "->" + std::string(mt::name(c_type));
    row.work = 2.0 * double(m) * double(n) * double(k);
    const Row& r = run(row, [&]() -> std::function<void()> {
      Tensor a = in_.random(ta ? Shape{k, m} : Shape{m, k}, ab);
      Tensor b = in_.random(tb ? Shape{n, k} : Shape{k, n}, ab);
      Tensor c = in_.zeros({m, n}, c_type);
      const float beta = accumulate ? 1.0f : 0.0f;
      if (bias) {
        Tensor bias_vector = in_.random({n}, c_type);
        return [this, a, b, c, bias_vector]() mutable {
          be_.gemm_bias(a, false, b, true, bias_vector, c);
        };
      }
      return [this, a, b, c, ta, tb, beta]() mutable { be_.gemm(a, ta, b, tb, c, 1.0f, beta); };
    }, 1e12);
    const double peak = ab == DType::F32 ? tf32_peak_ : bf16_peak_;
    rows_.back().ratio = r.rate / peak;
    print_gemm(rows_.back());
  }

  void print_gemm(const Row& r) {
    if (!r.error.empty()) {
      std::printf("%-36s %-30s FAILED: %s\n", r.name.c_str(), r.shape.c_str(), r.error.c_str());
    } else {
      std::printf("%-36s %-30s %9s %9s %8s\n", r.name.c_str(), r.shape.c_str(),
                  number("%.3f", r.ms).c_str(), number("%.1f", r.rate).c_str(),
                  number("%.2f", r.ratio).c_str());
    }
    std::fflush(stdout);
  }

  // The best cublasGemmEx of the NN, NT and TN layouts of an 8192^3 product, bf16 and TF32.
  void cublas_references() {
    cublasHandle_t handle = nullptr;
    try {
      check_cublas(cublasCreate(&handle), "cublasCreate");
      check_cublas(cublasSetStream(handle, stream_), "cublasSetStream");
      bf16_peak_ = cublas_best(handle, DType::Bf16);
      tf32_peak_ = cublas_best(handle, DType::F32);
    } catch (const std::exception& e) {
      Row row;
      row.section = "reference";
      row.name = "cublasGemmEx";
      row.error = e.what();
      rows_.push_back(row);
      failed_ = true;
      std::printf("cuBLAS reference FAILED: %s\n", e.what());
    }
    if (handle) cublasDestroy(handle);
    std::printf("cuBLAS peak (cublasGemmEx 8192^3, CUBLAS_COMPUTE_32F, default algo, best of "
                "NN/NT/TN): bf16 %s TFLOP/s; f32 with COMPUTE_32F_FAST_TF32: %s TFLOP/s\n",
                number("%.1f", bf16_peak_).c_str(), number("%.1f", tf32_peak_).c_str());
    std::fflush(stdout);
  }

  double cublas_best(cublasHandle_t handle, DType dtype) {
    constexpr int n = kSquare;
    const bool bf16 = dtype == DType::Bf16;
    const cudaDataType_t type = bf16 ? CUDA_R_16BF : CUDA_R_32F;
    const cublasComputeType_t compute = bf16 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_FAST_TF32;
    double best = NAN;
    struct Layout {
      const char* name;
      cublasOperation_t a, b;
    };
    for (const Layout layout : {Layout{"NN", CUBLAS_OP_N, CUBLAS_OP_N},
                                Layout{"NT", CUBLAS_OP_N, CUBLAS_OP_T},
                                Layout{"TN", CUBLAS_OP_T, CUBLAS_OP_N}}) {
      Row row;
      row.section = "reference";
      row.name = std::string("cublasGemmEx ") + (bf16 ? "bf16 " : "tf32 ") + layout.name;
      row.shape = "8192x8192x8192 " + std::string(mt::name(dtype));
      row.work = 2.0 * n * double(n) * n;
      const Row& r = run(row, [&]() -> std::function<void()> {
        Tensor a = in_.random({kSquare, kSquare}, dtype);
        Tensor b = in_.random({kSquare, kSquare}, dtype);
        Tensor c = in_.zeros({kSquare, kSquare}, dtype);
        return [handle, layout, type, compute, a, b, c]() {
          constexpr int n = kSquare;
          const float alpha = 1.0f, beta = 0.0f;
          check_cublas(cublasGemmEx(handle, layout.a, layout.b, n, n, n, &alpha, a.raw(), type, n,
                                    b.raw(), type, n, &beta, c.raw(), type, n, compute,
                                    CUBLAS_GEMM_DEFAULT),
                       "cublasGemmEx");
        };
      }, 1e12);
      if (r.error.empty() && !(r.rate <= best)) best = r.rate;
      if (!r.error.empty()) {
        std::printf("%s FAILED: %s\n", r.name.c_str(), r.error.c_str());
      } else {
        std::printf("  %s: %.1f TFLOP/s\n", r.name.c_str(), r.rate);
      }
    }
    return best;
  }

  // --- memory-bound kernels ------------------------------------------------------------------

  void kernel_section() {
    std::printf("\n== Kernels (bytes = reads + writes of the tensors; %lld tokens) ==\n",
                static_cast<long long>(kTokens));
    copy_reference();
    std::printf("%-24s %-30s %9s %9s %9s %8s  %s\n", "op", "shape", "MB", "ms", "GB/s", "vs copy",
                "bytes counted");
    for (const ops::TimingCase& c : ops::timing_op_cases()) kernel(c);
  }

  // One timing case through the harness's timer; the row keeps gpu_bench's name for it, so that
  // the JSON compares with earlier runs.
  void kernel(const ops::TimingCase& c) {
    Row row;
    row.section = "kernels";
    row.name = c.label;
    row.shape = c.shape;
    row.formula = c.bytes_formula;
    row.work = c.bytes;
    const ops::TimerOptions timer{.warmup = o_.warmup, .reps = o_.reps, .budget_ms = o_.budget_ms};
    Row& r = record(row, [&] { return ops::time_op(be_, c.make(be_, kKernelSeed), timer); }, 1e9);
    r.ratio = r.rate / copy_peak_;
    if (!r.error.empty()) {
      std::printf("%-24s %-30s FAILED: %s\n", r.name.c_str(), r.shape.c_str(), r.error.c_str());
    } else {
      std::printf("%-24s %-30s %9s %9s %9s %8s  %s\n", r.name.c_str(), r.shape.c_str(),
                  number("%.1f", r.work / 1e6).c_str(), number("%.4f", r.ms).c_str(),
                  number("%.0f", r.rate).c_str(), number("%.2f", r.ratio).c_str(),
                  r.formula.c_str());
    }
    std::fflush(stdout);
  }

  // A 1 GiB device-to-device copy: 2 GiB moved.
  void copy_reference() {
    const int64_t bytes = int64_t(1) << 30;
    Row row;
    row.section = "reference";
    row.name = "cudaMemcpyAsync D2D 1 GiB";
    row.shape = "1 GiB";
    row.formula = "src read + dst written";
    row.work = 2.0 * double(bytes);
    const Row& r = run(row, [&]() -> std::function<void()> {
      Tensor src = in_.random({bytes / 4}, DType::F32), dst = in_.empty({bytes / 4}, DType::F32);
      return [this, src, dst, bytes]() {
        check_cuda(cudaMemcpyAsync(dst.raw(), src.raw(), size_t(bytes), cudaMemcpyDeviceToDevice,
                                   stream_),
                   "cudaMemcpyAsync");
      };
    }, 1e9);
    copy_peak_ = r.rate;
    if (!r.error.empty()) {
      std::printf("copy reference FAILED: %s\n", r.error.c_str());
    } else {
      std::printf("copy peak (cudaMemcpyAsync device-to-device, 1 GiB, read + write counted): "
                  "%s GB/s\n", number("%.0f", copy_peak_).c_str());
    }
    std::fflush(stdout);
  }

  // --- flash attention -----------------------------------------------------------------------

  void attention_section() {
    std::printf("\n== Attention on %s (bf16; FLOPs fwd 4*B*H*S^2*D, halved when causal; bwd "
                "2.5x fwd) ==\n", cuda_.description().c_str());
    std::printf("%-44s %-26s %9s %9s %8s\n", "attention", "qkv", "ms", "TFLOP/s", "vs peak");
    struct Case {
      int64_t batch, seq, heads, groups, head_dim;
      bool causal;
    };
    for (const Case c : {Case{4, 2048, 16, 16, 128, true}, Case{4, 2048, 16, 16, 128, false},
                         Case{4, 4096, 16, 16, 128, true}, Case{4, 2048, 32, 32, 64, true},
                         Case{4, 2048, 32, 8, 128, true}}) {
      mt::AttentionShape s;
      s.batch = c.batch;
      s.seq = c.seq;
      s.heads = c.heads;
      s.groups = c.groups;
      s.head_dim = c.head_dim;
      mt::AttentionOptions ao;
      ao.scale = 1.0f / std::sqrt(float(c.head_dim));
      ao.causal = c.causal;
      ao.dropout = 0.0f;
      std::string label = "B" + std::to_string(c.batch) + " S" + std::to_string(c.seq) + " H" +
                          std::to_string(c.heads);
      if (c.groups != c.heads) label += " G" + std::to_string(c.groups);
      label += " D" + std::to_string(c.head_dim) + (c.causal ? " causal" : " full");
      const double fwd_flops = 4.0 * double(c.batch) * double(c.heads) * double(c.seq) *
                               double(c.seq) * double(c.head_dim) * (c.causal ? 0.5 : 1.0);
      const Shape qkv_shape{c.batch * c.seq, s.qkv_width()};
      const Shape out_shape{c.batch * c.seq, c.heads * c.head_dim};
      const Shape lse_shape{c.batch, c.heads, c.seq};
      attention_row("fwd " + label, shape_text(qkv_shape, DType::Bf16), fwd_flops,
                    [=, this]() -> std::function<void()> {
                      Tensor qkv = in_.random(qkv_shape, DType::Bf16),
                             out = in_.empty(out_shape, DType::Bf16),
                             lse = in_.empty(lse_shape, DType::F32);
                      return [this, qkv, s, ao, out, lse]() mutable {
                        be_.attention_forward(qkv, s, ao, out, lse);
                      };
                    });
      attention_row("bwd " + label, shape_text(qkv_shape, DType::Bf16), 2.5 * fwd_flops,
                    [=, this]() -> std::function<void()> {
                      Tensor qkv = in_.random(qkv_shape, DType::Bf16),
                             out = in_.empty(out_shape, DType::Bf16),
                             lse = in_.empty(lse_shape, DType::F32),
                             dout = in_.random(out_shape, DType::Bf16),
                             dqkv = in_.empty(qkv_shape, DType::Bf16);
                      be_.attention_forward(qkv, s, ao, out, lse);
                      return [this, qkv, out, dout, lse, s, ao, dqkv]() mutable {
                        be_.attention_backward(qkv, out, dout, lse, s, ao, dqkv);
                      };
                    });
    }
  }

  void attention_row(const std::string& name, const std::string& shape, double flops,
                     const std::function<std::function<void()>()>& setup) {
    Row row;
    row.section = "attention";
    row.name = name;
    row.shape = shape;
    row.work = flops;
    Row& r = run(row, setup, 1e12);
    r.ratio = r.rate / bf16_peak_;
    if (!r.error.empty()) {
      std::printf("%-44s %-26s FAILED: %s\n", r.name.c_str(), r.shape.c_str(), r.error.c_str());
    } else {
      std::printf("%-44s %-26s %9s %9s %8s\n", r.name.c_str(), r.shape.c_str(),
                  number("%.3f", r.ms).c_str(), number("%.1f", r.rate).c_str(),
                  number("%.2f", r.ratio).c_str());
    }
    std::fflush(stdout);
  }

  void release() {
    try {
      cuda_.release_cached_memory();
    } catch (const std::exception&) {
    }
  }

 private:
  const Options& o_;
  mt::CudaBackend& cuda_;
  Backend& be_;  // the base class, whose ops have their default arguments
  cudaStream_t stream_;
  Stopwatch watch_;
  Inputs in_;
  std::vector<Row> rows_;
  bool failed_ = false;
  double bf16_peak_ = NAN, tf32_peak_ = NAN, copy_peak_ = NAN;
};

void write_json(const std::string& path, const std::string& device, const Options& o,
                const Bench& bench, double seconds) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error("cannot write " + path);
  out << "{\n  \"device\": " << json_string(device) << ",\n  \"tokens\": " << kTokens
      << ",\n  \"reps\": " << o.reps << ",\n  \"warmup\": " << o.warmup
      << ",\n  \"budget_ms\": " << json_number(o.budget_ms)
      << ",\n  \"seconds\": " << json_number(seconds)
      << ",\n  \"cublas_peak_bf16_tflops\": " << json_number(bench.bf16_peak())
      << ",\n  \"cublas_peak_tf32_tflops\": " << json_number(bench.tf32_peak())
      << ",\n  \"copy_peak_gbps\": " << json_number(bench.copy_peak()) << ",\n  \"rows\": [";
  bool first = true;
  for (const Row& r : bench.rows()) {
    const bool flops = r.section != "kernels" && r.name.rfind("cudaMemcpy", 0) != 0;
    out << (first ? "\n" : ",\n") << "    {\"section\": " << json_string(r.section)
        << ", \"name\": " << json_string(r.name) << ", \"shape\": " << json_string(r.shape);
    if (!r.formula.empty()) out << ", \"bytes_formula\": " << json_string(r.formula);
    out << ", \"" << (flops ? "flops" : "bytes") << "\": " << json_number(r.work)
        << ", \"ms\": " << json_number(r.ms) << ", \"" << (flops ? "tflops" : "gbps")
        << "\": " << json_number(r.rate) << ", \"ratio\": " << json_number(r.ratio)
        << ", \"reps\": " << r.reps;
    if (!r.error.empty()) out << ", \"error\": " << json_string(r.error);
    out << "}";
    first = false;
  }
  out << "\n  ]\n}\n";
  if (!out) throw std::runtime_error("cannot write " + path);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse_args(argc, argv, o)) {
    usage(stderr);
    return 2;
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    count = 0;
  }
  if (count == 0) {
    std::fprintf(stderr, "no CUDA device: nothing to benchmark\n");
    return 3;
  }
  if (o.device >= count) {
    std::fprintf(stderr, "megatron-gpu-bench: device %d does not exist (%d visible)\n", o.device,
                 count);
    return 2;
  }
  const auto started = std::chrono::steady_clock::now();
  try {
    mt::CudaOptions cuda_options;
    cuda_options.device = o.device;
    cuda_options.allow_tf32 = true;
    mt::CudaBackend cuda(cuda_options);
    int driver = 0, runtime = 0, cublas = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    cublasGetProperty(MAJOR_VERSION, &cublas);
    int cublas_minor = 0;
    cublasGetProperty(MINOR_VERSION, &cublas_minor);
    cudaDeviceProp prop{};
    check_cuda(cudaGetDeviceProperties(&prop, o.device), "cudaGetDeviceProperties");
    const std::string device = megatron::kernels::device_description(o.device);
    std::printf("megatron-gpu-bench: %s; %d SMs, L2 %d MiB; driver %d.%d, runtime %d.%d, "
                "cuBLAS %d.%d\n",
                device.c_str(), prop.multiProcessorCount, prop.l2CacheSize >> 20, driver / 1000,
                driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10, cublas, cublas_minor);
    std::printf("timing: median of up to %d calls after %d warm-up (fewer past %.0f ms a row); "
                "GEMM, attention: cudaEvents on the backend's stream; kernels: steady_clock and "
                "a stream synchronisation around each call (the op harness's timer)\n",
                o.reps, o.warmup, o.budget_ms);
    std::fflush(stdout);

    Bench bench(o, cuda);
    // The GEMM peak is the reference of the attention rows too.
    if (o.gemm || o.attention) {
      if (o.gemm) {
        bench.gemm_section();
      } else {
        std::printf("\n== cuBLAS reference ==\n");
        bench.cublas_references();
      }
      bench.release();
    }
    if (o.kernels) {
      bench.kernel_section();
      bench.release();
    }
    if (o.attention) {
      bench.attention_section();
      bench.release();
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::printf("\n%s in %.1f s\n", bench.failed() ? "some rows FAILED" : "all rows measured",
                seconds);
    if (!o.json.empty()) {
      write_json(o.json, device, o, bench, seconds);
      std::printf("wrote %s\n", o.json.c_str());
    }
    return bench.failed() ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "megatron-gpu-bench: error: %s\n", e.what());
    return 1;
  }
}
