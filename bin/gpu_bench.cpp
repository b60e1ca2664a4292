// megatron-gpu-bench: how fast the CUDA backend's GEMMs, kernels and flash attention run on this
// GPU, next to what the GPU can reach: cuBLAS's best on a large bf16 GEMM (compute) and a
// device-to-device copy (memory bandwidth), both measured in the same run.
//
// usage: megatron-gpu-bench [--json FILE] [--only gemm,kernels,attention] [--reps N]
//                           [--warmup N] [--budget-ms MS] [--device N]
//
// Timing: each call is enqueued on the backend's stream between two cudaEvents; `warmup`
// untimed calls first, then the median of up to `reps` timed calls (fewer when `reps` calls
// would take longer than budget-ms). Inputs are random normal (power draw, and so clocks,
// depend on the data a GEMM sees).
//
// Sections:
//   GEMM       gpt-125m and gpt-1.3b training-step shapes at 8 x 2048 tokens in bf16 (forward
//              y = x W^T, data gradient dx = dy W, weight gradient dW += dy^T x into f32), and
//              8192^3 in bf16 and f32 (TF32). TFLOP/s = 2 m n k / time; "vs peak" divides by the
//              best cublasGemmEx (legacy cuBLAS, CUBLAS_COMPUTE_32F, default algorithm) of the
//              NN, NT and TN layouts of an 8192^3 bf16 product (the f32 row: the same with
//              CUBLAS_COMPUTE_32F_FAST_TF32).
//   kernels    every other op on realistic shapes; GB/s = bytes read + written (the formula is
//              printed on each row) / time; "vs copy" divides by a 1 GiB device-to-device
//              cudaMemcpyAsync, counted as 2 GiB moved (read + write), measured first.
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
#include <random>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <vector>

#include "kernels/device.hpp"
#include "tensor/backend.hpp"
#include "tensor/cuda_backend.hpp"

namespace {

namespace mt = megatron::tensor;
using mt::Backend;
using mt::DType;
using mt::Shape;
using mt::Tensor;

constexpr int64_t kTokens = 8 * 2048;  // a micro-batch of 8 sequences of 2048
constexpr int64_t kVocab = 50304;      // GPT-2's 50257 padded to a multiple of 128
constexpr int64_t kGpt125mParams = 125262336;
constexpr int kSquare = 8192;  // the square GEMMs: 8192^3

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

struct Timing {
  double median_ms = NAN;
  int reps = 0;
};

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

