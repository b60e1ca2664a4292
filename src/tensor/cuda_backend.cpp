// CudaBackend: device selection, streams, the stream-ordered caching allocator, host transfers
// and GEMMs; every other op forwards to kernels/ (see kernels/ops.hpp).
#include "tensor/cuda_backend.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "kernels/device.hpp"
#include "kernels/ops.hpp"
#include "tensor/cuda_cudnn_attention.hpp"
#include "tensor/cuda_gemm.hpp"
#include "tensor/make_backend.hpp"

namespace megatron::tensor {
namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    cudaGetLastError();  // cleared, or the next op's launch check would report it again
    throw std::runtime_error(std::string("cuda backend: ") + what + ": " +
                             cudaGetErrorString(status));
  }
}

// cuBLASLt's recommended workspace on Hopper; enough for its split-K algorithms.
constexpr size_t kGemmWorkspaceBytes = size_t{32} << 20;
// Host writes up to this size are staged through pinned memory and return at once (bigger
// ones, weights loaded from a checkpoint, copy directly and wait).
constexpr size_t kPinnedStagingBytes = size_t{4} << 20;

void require_cuda(const Tensor& x, const char* op) {
  if (x.device() != Device::Cuda) {
    throw std::logic_error(std::string("cuda backend: ") + op + ": expected a cuda tensor");
  }
}

int alignment_of(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  int alignment = 16;
  while (alignment > 1 && address % uintptr_t(alignment) != 0) alignment /= 2;
  return alignment;
}

}  // namespace

// Shared with every tensor's deleter, so memory freed after the backend is gone still returns
// to the pool in stream order.
struct DevicePool {
  int device = 0;
  cudaStream_t stream = nullptr;
  cudaMemPool_t pool = nullptr;
  std::atomic<int64_t> allocated{0};
  std::atomic<int64_t> peak{0};
  ~DevicePool() {
    if (stream) {
      cudaStreamSynchronize(stream);
      cudaStreamDestroy(stream);
    }
  }
};

// Page-locked host buffers that host writes are staged through, used in turn: a write waits
// only for the copy out of its slot kStagingSlots writes ago, not for the compute queued since.
constexpr int kStagingSlots = 8;

struct CudaBackend::State {
  CudaOptions options;
  std::shared_ptr<DevicePool> pool = std::make_shared<DevicePool>();
  std::string name;
  kernels::Workspace workspace;
  void* gemm_workspace = nullptr;
  std::unique_ptr<CudaGemm> gemm;
  void* pinned[kStagingSlots] = {};           // kPinnedStagingBytes of page-locked host memory
  cudaEvent_t copied[kStagingSlots] = {};     // recorded after the copy out of each slot
  int next_slot = 0;
  // cuDNN's fused attention for bf16/f16 where it supports the options (null: the flash kernels
  // serve every call; MEGATRON_CUDNN_ATTENTION=0 asks for that).
  std::unique_ptr<CudnnAttention> cudnn;
  cudaStream_t stream() const { return pool->stream; }

  // Also what a constructor that failed halfway leaves: whatever was made is released.
  ~State() {
    if (pool->stream) cudaStreamSynchronize(pool->stream);
    gemm.reset();
    if (gemm_workspace) cudaFree(gemm_workspace);
    for (int i = 0; i < kStagingSlots; ++i) {
      if (copied[i]) cudaEventDestroy(copied[i]);
      if (pinned[i]) cudaFreeHost(pinned[i]);
    }
    cudaGetLastError();  // a failure while tearing down is not the next op's
  }

  // Depends only on what forward and backward both see (qkv and out), so a backward always
  // pairs with the forward that made its statistics and dropout mask.
  bool use_cudnn(const Tensor& qkv, const Tensor& out, const AttentionShape& shape,
                 const AttentionOptions& options) const {
    return cudnn && cudnn_attention_supports(shape, options, qkv.dtype()) &&
           out.dtype() == qkv.dtype() &&
           qkv.numel() == shape.batch * shape.seq * shape.qkv_width() &&
           out.numel() == shape.batch * shape.seq * shape.heads * shape.head_dim &&
           cudnn->ready(shape, options, qkv.dtype());
  }
  bool use_cudnn(const Tensor& q, const Tensor& out, const CrossAttentionShape& shape,
                 const AttentionOptions& options) const {
    return cudnn && cudnn_cross_attention_supports(shape, options, q.dtype()) &&
           out.dtype() == q.dtype() &&
           out.numel() == shape.batch * shape.q_seq * shape.out_width() &&
           cudnn->ready(shape, options, q.dtype());
  }
};

CudaBackend::CudaBackend(CudaOptions options) : state_(std::make_unique<State>()) {
  state_->options = options;
  const int count = kernels::device_count();
  if (count == 0) {
    throw UserError("no CUDA device is visible (no driver or no GPU on this machine); run on the "
                    "cpu with --device cpu (or cluster.device=cpu)");
  }
  if (options.device < 0 || options.device >= count) {
    throw UserError("CUDA device " + std::to_string(options.device) + " does not exist: this "
                    "machine shows " + std::to_string(count) + " (check CUDA_VISIBLE_DEVICES)");
  }
  DevicePool& pool = *state_->pool;
  pool.device = options.device;
  check(cudaSetDevice(options.device), "cudaSetDevice");
  check(cudaStreamCreateWithFlags(&pool.stream, cudaStreamNonBlocking), "stream");
  // The device's default stream-ordered pool, told to keep what it has: after the first step
  // every allocation is served from cached memory, with no cudaMalloc in the step loop.
  check(cudaDeviceGetDefaultMemPool(&pool.pool, options.device), "memory pool");
  uint64_t keep = std::numeric_limits<uint64_t>::max();
  check(cudaMemPoolSetAttribute(pool.pool, cudaMemPoolAttrReleaseThreshold, &keep), "pool");
  check(cudaMalloc(&state_->gemm_workspace, kGemmWorkspaceBytes), "gemm workspace");
  state_->gemm = std::make_unique<CudaGemm>(state_->gemm_workspace, kGemmWorkspaceBytes);
  for (int i = 0; i < kStagingSlots; ++i) {
    check(cudaMallocHost(&state_->pinned[i], kPinnedStagingBytes), "pinned staging buffer");
    check(cudaEventCreateWithFlags(&state_->copied[i], cudaEventDisableTiming), "event");
  }
  std::string attention = "flash attention";
  const char* wanted = std::getenv("MEGATRON_CUDNN_ATTENTION");
  if (!cudnn_attention_built()) {
    attention += " (this build has no cuDNN attention)";
  } else if (!options.cudnn_attention || (wanted && std::string(wanted) == "0")) {
    attention += options.cudnn_attention ? " (MEGATRON_CUDNN_ATTENTION=0)" : "";
  } else {
    try {
      state_->cudnn = std::make_unique<CudnnAttention>(*this, state_->pool->stream);
      attention = "cuDNN " + state_->cudnn->version() + " attention for bf16/f16";
    } catch (const std::exception& e) {
      attention += std::string(" (") + e.what() + ")";
    }
  }
  state_->name = "cuda (" + kernels::device_description(options.device) +
                 (options.allow_tf32 ? ", TF32 allowed" : "") + ", " + attention + ")";
}

CudaBackend::~CudaBackend() = default;

std::string CudaBackend::description() const { return state_->name; }
int CudaBackend::device_index() const { return state_->pool->device; }
void* CudaBackend::stream() const { return state_->stream(); }

int64_t CudaBackend::reserved_bytes() const {
  uint64_t reserved = 0;
  cudaMemPoolGetAttribute(state_->pool->pool, cudaMemPoolAttrReservedMemCurrent, &reserved);
  return int64_t(reserved);
}

int64_t CudaBackend::reserved_high_bytes() const {
  uint64_t high = 0;
  cudaMemPoolGetAttribute(state_->pool->pool, cudaMemPoolAttrReservedMemHigh, &high);
  return int64_t(high);
}

void CudaBackend::release_cached_memory() {
  synchronize();
  cudaMemPoolTrimTo(state_->pool->pool, 0);
}