  Timing measure(const std::function<void()>& op, int warmup, double budget_ms) {
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
    Timing t;
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
  // n i32 ids uniform in [0, range), the same ones every time for the same n and range.
  static std::vector<int32_t> host_ids(int64_t n, int64_t range) {
    std::mt19937 rng(uint32_t(n + range));
    std::uniform_int_distribution<int32_t> pick(0, int32_t(range - 1));
    std::vector<int32_t> host(size_t(n), 0);
    for (int32_t& v : host) v = pick(rng);
    return host;
  }
  Tensor ids(int64_t n, int64_t range) {
    const std::vector<int32_t> host = host_ids(n, range);
    Tensor x = be_.empty({n}, DType::I32);
    be_.write(x, host.data());
    return x;
  }

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

  // Times the op that `setup` returns (setup allocates its tensors, which the op holds) and
  // records the row, its rate work / time / `scale`; a failure anywhere is recorded, not thrown.
  Row& run(Row row, const std::function<std::function<void()>()>& setup, double scale) {
    try {
      std::function<void()> op = setup();
      const Timing t = watch_.measure(op, o_.warmup, o_.budget_ms);
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
    const int64_t T = kTokens;
    const double e2 = 2.0, e4 = 4.0;  // bytes of bf16, f32 / i32

    {  // LayerNorm at gpt-1.3b's width
      const int64_t H = 2048;
      const double act = double(T) * H * e2;
      kernel("layer_norm fwd", shape_text({T, H}, DType::Bf16),
             "x + y + gamma + beta + mean,rstd f32", 2 * act + 2 * H * e2 + 2 * T * e4,
             [=, this]() -> std::function<void()> {
               Tensor x = in_.random({T, H}, DType::Bf16), gamma = in_.random({H}, DType::Bf16),
                      beta = in_.random({H}, DType::Bf16), y = in_.empty({T, H}, DType::Bf16),
                      mean = in_.empty({T}, DType::F32), rstd = in_.empty({T}, DType::F32);
               return [this, x, gamma, beta, y, mean, rstd]() mutable {
                 be_.layer_norm_forward(x, gamma, beta, 1e-5f, y, mean, rstd);
               };
             });
      kernel("layer_norm bwd", shape_text({T, H}, DType::Bf16),
             "dy + x + dx + gamma + mean,rstd + 2x dgamma,dbeta f32",
             3 * act + H * e2 + 2 * T * e4 + 4 * H * e4, [=, this]() -> std::function<void()> {
               Tensor x = in_.random({T, H}, DType::Bf16), dy = in_.random({T, H}, DType::Bf16),
                      gamma = in_.random({H}, DType::Bf16), beta = in_.random({H}, DType::Bf16),
                      y = in_.empty({T, H}, DType::Bf16), dx = in_.empty({T, H}, DType::Bf16),
                      mean = in_.empty({T}, DType::F32), rstd = in_.empty({T}, DType::F32),
                      dgamma = in_.zeros({H}, DType::F32), dbeta = in_.zeros({H}, DType::F32);
               be_.layer_norm_forward(x, gamma, beta, 1e-5f, y, mean, rstd);
               return [this, dy, x, gamma, mean, rstd, dx, dgamma, dbeta]() mutable {
                 be_.layer_norm_backward(dy, x, gamma, mean, rstd, dx, dgamma, dbeta);
               };
             });
    }
    {  // RMSNorm at llama-7b's width
      const int64_t H = 4096;
      const double act = double(T) * H * e2;
      kernel("rms_norm fwd", shape_text({T, H}, DType::Bf16), "x + y + gamma + rstd f32",
             2 * act + H * e2 + T * e4, [=, this]() -> std::function<void()> {
               Tensor x = in_.random({T, H}, DType::Bf16), gamma = in_.random({H}, DType::Bf16),
                      y = in_.empty({T, H}, DType::Bf16), rstd = in_.empty({T}, DType::F32);
               return [this, x, gamma, y, rstd]() mutable {
                 be_.rms_norm_forward(x, gamma, 1e-5f, y, rstd);
               };
             });
      kernel("rms_norm bwd", shape_text({T, H}, DType::Bf16),
             "dy + x + dx + gamma + rstd f32 + 2x dgamma f32",
             3 * act + H * e2 + T * e4 + 2 * H * e4, [=, this]() -> std::function<void()> {
               Tensor x = in_.random({T, H}, DType::Bf16), dy = in_.random({T, H}, DType::Bf16),
                      gamma = in_.random({H}, DType::Bf16), y = in_.empty({T, H}, DType::Bf16),
                      dx = in_.empty({T, H}, DType::Bf16), rstd = in_.empty({T}, DType::F32),
                      dgamma = in_.zeros({H}, DType::F32);
               be_.rms_norm_forward(x, gamma, 1e-5f, y, rstd);
               return [this, dy, x, gamma, rstd, dx, dgamma]() mutable {
                 be_.rms_norm_backward(dy, x, gamma, rstd, dx, dgamma);
               };
             });
    }
    {  // GeLU on gpt-1.3b's fc1 output
      const int64_t F = 8192;
      const double act = double(T) * F * e2;
      kernel("gelu fwd", shape_text({T, F}, DType::Bf16), "x + y", 2 * act,
             [=, this]() -> std::function<void()> {
               Tensor x = in_.random({T, F}, DType::Bf16), y = in_.empty({T, F}, DType::Bf16);
               return [this, x, y]() mutable { be_.gelu_forward(x, y, false); };
             });
      kernel("gelu bwd", shape_text({T, F}, DType::Bf16), "dy + x + dx", 3 * act,
             [=, this]() -> std::function<void()> {
               Tensor x = in_.random({T, F}, DType::Bf16), dy = in_.random({T, F}, DType::Bf16),
                      dx = in_.empty({T, F}, DType::Bf16);
               return [this, dy, x, dx]() mutable { be_.gelu_backward(dy, x, dx, false); };
             });
    }
    {  // SwiGLU at llama-7b's FFN width
      const int64_t F = 11008;
      const double half = double(T) * F * e2;
      kernel("swiglu fwd", shape_text({T, 2 * F}, DType::Bf16), "x [T,2F] + y [T,F]", 3 * half,
             [=, this]() -> std::function<void()> {
               Tensor x = in_.random({T, 2 * F}, DType::Bf16), y = in_.empty({T, F}, DType::Bf16);
               return [this, x, y]() mutable { be_.swiglu_forward(x, y); };
             });
      kernel("swiglu bwd", shape_text({T, 2 * F}, DType::Bf16), "dy [T,F] + x + dx [T,2F]",
             5 * half, [=, this]() -> std::function<void()> {
               Tensor x = in_.random({T, 2 * F}, DType::Bf16),
                      dy = in_.random({T, F}, DType::Bf16),
                      dx = in_.empty({T, 2 * F}, DType::Bf16);
               return [this, dy, x, dx]() mutable { be_.swiglu_backward(dy, x, dx); };
             });
    }
    {  // biases of gpt-1.3b's fc1
      const int64_t F = 8192;
      const double act = double(T) * F * e2;
      kernel("bias_add", shape_text({T, F}, DType::Bf16), "x read + x written + bias",
             2 * act + F * e2, [=, this]() -> std::function<void()> {
               Tensor x = in_.random({T, F}, DType::Bf16), bias = in_.random({F}, DType::Bf16);
               return [this, x, bias]() mutable { be_.bias_add(x, bias); };
             });
      kernel("bias_grad", shape_text({T, F}, DType::Bf16), "dy + 2x dbias f32", act + 2 * F * e4,
             [=, this]() -> std::function<void()> {
               Tensor dy = in_.random({T, F}, DType::Bf16), dbias = in_.zeros({F}, DType::F32);
               return [this, dy, dbias]() mutable { be_.bias_grad(dy, dbias); };
             });
    }
    {  // the residual connection of gpt-1.3b, hidden dropout 0.1
      const int64_t H = 2048;
      const double act = double(T) * H * e2;
      kernel("dropout_add p=0.1", shape_text({T, H}, DType::Bf16), "x + residual + out", 3 * act,
             [=, this]() -> std::function<void()> {
               Tensor x = in_.random({T, H}, DType::Bf16), res = in_.random({T, H}, DType::Bf16),
                      out = in_.empty({T, H}, DType::Bf16);
               return [this, x, res, out]() mutable {
                 mt::RngKey key;
                 key.seed = 7;
                 key.stream = 3;
                 be_.dropout_add(x, res, out, 0.1f, key);
               };
             });
    }
    {  // master weights to the model's bf16 copy
      const int64_t n = kGpt125mParams;
      kernel("copy f32->bf16", shape_text({n}, DType::F32), "src f32 + dst bf16", n * (e4 + e2),
             [=, this]() -> std::function<void()> {
               Tensor src = in_.random({n}, DType::F32), dst = in_.empty({n}, DType::Bf16);
               return [this, src, dst]() mutable { be_.copy(src, dst); };
             });
    }
    {  // the loss over the padded GPT-2 vocabulary
      const double logits = double(T) * kVocab * e2;
      kernel("cross_entropy fwd", shape_text({T, kVocab}, DType::Bf16),
             "logits + targets i32 + loss,lse f32", logits + 3 * T * e4,
             [=, this]() -> std::function<void()> {
               Tensor x = in_.random({T, kVocab}, DType::Bf16), targets = in_.ids(T, kVocab),
                      loss = in_.empty({T}, DType::F32), lse = in_.empty({T}, DType::F32);
               return [this, x, targets, loss, lse]() mutable {
                 be_.cross_entropy_forward(x, targets, loss, lse, mt::VocabShard{});
               };
             });
      kernel("cross_entropy bwd", shape_text({T, kVocab}, DType::Bf16),
             "logits + targets,lse,dloss + dlogits", 2 * logits + 3 * T * e4,
             [=, this]() -> std::function<void()> {
               Tensor x = in_.random({T, kVocab}, DType::Bf16), targets = in_.ids(T, kVocab),
                      loss = in_.empty({T}, DType::F32), lse = in_.empty({T}, DType::F32),
                      dloss = in_.empty({T}, DType::F32),
                      dx = in_.empty({T, kVocab}, DType::Bf16);
               be_.fill(dloss, 1.0 / double(T));
               be_.cross_entropy_forward(x, targets, loss, lse, mt::VocabShard{});
               return [this, x, targets, lse, dloss, dx]() mutable {
                 be_.cross_entropy_backward(x, targets, lse, dloss, dx, mt::VocabShard{});
               };
             });
    }
    {  // gpt-1.3b's word embedding
      const int64_t H = 2048;
      const double act = double(T) * H * e2;
      kernel("embedding fwd", shape_text({kVocab, H}, DType::Bf16),
             "ids + gathered rows + out", T * e4 + 2 * act, [=, this]() -> std::function<void()> {
               Tensor ids = in_.ids(T, kVocab), table = in_.random({kVocab, H}, DType::Bf16),
                      out = in_.empty({T, H}, DType::Bf16);
               return [this, ids, table, out]() mutable {
                 be_.embedding_forward(ids, table, out, 0, false);
               };
             });
      const std::vector<int32_t> ids = Inputs::host_ids(T, kVocab);  // the ids of the case below
      const auto distinct = int64_t(std::unordered_set<int32_t>(ids.begin(), ids.end()).size());
      kernel("embedding bwd", shape_text({kVocab, H}, DType::F32),
             "ids + dout + 2x touched dtable rows f32 (" + std::to_string(distinct) + ")",
             T * e4 + act + 2.0 * double(distinct) * H * e4, [=, this]() -> std::function<void()> {
               Tensor ids = in_.ids(T, kVocab), dout = in_.random({T, H}, DType::Bf16),
                      dtable = in_.zeros({kVocab, H}, DType::F32);
               return [this, ids, dout, dtable]() mutable {
                 be_.embedding_backward(ids, dout, dtable, 0);
               };
             });
    }
    {  // RoPE on llama-7b's q and k
      mt::AttentionShape s;
      s.batch = 8;
      s.seq = 2048;
      s.heads = 32;
      s.groups = 32;
      s.head_dim = 128;
      const Shape qkv_shape{s.batch * s.seq, s.qkv_width()};
      kernel("rotary", shape_text(qkv_shape, DType::Bf16), "q,k read + written",
             2.0 * double(T) * double(s.heads + s.groups) * double(s.head_dim) * e2,
             [=, this]() -> std::function<void()> {
               Tensor qkv = in_.random(qkv_shape, DType::Bf16);
               mt::RotaryOptions ro;
               ro.rotary_dim = s.head_dim;
               return [this, qkv, s, ro]() mutable { be_.rotary(qkv, s, ro, false); };
             });
    }
    {  // the optimizer over gpt-125m's parameters
      const int64_t n = kGpt125mParams;
      kernel("adamw_update", shape_text({n}, DType::F32),
             "master,grad,m,v read + master,m,v written (f32)", 7.0 * double(n) * e4,
             [=, this]() -> std::function<void()> {
               Tensor master = in_.random({n}, DType::F32, 0.02f),
                      grad = in_.random({n}, DType::F32, 1e-3f), m = in_.zeros({n}, DType::F32),
                      v = in_.zeros({n}, DType::F32);
               return [this, master, grad, m, v]() mutable {
                 be_.adamw_update(master, grad, m, v, adamw_step());
               };
             });
      const std::vector<Shape> shapes = gpt125m_parameter_shapes();
      const std::string many_shape = std::to_string(shapes.size()) + " tensors, " +
                                     std::to_string(n) + " f32";
      kernel("adamw_update_many", many_shape,
             "adamw_update's + bf16 value written", double(n) * (7 * e4 + e2),
             [=, this]() -> std::function<void()> {
               auto params = std::make_shared<std::vector<mt::AdamWParam>>();
               for (const Shape& shape : shapes) {
                 mt::AdamWParam p;
                 p.master = in_.random(shape, DType::F32, 0.02f);
                 p.grad = in_.random(shape, DType::F32, 1e-3f);
                 p.m = in_.zeros(shape, DType::F32);
                 p.v = in_.zeros(shape, DType::F32);
                 p.value = in_.empty(shape, DType::Bf16);
                 p.weight_decay = shape.size() > 1 ? 0.1f : 0.0f;
                 params->push_back(p);
               }
               return [this, params]() {
                 be_.adamw_update_many(std::span<const mt::AdamWParam>(*params), adamw_step());
               };
             });
      kernel("sum_squares", shape_text({n}, DType::F32), "x f32 (includes the host round trip)",
             double(n) * e4, [=, this]() -> std::function<void()> {
               Tensor x = in_.random({n}, DType::F32, 1e-3f);
               return [this, x]() { sink_ += be_.sum_squares(x); };
             });
      kernel("sum_squares_many", many_shape, "x f32 (includes the host round trip)",
             double(n) * e4, [=, this]() -> std::function<void()> {
               auto xs = std::make_shared<std::vector<Tensor>>();
               for (const Shape& shape : shapes) xs->push_back(in_.random(shape, DType::F32, 1e-3f));
               return [this, xs]() {
                 sink_ += be_.sum_squares_many(std::span<const Tensor>(*xs));
               };
             });
    }
  }

  static mt::AdamWStep adamw_step() {
    mt::AdamWStep step;
    step.lr = 1e-4f;
    step.beta1 = 0.9f;
    step.beta2 = 0.95f;
    step.eps = 1e-8f;
    step.weight_decay = 0.1f;
    step.step = 10;
    step.grad_scale = 1.0f;
    return step;
  }

  // gpt-125m's parameters, one tensor each: word and position embeddings, 12 blocks of
  // LayerNorm, QKV, projection, LayerNorm, fc1, fc2 (with biases), the final LayerNorm.
  static std::vector<Shape> gpt125m_parameter_shapes() {
    const int64_t h = 768, f = 3072;
    std::vector<Shape> shapes = {{kVocab, h}, {2048, h}};
    for (int layer = 0; layer < 12; ++layer) {
      for (const Shape& s : std::vector<Shape>{{h}, {h}, {3 * h, h}, {3 * h}, {h, h}, {h}, {h},
                                               {h}, {f, h}, {f}, {h, f}, {h}}) {
        shapes.push_back(s);
      }
    }
    shapes.push_back({h});
    shapes.push_back({h});
    return shapes;
  }

  void kernel(const std::string& name, const std::string& shape, const std::string& formula,
              double bytes, const std::function<std::function<void()>()>& setup) {
    Row row;
    row.section = "kernels";
    row.name = name;
    row.shape = shape;
    row.formula = formula;
    row.work = bytes;
    Row& r = run(row, setup, 1e9);
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
  double sink_ = 0.0;
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
    std::printf("timing: cudaEvents on the backend's stream; median of up to %d calls after %d "
                "warm-up (fewer past %.0f ms a row)\n",
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