Tensor CudaBackend::empty(const Shape& shape, DType dtype) {
  const int64_t n = numel(shape);
  const int64_t bytes = n * int64_t(size_of(dtype));
  // At least 256 bytes, so that every tensor has its own 256-byte-aligned address.
  const size_t rounded = std::max<size_t>(256, (size_t(bytes) + 255) / 256 * 256);
  std::shared_ptr<DevicePool> pool = state_->pool;
  void* p = nullptr;
  cudaError_t status = cudaMallocFromPoolAsync(&p, rounded, pool->pool, pool->stream);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    // Cached blocks of other sizes may be enough once returned to the device.
    synchronize();
    cudaMemPoolTrimTo(pool->pool, 0);
    status = cudaMallocFromPoolAsync(&p, rounded, pool->pool, pool->stream);
  }
  if (status != cudaSuccess) {
    cudaGetLastError();
    throw RuntimeFailure("out of GPU memory allocating " + to_string(shape) + " " +
                         std::string(name(dtype)) + " (" + std::to_string(bytes >> 20) +
                         " MiB; " + std::to_string(pool->allocated.load() >> 20) +
                         " MiB in use): lower training.micro_batch_size, enable "
                         "training.recompute, or use more tensor or pipeline parallelism");
  }
  const int64_t now = pool->allocated.fetch_add(bytes) + bytes;
  int64_t peak = pool->peak.load();
  while (now > peak && !pool->peak.compare_exchange_weak(peak, now)) {
  }
  std::shared_ptr<std::byte> buffer(static_cast<std::byte*>(p), [pool, bytes](std::byte* q) {
    pool->allocated.fetch_sub(bytes);
    cudaFreeAsync(q, pool->stream);
  });
  return Tensor(std::move(buffer), 0, shape, dtype, Device::Cuda);
}

MemoryStats CudaBackend::memory() const {
  return {.allocated_bytes = state_->pool->allocated.load(),
          .peak_bytes = state_->pool->peak.load()};
}

void CudaBackend::reset_peak_memory() { state_->pool->peak.store(state_->pool->allocated.load()); }

void CudaBackend::synchronize() { check(cudaStreamSynchronize(state_->stream()), "synchronize"); }

namespace {

// Events are created once and reused after clear(): a profiled step records thousands.
class CudaEventClock final : public OpClock {
 public:
  explicit CudaEventClock(cudaStream_t stream) : stream_(stream) {}
  ~CudaEventClock() override {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }
  CudaEventClock(const CudaEventClock&) = delete;
  CudaEventClock& operator=(const CudaEventClock&) = delete;

  int64_t mark() override {
    if (used_ == events_.size()) {
      cudaEvent_t e = nullptr;
      check(cudaEventCreate(&e), "create a timing event");
      events_.push_back(e);
    }
    check(cudaEventRecord(events_[used_], stream_), "record a timing event");
    return int64_t(used_++);
  }
  double elapsed_ms(int64_t from, int64_t to) override {
    if (from < 0 || to < 0 || size_t(from) >= used_ || size_t(to) >= used_) {
      throw std::out_of_range("cuda event clock: no such mark");
    }
    float ms = 0.0f;
    check(cudaEventElapsedTime(&ms, events_[size_t(from)], events_[size_t(to)]),
          "read a timing event");
    return double(ms);
  }
  void clear() override { used_ = 0; }

 private:
  cudaStream_t stream_;
  std::vector<cudaEvent_t> events_;
  size_t used_ = 0;
};

}  // namespace

std::unique_ptr<OpClock> CudaBackend::make_clock() {
  return std::make_unique<CudaEventClock>(state_->stream());
}

void CudaBackend::fill(Tensor& x, double value) { kernels::fill(state_->stream(), x, value); }
void CudaBackend::copy(const Tensor& src, Tensor& dst) { kernels::copy(state_->stream(), src, dst); }

void CudaBackend::read(const Tensor& x, void* host) {
  require_cuda(x, "read");
  check(cudaMemcpyAsync(host, x.raw(), x.bytes(), cudaMemcpyDeviceToHost, state_->stream()),
        "copy to the host");
  synchronize();
}

void CudaBackend::write(Tensor& x, const void* host) {
  require_cuda(x, "write");
  const size_t bytes = x.bytes();
  if (bytes <= kPinnedStagingBytes) {
    // Through the next pinned slot: the host returns once its bytes are staged, and the copy
    // overlaps with the compute queued before it (a micro-batch's tokens, targets and mask
    // while the last step still runs).
    const int slot = state_->next_slot;
    state_->next_slot = (slot + 1) % kStagingSlots;
    check(cudaEventSynchronize(state_->copied[slot]), "staging buffer");
    std::memcpy(state_->pinned[slot], host, bytes);
    check(cudaMemcpyAsync(x.raw(), state_->pinned[slot], bytes, cudaMemcpyHostToDevice,
                          state_->stream()),
          "copy to the device");
    check(cudaEventRecord(state_->copied[slot], state_->stream()), "event");
    return;
  }
  check(cudaMemcpyAsync(x.raw(), host, bytes, cudaMemcpyHostToDevice, state_->stream()),
        "copy to the device");
  synchronize();
}

namespace {

void require_gemm(bool ok, const std::string& what) {
  if (!ok) throw std::logic_error("cuda backend: gemm: " + what);
}

// The row-major problem of c = op(a) @ op(b) for matrices (rank 2) or batches (rank 3).
GemmKey gemm_key(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c,
                 int rank, bool allow_tf32, float beta) {
  require_gemm(a.rank() == rank && b.rank() == rank && c.rank() == rank,
               "expected rank-" + std::to_string(rank) + " tensors, got " + to_string(a.shape()) +
                   ", " + to_string(b.shape()) + ", " + to_string(c.shape()));
  const int64_t batch = rank == 3 ? a.dim(0) : 1;
  const int64_t m = trans_a ? a.dim(-1) : a.dim(-2);
  const int64_t k = trans_a ? a.dim(-2) : a.dim(-1);
  const int64_t kb = trans_b ? b.dim(-1) : b.dim(-2);
  const int64_t n = trans_b ? b.dim(-2) : b.dim(-1);
  require_gemm(k == kb && c.dim(-2) == m && c.dim(-1) == n &&
                   (rank == 2 || (b.dim(0) == batch && c.dim(0) == batch)),
               "shapes " + to_string(a.shape()) + (trans_a ? "^T" : "") + " @ " +
                   to_string(b.shape()) + (trans_b ? "^T" : "") + " -> " + to_string(c.shape()) +
                   " do not agree");
  require_gemm(a.dtype() == b.dtype() && is_floating(a.dtype()),
               "a and b must share a float dtype");
  require_gemm(c.dtype() == DType::F32 || c.dtype() == a.dtype(),
               "c must be f32 or a's dtype");
  require_gemm(a.device() == Device::Cuda && b.device() == Device::Cuda &&
                   c.device() == Device::Cuda,
               "expected cuda tensors");
  return {.m = m, .n = n, .k = k, .batch = batch, .trans_a = trans_a, .trans_b = trans_b,
          .ab = a.dtype(), .c = c.dtype(), .accumulate = beta != 0.0f, .bias = false,
          .tf32 = allow_tf32,
          .alignment = std::min({alignment_of(a.raw()), alignment_of(b.raw()),
                                 alignment_of(c.raw())})};
}

}  // namespace

// c = beta * c when the product is empty (k == 0); beta 0 overwrites, as BLAS does, so that
// whatever an uninitialised c held (NaN) does not survive.
void CudaBackend::empty_product(Tensor& c, float beta) {
  if (beta == 0.0f) {
    fill(c, 0.0);
  } else {
    scale(c, beta);
  }
}

void CudaBackend::gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c,
                       float alpha, float beta) {
  const GemmKey key = gemm_key(a, trans_a, b, trans_b, c, 2, state_->options.allow_tf32, beta);
  if (key.m == 0 || key.n == 0) return;
  if (key.k == 0) {
    empty_product(c, beta);
    return;
  }
  state_->gemm->run(state_->stream(), key, a.raw(), b.raw(), c.raw(), nullptr, alpha, beta);
}

void CudaBackend::gemm_bias(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                            const Tensor& bias, Tensor& c) {
  GemmKey key = gemm_key(a, trans_a, b, trans_b, c, 2, state_->options.allow_tf32, 0.0f);
  require_gemm(bias.numel() == key.n && bias.dtype() == c.dtype() &&
                   bias.device() == Device::Cuda,
               "bias " + to_string(bias.shape()) + " " + std::string(name(bias.dtype())) +
                   " must have c's dtype and its " + std::to_string(key.n) + " columns");
  if (key.m == 0 || key.n == 0) return;
  if (key.k == 0) {
    fill(c, 0.0);
    bias_add(c, bias);
    return;
  }
  key.bias = true;
  key.bias_alignment = alignment_of(bias.raw());
  state_->gemm->run(state_->stream(), key, a.raw(), b.raw(), c.raw(), bias.raw(), 1.0f, 0.0f);
}

// cuBLASLt's GeLU epilogues need an aux matrix of c's dtype with its leading dimension (n) a
// multiple of 8 and 16-byte aligned pointers; anything else runs the ops one after another.
bool epilogue_fits(const GemmKey& key, const Tensor& aux, const Tensor& c, const void* bias) {
  return key.m > 0 && key.n > 0 && key.k > 0 && key.n % 8 == 0 && aux.dtype() == c.dtype() &&
         aux.numel() == c.numel() && aux.device() == Device::Cuda &&
         alignment_of(aux.raw()) == 16 && alignment_of(c.raw()) == 16 &&
         (bias == nullptr || alignment_of(bias) == 16);
}

void CudaBackend::gemm_bias_gelu(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                                 const Tensor& bias, Tensor& pre, Tensor& act) {
  GemmKey key = gemm_key(a, trans_a, b, trans_b, act, 2, state_->options.allow_tf32, 0.0f);
  if (!epilogue_fits(key, pre, act, bias.raw()) || bias.dtype() != act.dtype() ||
      bias.numel() != key.n) {
    Backend::gemm_bias_gelu(a, trans_a, b, trans_b, bias, pre, act);
    return;
  }
  key.epilogue = GemmEpilogue::GeluAuxBias;
  state_->gemm->run(state_->stream(), key, a.raw(), b.raw(), act.raw(), bias.raw(), 1.0f, 0.0f,
                    pre.raw());
}

void CudaBackend::gemm_dgelu_bgrad(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                                   const Tensor& pre, Tensor& dpre, Tensor* dbias) {
  GemmKey key = gemm_key(a, trans_a, b, trans_b, dpre, 2, state_->options.allow_tf32, 0.0f);
  if (!epilogue_fits(key, pre, dpre, nullptr)) {
    Backend::gemm_dgelu_bgrad(a, trans_a, b, trans_b, pre, dpre, dbias);
    return;
  }
  // The epilogue writes the bias gradient in c's dtype; the parameter's gradient accumulates.
  Tensor column_sums = empty({key.n}, dpre.dtype());
  key.epilogue = GemmEpilogue::DGeluBGrad;
  state_->gemm->run(state_->stream(), key, a.raw(), b.raw(), dpre.raw(), column_sums.raw(), 1.0f,
                    0.0f, pre.raw());
  if (dbias) axpy(1.0f, column_sums, *dbias);
}

void CudaBackend::gemm_batched(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                               Tensor& c, float alpha, float beta) {
  const GemmKey key = gemm_key(a, trans_a, b, trans_b, c, 3, state_->options.allow_tf32, beta);
  if (key.batch == 0 || key.m == 0 || key.n == 0) return;
  if (key.k == 0) {
    empty_product(c, beta);
    return;
  }
  state_->gemm->run(state_->stream(), key, a.raw(), b.raw(), c.raw(), nullptr, alpha, beta);
}

// --- everything else runs in kernels/ ---------------------------------------------------------

void CudaBackend::add(const Tensor& a, const Tensor& b, Tensor& out) {
  kernels::add(state_->stream(), a, b, out);
}
void CudaBackend::axpy(float alpha, const Tensor& x, Tensor& y) {
  kernels::axpy(state_->stream(), alpha, x, y);
}
void CudaBackend::scale(Tensor& x, float alpha) { kernels::scale(state_->stream(), x, alpha); }
void CudaBackend::bias_add(Tensor& x, const Tensor& bias) {
  kernels::bias_add(state_->stream(), x, bias);
}
void CudaBackend::bias_grad(const Tensor& dy, Tensor& dbias) {
  kernels::bias_grad(state_->stream(), state_->workspace, dy, dbias);
}

void CudaBackend::gelu_forward(const Tensor& x, Tensor& y, bool tanh_approx) {
  kernels::gelu_forward(state_->stream(), x, y, tanh_approx);
}
void CudaBackend::gelu_backward(const Tensor& dy, const Tensor& x, Tensor& dx, bool tanh_approx) {
  kernels::gelu_backward(state_->stream(), dy, x, dx, tanh_approx);
}
void CudaBackend::swiglu_forward(const Tensor& x, Tensor& y) {
  kernels::swiglu_forward(state_->stream(), x, y);
}
void CudaBackend::swiglu_backward(const Tensor& dy, const Tensor& x, Tensor& dx) {
  kernels::swiglu_backward(state_->stream(), dy, x, dx);
}
void CudaBackend::geglu_forward(const Tensor& x, Tensor& y) {
  kernels::geglu_forward(state_->stream(), x, y);
}
void CudaBackend::geglu_backward(const Tensor& dy, const Tensor& x, Tensor& dx) {
  kernels::geglu_backward(state_->stream(), dy, x, dx);
}

void CudaBackend::dropout_forward(const Tensor& x, Tensor& y, float p, RngKey key) {
  kernels::dropout_forward(state_->stream(), x, y, p, key);
}
void CudaBackend::dropout_backward(const Tensor& dy, Tensor& dx, float p, RngKey key) {
  kernels::dropout_backward(state_->stream(), dy, dx, p, key);
}
void CudaBackend::dropout_add(const Tensor& x, const Tensor& residual, Tensor& out, float p,
                              RngKey key) {
  kernels::dropout_add(state_->stream(), x, residual, out, p, key);
}

void CudaBackend::bias_dropout_add(Tensor& x, const Tensor& bias, const Tensor& residual,
                                   Tensor& out, float p, RngKey key) {
  kernels::bias_dropout_add(state_->stream(), x, bias, residual, out, p, key);
}

void CudaBackend::layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                     float eps, Tensor& y, Tensor& mean, Tensor& rstd) {
  kernels::layer_norm_forward(state_->stream(), x, gamma, beta, eps, y, mean, rstd);
}
void CudaBackend::layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                      const Tensor& mean, const Tensor& rstd, Tensor& dx,
                                      Tensor& dgamma, Tensor& dbeta) {
  kernels::layer_norm_backward(state_->stream(), state_->workspace, dy, x, gamma, mean, rstd, dx,
                               dgamma, dbeta);
}
void CudaBackend::rms_norm_forward(const Tensor& x, const Tensor& gamma, float eps, Tensor& y,
                                   Tensor& rstd) {
  kernels::rms_norm_forward(state_->stream(), x, gamma, eps, y, rstd);
}
void CudaBackend::rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                    const Tensor& rstd, Tensor& dx, Tensor& dgamma) {
  kernels::rms_norm_backward(state_->stream(), state_->workspace, dy, x, gamma, rstd, dx, dgamma);
}
void CudaBackend::qk_norm_forward(const Tensor& qkv, const AttentionShape& shape,
                                  const Tensor& q_gamma, const Tensor& k_gamma, float eps,
                                  Tensor& out, Tensor& rstd) {
  kernels::qk_norm_forward(state_->stream(), qkv, shape, q_gamma, k_gamma, eps, out, rstd);
}
void CudaBackend::qk_norm_backward(const Tensor& dout, const Tensor& qkv,
                                   const AttentionShape& shape, const Tensor& q_gamma,
                                   const Tensor& k_gamma, const Tensor& rstd, Tensor& dqkv,
                                   Tensor& dq_gamma, Tensor& dk_gamma) {
  kernels::qk_norm_backward(state_->stream(), state_->workspace, dout, qkv, shape, q_gamma,
                            k_gamma, rstd, dqkv, dq_gamma, dk_gamma);
}

void CudaBackend::embedding_forward(const Tensor& ids, const Tensor& table, Tensor& out,
                                    int64_t row_offset, bool accumulate) {
  kernels::embedding_forward(state_->stream(), ids, table, out, row_offset, accumulate);
}
void CudaBackend::embedding_backward(const Tensor& ids, const Tensor& dout, Tensor& dtable,
                                     int64_t row_offset) {
  kernels::embedding_backward(state_->stream(), state_->workspace, ids, dout, dtable, row_offset);
}

void CudaBackend::rotary(Tensor& qkv, const AttentionShape& shape, const RotaryOptions& options,
                         bool inverse) {
  kernels::rotary(state_->stream(), qkv, shape, options, inverse);
}
namespace {

// The flash kernels are compiled for these head dims. A smaller head dim (gpt-tiny's 8) runs
// zero-padded to the next one: zero columns add nothing to q.k, and the output columns that
// padded V produces are dropped. The caller's scale (1/sqrt of the real head dim) is kept.
int64_t kernel_head_dim(int64_t d) {
  for (const int64_t k : kCudaAttentionHeadDims)
    if (d <= k) return k;
  return d;  // the kernels' own error names what is supported
}

// `x` as rows of `d`-element segments, copied into `padded` as rows of `D` (zeros after).
void pad_segments(cudaStream_t stream, const Tensor& x, int64_t d, Tensor& padded, int64_t D) {
  const size_t element = tensor::size_of(x.dtype());
  const size_t rows = size_t(x.numel() / d);
  check(cudaMemsetAsync(padded.raw(), 0, padded.bytes(), stream), "attention: pad");
  check(cudaMemcpy2DAsync(padded.raw(), D * element, x.raw(), d * element, d * element, rows,
                          cudaMemcpyDeviceToDevice, stream),
        "attention: pad");
}

// The reverse: the first `d` elements of each `D`-element row of `padded` into `x`.
void unpad_segments(cudaStream_t stream, const Tensor& padded, int64_t D, Tensor& x, int64_t d) {
  const size_t element = tensor::size_of(x.dtype());
  const size_t rows = size_t(x.numel() / d);
  check(cudaMemcpy2DAsync(x.raw(), d * element, padded.raw(), D * element, d * element, rows,
                          cudaMemcpyDeviceToDevice, stream),
        "attention: unpad");
}

}  // namespace

void CudaBackend::attention_forward(const Tensor& qkv, const AttentionShape& shape,
                                    const AttentionOptions& options, Tensor& out, Tensor& lse) {
  if (state_->use_cudnn(qkv, out, shape, options)) {
    state_->cudnn->forward(qkv, shape, options, out, lse);
    return;
  }
  const int64_t d = shape.head_dim, D = kernel_head_dim(d);
  if (D == d || qkv.numel() != shape.batch * shape.seq * shape.qkv_width() ||
      out.numel() != shape.batch * shape.seq * shape.heads * d) {
    kernels::attention_forward(state_->stream(), qkv, shape, options, out, lse);
    return;
  }
  AttentionShape wide = shape;
  wide.head_dim = D;
  Tensor qkv_wide = empty({qkv.numel() / d * D}, qkv.dtype());
  Tensor out_wide = empty({out.numel() / d * D}, out.dtype());
  pad_segments(state_->stream(), qkv, d, qkv_wide, D);
  kernels::attention_forward(state_->stream(), qkv_wide, wide, options, out_wide, lse);
  unpad_segments(state_->stream(), out_wide, D, out, d);
}
void CudaBackend::attention_backward(const Tensor& qkv, const Tensor& out, const Tensor& dout,
                                     const Tensor& lse, const AttentionShape& shape,
                                     const AttentionOptions& options, Tensor& dqkv) {
  // The same choice as the forward's (it depends on nothing else), so the statistics match.
  if (state_->use_cudnn(qkv, out, shape, options)) {
    if (dout.dtype() == qkv.dtype() && dqkv.dtype() == qkv.dtype()) {
      state_->cudnn->backward(qkv, out, dout, lse, shape, options, dqkv);
      return;
    }
    // cuDNN reads and writes the activations' dtype: convert around it.
    Tensor dout_same = empty(dout.shape(), qkv.dtype());
    Tensor dqkv_same = empty(dqkv.shape(), qkv.dtype());
    copy(dout, dout_same);
    state_->cudnn->backward(qkv, out, dout_same, lse, shape, options, dqkv_same);
    copy(dqkv_same, dqkv);
    return;
  }
  const int64_t d = shape.head_dim, D = kernel_head_dim(d);
  const int64_t out_numel = shape.batch * shape.seq * shape.heads * d;
  if (D == d || qkv.numel() != shape.batch * shape.seq * shape.qkv_width() ||
      dqkv.numel() != qkv.numel() || out.numel() != out_numel || dout.numel() != out_numel) {
    kernels::attention_backward(state_->stream(), state_->workspace, qkv, out, dout, lse, shape,
                                options, dqkv);
    return;
  }
  AttentionShape wide = shape;
  wide.head_dim = D;
  Tensor qkv_wide = empty({qkv.numel() / d * D}, qkv.dtype());
  Tensor out_wide = empty({out_numel / d * D}, out.dtype());
  Tensor dout_wide = empty({out_numel / d * D}, dout.dtype());
  Tensor dqkv_wide = empty({qkv.numel() / d * D}, dqkv.dtype());
  pad_segments(state_->stream(), qkv, d, qkv_wide, D);
  pad_segments(state_->stream(), out, d, out_wide, D);
  pad_segments(state_->stream(), dout, d, dout_wide, D);
  kernels::attention_backward(state_->stream(), state_->workspace, qkv_wide, out_wide, dout_wide,
                              lse, wide, options, dqkv_wide);
  unpad_segments(state_->stream(), dqkv_wide, D, dqkv, d);
}

void CudaBackend::attention_cached(const Tensor& qkv, const AttentionShape& shape, int64_t start,
                                   float scale, Tensor& k_cache, Tensor& v_cache, Tensor& out) {
  kernels::attention_cache_append(state_->stream(), qkv, shape, start, k_cache, v_cache);
  if (start == 0) {
    Tensor lse = empty({shape.batch, shape.heads, shape.seq}, tensor::DType::F32);
    attention_forward(qkv, shape, {.scale = scale, .causal = true}, out, lse);
    return;
  }
  kernels::attention_decode(state_->stream(), qkv, shape, start, scale, k_cache, v_cache, out);
}

void CudaBackend::attention_paged(const Tensor& qkv, const AttentionShape& shape,
                                  const Tensor& positions, const Tensor& block_tables, float scale,
                                  Tensor& k_pool, Tensor& v_pool, Tensor& out) {
  kernels::attention_paged(state_->stream(), qkv, shape, positions, block_tables, scale, k_pool,
                           v_pool, out);
}

void CudaBackend::cross_attention_forward(const Tensor& q, const Tensor& kv,
                                          const CrossAttentionShape& shape,
                                          const AttentionOptions& options, Tensor& out,
                                          Tensor& lse) {
  if (state_->use_cudnn(q, out, shape, options)) {
    state_->cudnn->cross_forward(q, kv, shape, options, out, lse);
    return;
  }
  kernels::cross_attention_forward(state_->stream(), q, kv, shape, options, out, lse);
}
void CudaBackend::cross_attention_backward(const Tensor& q, const Tensor& kv, const Tensor& out,
                                           const Tensor& dout, const Tensor& lse,
                                           const CrossAttentionShape& shape,
                                           const AttentionOptions& options, Tensor& dq, Tensor& dkv,
                                           Tensor* dbias) {
  if (state_->use_cudnn(q, out, shape, options) && dq.dtype() == q.dtype() &&
      dkv.dtype() == q.dtype() && dout.dtype() == q.dtype()) {
    state_->cudnn->cross_backward(q, kv, out, dout, lse, shape, options, dq, dkv, dbias);
    return;
  }
  kernels::cross_attention_backward(state_->stream(), state_->workspace, q, kv, out, dout, lse,
                                    shape, options, dq, dkv, dbias);
}

void CudaBackend::cross_entropy_forward(const Tensor& logits, const Tensor& targets, Tensor& loss,
                                        Tensor& lse, VocabShard shard) {
  kernels::cross_entropy_forward(state_->stream(), logits, targets, loss, lse, shard);
}
void CudaBackend::cross_entropy_backward(const Tensor& logits, const Tensor& targets,
                                         const Tensor& lse, const Tensor& dloss, Tensor& dlogits,
                                         VocabShard shard) {
  kernels::cross_entropy_backward(state_->stream(), logits, targets, lse, dloss, dlogits, shard);
}

double CudaBackend::sum(const Tensor& x) {
  return kernels::sum(state_->stream(), state_->workspace, x);
}
double CudaBackend::dot(const Tensor& a, const Tensor& b) {
  return kernels::dot(state_->stream(), state_->workspace, a, b);
}
double CudaBackend::sum_squares(const Tensor& x) {
  return kernels::sum_squares(state_->stream(), state_->workspace, x);
}
bool CudaBackend::all_finite(const Tensor& x) {
  return kernels::all_finite(state_->stream(), state_->workspace, x);
}

double CudaBackend::sum_squares_many(std::span<const Tensor> xs) {
  return kernels::sum_squares_many(state_->stream(), state_->workspace, xs);
}

void CudaBackend::normal(Tensor& x, float mean, float std, RngKey key) {
  kernels::normal(state_->stream(), x, mean, std, key);
}
void CudaBackend::adamw_update(Tensor& master, const Tensor& grad, Tensor& m, Tensor& v,
                               const AdamWStep& step) {
  kernels::adamw_update(state_->stream(), master, grad, m, v, step);
}
void CudaBackend::sgd_update(Tensor& master, const Tensor& grad, Tensor& momentum,
                             const SgdStep& step) {
  kernels::sgd_update(state_->stream(), master, grad, momentum, step);
}

void CudaBackend::adamw_update_many(std::span<const AdamWParam> params, const AdamWStep& step) {
  kernels::adamw_update_many(state_->stream(), params, step);
}

}  // namespace megatron::tensor
