// CpuBackend attention: rotary position embeddings and flash attention (forward and backward)
// over Megatron's fused QKV rows.
//
// Each (batch, head) of the forward, and each (batch, key/value group) of the backward, is one
// unit of work that a single thread computes start to finish in a fixed order, so results are
// bitwise the same on any number of threads. A unit copies its heads into f32 scratch padded to
// whole blocks (rows) and whole vectors (channels), so the block products below need no edge
// cases; the scratch is O(seq * head_dim), plus one or two kBlock x kBlock score blocks.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <vector>

#include "tensor/rotary_frequencies.hpp"
#include "tensor/cpu_backend.hpp"
#include "tensor/cpu_dispatch.hpp"
#include "tensor/cpu_fast_exp.hpp"
#include "tensor/cpu_uniforms.hpp"

namespace megatron::tensor {
namespace {

// Query and key rows per block: a 64 x 64 f32 score block (16 KiB) stays in L1 next to the
// head_dim-wide blocks it multiplies.
constexpr int64_t kBlock = 64;
static_assert(kBlock <= cpu::kMaxUniforms, "a row block's dropout uniforms are drawn in one run");

// The block products hold a 4-row by kTileVecs-vector tile of the result in registers.
#if defined(__AVX512F__)
constexpr int kLanes = 16;
constexpr int kTileVecs = 4;
#elif defined(__AVX__)
constexpr int kLanes = 8;
constexpr int kTileVecs = 2;
#else
constexpr int kLanes = 4;
constexpr int kTileVecs = 2;
#endif
constexpr int kTileRows = 4;
using Vec = float __attribute__((vector_size(kLanes * sizeof(float))));

int64_t round_up(int64_t x, int64_t multiple) { return (x + multiple - 1) / multiple * multiple; }

struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<float[], FreeDeleter>;

// Zeroed, 64-byte aligned: whole cache lines for the vector loads.
Buffer zeroed_floats(int64_t n) {
  const size_t bytes = static_cast<size_t>(round_up(std::max<int64_t>(n, 1) * 4, 64));
  auto* p = static_cast<float*>(std::aligned_alloc(64, bytes));
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, bytes);
  return Buffer(p);
}

// c (+)= a @ b for one kTileRows x (vecs * kLanes) tile, a read as a(m, k) = a[m * a_rs + k *
// a_cs] so that either operand order of a score block can be used without transposing it.
template <int kVecs>
void product_tile(int64_t k_size, const float* a, int64_t a_rs, int64_t a_cs, const float* b,
                  int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  // Fully unrolled so that the accumulators become registers rather than a stack array.
  Vec acc[kTileRows][kVecs];
#pragma GCC unroll 4
  for (int r = 0; r < kTileRows; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < kVecs; ++v) {
      if (accumulate) {
        std::memcpy(&acc[r][v], c + r * ldc + v * kLanes, sizeof(Vec));
      } else {
        acc[r][v] = Vec{};
      }
    }
  for (int64_t k = 0; k < k_size; ++k) {
    Vec row[kVecs];
#pragma GCC unroll 4
    for (int v = 0; v < kVecs; ++v) std::memcpy(&row[v], b + k * ldb + v * kLanes, sizeof(Vec));
#pragma GCC unroll 4
    for (int r = 0; r < kTileRows; ++r) {
      const float s = a[r * a_rs + k * a_cs];
#pragma GCC unroll 4
      for (int v = 0; v < kVecs; ++v) acc[r][v] += s * row[v];
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < kTileRows; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < kVecs; ++v) std::memcpy(c + r * ldc + v * kLanes, &acc[r][v], sizeof(Vec));
}

// c [m, n] (+)= a [m, k] @ b [k, n] with m a multiple of kTileRows and n of kLanes (the scratch
// is padded so). Always the same order of operations for an element: deterministic.
void block_product(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_rs, int64_t a_cs,
                   const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  for (int64_t n0 = 0; n0 < n; n0 += kTileVecs * kLanes) {
    const int64_t vecs = std::min<int64_t>(kTileVecs, (n - n0) / kLanes);
    for (int64_t m0 = 0; m0 < m; m0 += kTileRows) {
      const float* at = a + m0 * a_rs;
      float* ct = c + m0 * ldc + n0;
      switch (vecs) {
        case 1:
          product_tile<1>(k, at, a_rs, a_cs, b + n0, ldb, ct, ldc, accumulate);
          break;
        case 2:
          product_tile<2>(k, at, a_rs, a_cs, b + n0, ldb, ct, ldc, accumulate);
          break;
#if defined(__AVX512F__)
        case 3:
          product_tile<3>(k, at, a_rs, a_cs, b + n0, ldb, ct, ldc, accumulate);
          break;
        case 4:
          product_tile<4>(k, at, a_rs, a_cs, b + n0, ldb, ct, ldc, accumulate);
          break;
#endif
        default:
          break;
      }
    }
  }
}

struct Layout {
  int64_t batch, seq, heads, groups, dim;
  int64_t per_group;  // query heads per key/value group
  int64_t width;      // of a qkv row
  int64_t seq_pad;    // seq rounded up to whole blocks
  int64_t dim_pad;    // head_dim rounded up to whole vectors
  int64_t blocks;
  AttentionShape shape;

  explicit Layout(const AttentionShape& s)
      : batch(s.batch),
        seq(s.seq),
        heads(s.heads),
        groups(s.groups),
        dim(s.head_dim),
        per_group(s.heads / s.groups),
        width(s.qkv_width()),
        seq_pad(round_up(s.seq, kBlock)),
        dim_pad(round_up(s.head_dim, kLanes)),
        blocks(seq_pad / kBlock),
        shape(s) {}

  int64_t query_column(int64_t head) const { return shape.query_column(head); }
  int64_t key_column(int64_t group) const { return shape.key_column(group); }
  int64_t value_column(int64_t group) const { return shape.value_column(group); }
  // Columns [lo, hi) of the block starting at key j0 that query row i attends to, when the
  // sequence's first `keys` keys are and the row's document starts at key `first` (empty for
  // rows past the sequence).
  struct Columns {
    int64_t lo = 0, hi = 0;
  };
  Columns valid_columns(int64_t i, int64_t j0, bool causal, int64_t keys, int64_t first) const {
    if (i >= seq) return {};
    const int64_t end = std::min(causal ? i + 1 : seq, keys);
    const int64_t hi = std::clamp<int64_t>(end - j0, 0, kBlock);
    return {std::clamp<int64_t>(first - j0, 0, hi), hi};
  }
  // Key blocks query block qb reads: through the diagonal when causal, and none past `keys`.
  int64_t key_blocks(int64_t qb, bool causal, int64_t keys) const {
    return std::min(causal ? qb + 1 : blocks, (keys + kBlock - 1) / kBlock);
  }
};

// Where each query row's document starts (AttentionOptions::first_keys): all zero without
// packed documents.
struct FirstKeys {
  const int64_t* row = nullptr;  // the sequence's first entry; null: every row starts at 0
  int64_t operator()(int64_t i, int64_t seq) const { return row && i < seq ? row[i] : 0; }
  // The first key block any row of query block qb reads (entries never decrease along a row).
  int64_t first_block(int64_t qb, int64_t seq) const {
    return (*this)(std::min(qb * kBlock, seq - 1), seq) / kBlock;
  }
};

FirstKeys first_keys_of(const AttentionOptions& o, const AttentionShape& s, int64_t b) {
  return {o.first_keys.empty() ? nullptr : o.first_keys.data() + b * s.seq};
}

void check_shape(const AttentionShape& s, const char* op) {
  cpu::require(s.batch >= 0 && s.seq >= 0 && s.head_dim > 0 && s.groups > 0 && s.heads > 0 &&
                   s.heads % s.groups == 0,
               op, "bad shape (heads must be a positive multiple of groups)");
}

void check_key_lengths(const AttentionShape& s, const AttentionOptions& o, const char* op) {
  if (o.key_lengths.empty()) return;
  cpu::require(int64_t(o.key_lengths.size()) == s.batch, op,
               "key_lengths has " + std::to_string(o.key_lengths.size()) +
                   " entries for a batch of " + std::to_string(s.batch));
  for (const int64_t keys : o.key_lengths)
    cpu::require(keys >= 1 && keys <= s.seq, op,
                 "a key length of " + std::to_string(keys) + " is outside 1.." +
                     std::to_string(s.seq));
}

int64_t keys_of(const AttentionOptions& o, const AttentionShape& s, int64_t b) {
  return o.key_lengths.empty() ? s.seq : o.key_lengths[size_t(b)];
}

void check_first_keys(const AttentionShape& s, const AttentionOptions& o, const char* op) {
  if (o.first_keys.empty()) return;
  cpu::require(int64_t(o.first_keys.size()) == s.batch * s.seq, op,
               "first_keys has " + std::to_string(o.first_keys.size()) + " entries for " +
                   std::to_string(s.batch * s.seq) + " query rows");
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t i = 0; i < s.seq; ++i) {
      const int64_t first = o.first_keys[size_t(b * s.seq + i)];
      const int64_t before = i == 0 ? 0 : o.first_keys[size_t(b * s.seq + i - 1)];
      cpu::require(first >= before && first <= i, op,
                   "first_keys of row " + std::to_string(i) + " of sequence " + std::to_string(b) +
                       " is " + std::to_string(first) +
                       ": each must lie in 0..row and never decrease along a sequence");
    }
  }
}

// Asks for row t + kAhead of a head's slice while row t is copied: rows are a whole qkv row
// apart, a new page each, which the hardware prefetchers do not follow.
constexpr int64_t kAhead = 8;

template <typename T>
void prefetch_row(const T* row, int64_t dim) {
  for (int64_t d = 0; d < dim; d += 64 / static_cast<int64_t>(sizeof(T))) {
    __builtin_prefetch(row + d);
  }
}

// dst[t * ld + d] (or dst[d * ld + t] transposed) = x[row0 + t, column + d] for t < seq,
// d < dim; the padding of dst is left as it is (zero).
void gather(const Tensor& x, int64_t row0, int64_t width, int64_t column, int64_t seq, int64_t dim,
            float* dst, int64_t ld, bool transposed) {
  cpu::with_floats(x, [&](const auto* p) {
    const auto* src = p + row0 * width + column;
    for (int64_t t = 0; t < std::min(seq, kAhead); ++t) prefetch_row(src + t * width, dim);
    if (!transposed) {
      for (int64_t t = 0; t < seq; ++t) {
        if (t + kAhead < seq) prefetch_row(src + (t + kAhead) * width, dim);
        for (int64_t d = 0; d < dim; ++d) dst[t * ld + d] = cpu::load(src + t * width, d);
      }
      return;
    }
    // A cache line of dst at a time: column by column, its rows are ld floats apart and would
    // evict one another.
    constexpr int64_t kTile = 16;
    for (int64_t t0 = 0; t0 < seq; t0 += kTile) {
      const int64_t t1 = std::min(seq, t0 + kTile);
      for (int64_t t = t0 + kAhead; t < std::min(seq, t1 + kAhead); ++t) {
        prefetch_row(src + t * width, dim);
      }
      for (int64_t d = 0; d < dim; ++d)
        for (int64_t t = t0; t < t1; ++t) dst[d * ld + t] = cpu::load(src + t * width, d);
    }
  });
}

void scatter(const float* src, int64_t ld, int64_t seq, int64_t dim, Tensor& x, int64_t row0,
             int64_t width, int64_t column) {
  cpu::with_floats(x, [&](auto* p) {
    for (int64_t t = 0; t < seq; ++t) {
      auto* out = p + (row0 + t) * width + column;
      for (int64_t d = 0; d < dim; ++d) cpu::store(out, d, src[t * ld + d]);
    }
  });
}

// Dropout on probabilities: element index ((b * heads + h) * seq + i) * seq + j.
struct Dropout {
  float p = 0.0f;
  float keep_scale = 1.0f;
  RngKey key;
  uint64_t head_base = 0;  // (b * heads + h) * seq * seq
  int64_t seq = 0;

  bool on() const { return p > 0.0f; }
  // factor[c] = keep_scale or 0 for the first n columns j0.. of row i.
  void factors(int64_t i, int64_t j0, int64_t n, float* factor) const {
    const uint64_t first = head_base + static_cast<uint64_t>(i * seq + j0);
    cpu::block_uniforms(key, first, n, factor);
#pragma omp simd
    for (int64_t c = 0; c < n; ++c) factor[c] = factor[c] >= p ? keep_scale : 0.0f;
  }
};

// Where head h of batch b starts in the probabilities' element numbering (AttentionOptions).
uint64_t head_base(const AttentionOptions& options, const Layout& l, int64_t b, int64_t h) {
  const int64_t total = options.total_heads > 0 ? options.total_heads : l.heads;
  return static_cast<uint64_t>((b * total + options.head_offset + h) * l.seq * l.seq);
}

struct ForwardScratch {
  Buffer q, kt, v, o, s;
  explicit ForwardScratch(const Layout& l)
      : q(zeroed_floats(l.seq_pad * l.dim_pad)),
        kt(zeroed_floats(l.dim_pad * l.seq_pad)),
        v(zeroed_floats(l.seq_pad * l.dim_pad)),
        o(zeroed_floats(l.seq_pad * l.dim_pad)),
        s(zeroed_floats(kBlock * kBlock)) {}
};

// One head: o = softmax(scale * q k^T) v (rows normalised) and lse [seq], by query blocks with
// an online softmax over key blocks.
void forward_head(const Layout& l, const AttentionOptions& options, int64_t keys,
                  const FirstKeys& first, const Dropout& dropout, ForwardScratch& ws, float* lse) {
  const int64_t dp = l.dim_pad;
  const float scale = options.scale;
  float* s = ws.s.get();
  float row_max[kBlock], row_sum[kBlock], factor[kBlock];
  for (int64_t qb = 0; qb < l.blocks; ++qb) {
    const int64_t i0 = qb * kBlock;
    float* o = ws.o.get() + i0 * dp;
    std::fill(o, o + kBlock * dp, 0.0f);
    std::fill(row_max, row_max + kBlock, -std::numeric_limits<float>::infinity());
    std::fill(row_sum, row_sum + kBlock, 0.0f);
    // Causal: key blocks past the diagonal one are fully masked; so are those past the keys.
    // and blocks wholly before the documents of the block's rows.
    const int64_t kb_end = l.key_blocks(qb, options.causal, keys);
    for (int64_t kb = first.first_block(qb, l.seq); kb < kb_end; ++kb) {
      const int64_t j0 = kb * kBlock;
      block_product(kBlock, kBlock, dp, ws.q.get() + i0 * dp, dp, 1, ws.kt.get() + j0, l.seq_pad, s,
                    kBlock, false);
      for (int64_t r = 0; r < kBlock; ++r) {
        float* srow = s + r * kBlock;
        // Plain variables, not structured bindings: clang cannot use those in OpenMP regions.
        const Layout::Columns columns =
            l.valid_columns(i0 + r, j0, options.causal, keys, first(i0 + r, l.seq));
        const int64_t lo = columns.lo, valid = columns.hi;
        if (lo >= valid) {
          std::fill(srow, srow + kBlock, 0.0f);
          continue;
        }
#pragma omp simd
        for (int64_t c = 0; c < kBlock; ++c) srow[c] *= scale;
        const float new_max = cpu::max_of(srow + lo, valid - lo, row_max[r]);
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int64_t c = 0; c < kBlock; ++c) {
          const float p = c >= lo && c < valid ? cpu::fast_exp(srow[c] - new_max) : 0.0f;
          srow[c] = p;
          sum += p;
        }
        // The first block a row sees has row_max -inf: alpha is 0 and o, sum are still 0.
        const float alpha = cpu::fast_exp(row_max[r] - new_max);
        row_max[r] = new_max;
        // The normaliser is of the undropped probabilities, as flash-attention's lse is.
        row_sum[r] = row_sum[r] * alpha + sum;
        if (alpha != 1.0f) {
          float* orow = o + r * dp;
#pragma omp simd
          for (int64_t d = 0; d < dp; ++d) orow[d] *= alpha;
        }
        if (dropout.on()) {
          dropout.factors(i0 + r, j0, valid, factor);
#pragma omp simd
          for (int64_t c = 0; c < valid; ++c) srow[c] *= factor[c];
        }
      }
      block_product(kBlock, dp, kBlock, s, kBlock, 1, ws.v.get() + j0 * dp, dp, o, dp, true);
    }
    for (int64_t r = 0; r < kBlock && i0 + r < l.seq; ++r) {
      const float inv = 1.0f / row_sum[r];
      float* orow = o + r * dp;
#pragma omp simd
      for (int64_t d = 0; d < dp; ++d) orow[d] *= inv;
      lse[i0 + r] = row_max[r] + std::log(row_sum[r]);
    }
  }
}

struct BackwardScratch {
  Buffer k, kt, vt, dk, dv, q, dout, dq, s, dp;
  std::vector<float> delta, lse;
  explicit BackwardScratch(const Layout& l)
      : k(zeroed_floats(l.seq_pad * l.dim_pad)),
        kt(zeroed_floats(l.dim_pad * l.seq_pad)),
        vt(zeroed_floats(l.dim_pad * l.seq_pad)),
        dk(zeroed_floats(l.seq_pad * l.dim_pad)),
        dv(zeroed_floats(l.seq_pad * l.dim_pad)),
        q(zeroed_floats(l.seq_pad * l.dim_pad)),
        dout(zeroed_floats(l.seq_pad * l.dim_pad)),
        dq(zeroed_floats(l.seq_pad * l.dim_pad)),
        s(zeroed_floats(kBlock * kBlock)),
        dp(zeroed_floats(kBlock * kBlock)),
        delta(static_cast<size_t>(l.seq_pad)),
        lse(static_cast<size_t>(l.seq_pad)) {}
};

// One query head's contribution: dq overwritten, dk and dv (of its group) accumulated. P is
// recomputed from lse block by block; delta_i = rowsum(dO_i * O_i) = rowsum(P_i * dP_i).
void backward_head(const Layout& l, const AttentionOptions& options, int64_t keys,
                   const FirstKeys& first, const Dropout& dropout, BackwardScratch& ws) {
  const int64_t dp = l.dim_pad;
  const float scale = options.scale;
  float* s = ws.s.get();
  float* dpb = ws.dp.get();
  float factor[kBlock];
  std::fill(ws.dq.get(), ws.dq.get() + l.seq_pad * dp, 0.0f);
  for (int64_t qb = 0; qb < l.blocks; ++qb) {
    const int64_t i0 = qb * kBlock;
    const float* q = ws.q.get() + i0 * dp;
    const float* dout = ws.dout.get() + i0 * dp;
    float* dq = ws.dq.get() + i0 * dp;
    const int64_t kb_end = l.key_blocks(qb, options.causal, keys);
    for (int64_t kb = first.first_block(qb, l.seq); kb < kb_end; ++kb) {
      const int64_t j0 = kb * kBlock;
      block_product(kBlock, kBlock, dp, q, dp, 1, ws.kt.get() + j0, l.seq_pad, s, kBlock, false);
      block_product(kBlock, kBlock, dp, dout, dp, 1, ws.vt.get() + j0, l.seq_pad, dpb, kBlock,
                    false);
      for (int64_t r = 0; r < kBlock; ++r) {
        float* srow = s + r * kBlock;
        float* dprow = dpb + r * kBlock;
        const int64_t i = i0 + r;
        const Layout::Columns columns = l.valid_columns(i, j0, options.causal, keys, first(i, l.seq));
        const int64_t lo = columns.lo, valid = columns.hi;
        if (lo >= valid) {
          std::fill(srow, srow + kBlock, 0.0f);
          std::fill(dprow, dprow + kBlock, 0.0f);
          continue;
        }
        const float lse = ws.lse[static_cast<size_t>(i)];
        const float delta = ws.delta[static_cast<size_t>(i)];
        if (dropout.on()) {
          dropout.factors(i, j0, valid, factor);
          std::fill(factor + valid, factor + kBlock, 0.0f);
        } else {
          std::fill(factor, factor + kBlock, 1.0f);
        }
        // s becomes the dropped probabilities (for dV), dp the score gradient dS times scale
        // (for dQ and dK, both of which carry the scale of the scores).
#pragma omp simd
        for (int64_t c = 0; c < kBlock; ++c) {
          const float p = c >= lo && c < valid ? cpu::fast_exp(srow[c] * scale - lse) : 0.0f;
          dprow[c] = p * (dprow[c] * factor[c] - delta) * scale;
          srow[c] = p * factor[c];
        }
      }
      block_product(kBlock, dp, kBlock, s, 1, kBlock, dout, dp, ws.dv.get() + j0 * dp, dp, true);
      block_product(kBlock, dp, kBlock, dpb, kBlock, 1, ws.k.get() + j0 * dp, dp, dq, dp, true);
      block_product(kBlock, dp, kBlock, dpb, 1, kBlock, q, dp, ws.dk.get() + j0 * dp, dp, true);
    }
  }
}

// Elementwise loops with fewer elements than this run on the calling thread.
constexpr int64_t kParallelElements = 32768;

// Waking a team costs tens of microseconds, and far more when another process holds the other
// cores: below about 150 us of arithmetic (16 M flops) a call runs on the calling thread.
constexpr double kParallelFlops = 1 << 24;

// The block products' arithmetic for `units` heads: each computes `products` kBlock x kBlock x
// dim_pad products per pair of query and key blocks (all pairs: an upper bound when causal).
bool worth_parallel(const Layout& l, int64_t units, int products) {
  const double pairs = double(units) * double(l.blocks) * double(l.blocks);
  return units > 1 &&
         pairs * products * 2.0 * kBlock * kBlock * double(l.dim_pad) >= kParallelFlops;
}

void check_dropout(float p, const char* op) {
  cpu::require(p >= 0.0f && p < 1.0f, op, "dropout must be in [0, 1)");
}

// The flash kernels never hold a whole score matrix to add a bias to.
void check_no_bias(const AttentionOptions& o, const char* op) {
  cpu::require(o.bias == nullptr, op,
               "flash attention takes no score bias (options.bias): use cross_attention_forward "
               "and _backward with a packed shape");
}

}  // namespace

void CpuBackend::rotary(Tensor& qkv, const AttentionShape& shape, const RotaryOptions& options,
                        bool inverse) {
  check_shape(shape, "rotary");
  const Layout l(shape);
  cpu::require(qkv.numel() == l.batch * l.seq * l.width, "rotary",
               "qkv " + to_string(qkv.shape()) + " does not match the shape");
  const int64_t rotary_dim = options.rotary_dim;
  cpu::require(rotary_dim > 0 && rotary_dim % 2 == 0 && rotary_dim <= l.dim, "rotary",
               "rotary_dim must be even and in (0, head_dim]");
  cpu::require(options.position_offset >= 0, "rotary", "position_offset must not be negative");
  const int64_t half = rotary_dim / 2;
  // Angles in f64: t * base^(-2i/d) reaches thousands of radians, which f32 would misplace.
  const std::vector<double> frequency = rotary_frequencies(options);
  std::vector<float> cos_table(static_cast<size_t>(l.seq * half));
  std::vector<float> sin_table(cos_table.size());
  // The inverse is the transpose (the gradient's rotation), scaled alike.
  const double sign = inverse ? -1.0 : 1.0;
  const double scale = options.scaling.attention_factor;
#pragma omp parallel for num_threads(threads_) schedule(static) if (l.seq * half >= 4096)
  for (int64_t t = 0; t < l.seq; ++t) {
    for (int64_t i = 0; i < half; ++i) {
      const double angle =
          static_cast<double>(t + options.position_offset) * frequency[static_cast<size_t>(i)];
      cos_table[static_cast<size_t>(t * half + i)] = static_cast<float>(scale * std::cos(angle));
      sin_table[static_cast<size_t>(t * half + i)] = static_cast<float>(scale * sign * std::sin(angle));
    }
  }
  const int64_t rows = l.batch * l.seq;
  const bool parallel = rows * (l.heads + l.groups) * rotary_dim >= kParallelElements;
  cpu::with_floats(qkv, [&](auto* p) {
#pragma omp parallel for num_threads(threads_) schedule(static) if (parallel)
    for (int64_t row = 0; row < rows; ++row) {
      const float* cs = cos_table.data() + (row % l.seq) * half;
      const float* sn = sin_table.data() + (row % l.seq) * half;
      for (int64_t g = 0; g < l.groups; ++g) {
        // The group's query heads and its key head are adjacent; its value head is not rotated.
        for (int64_t h = 0; h <= l.per_group; ++h) {
          auto* x = p + row * l.width + (g * (l.per_group + 2) + h) * l.dim;
          for (int64_t i = 0; i < half; ++i) {
            const float x1 = cpu::load(x, i), x2 = cpu::load(x, i + half);
            cpu::store(x, i, x1 * cs[i] - x2 * sn[i]);
            cpu::store(x, i + half, x2 * cs[i] + x1 * sn[i]);
          }
        }
      }
    }
  });
}

void CpuBackend::attention_forward(const Tensor& qkv, const AttentionShape& shape,
                                   const AttentionOptions& options, Tensor& out, Tensor& lse) {
  const char* op = "attention_forward";
  check_shape(shape, op);
  check_dropout(options.dropout, op);
  check_no_bias(options, op);
  check_key_lengths(shape, options, op);
  check_first_keys(shape, options, op);
  const Layout l(shape);
  cpu::require(qkv.numel() == l.batch * l.seq * l.width, op,
               "qkv " + to_string(qkv.shape()) + " does not match the shape");
  cpu::require(out.numel() == l.batch * l.seq * l.heads * l.dim, op,
               "out " + to_string(out.shape()) + " does not match the shape");
  cpu::require(lse.dtype() == DType::F32 && lse.numel() == l.batch * l.heads * l.seq, op,
               "lse must be f32 [batch, heads, seq]");
  cpu::with_floats(qkv, [](const auto*) {});
  cpu::with_floats(out, [](const auto*) {});
  float* lse_data = lse.data<float>();
  const int64_t units = l.batch * l.heads;
#pragma omp parallel num_threads(threads_) if (worth_parallel(l, units, 2))
  {
    ForwardScratch ws(l);
#pragma omp for schedule(dynamic, 1)
    for (int64_t unit = 0; unit < units; ++unit) {
      const int64_t b = unit / l.heads, h = unit % l.heads, g = h / l.per_group;
      const int64_t row0 = b * l.seq;
      gather(qkv, row0, l.width, l.query_column(h), l.seq, l.dim, ws.q.get(), l.dim_pad, false);
      gather(qkv, row0, l.width, l.key_column(g), l.seq, l.dim, ws.kt.get(), l.seq_pad, true);
      gather(qkv, row0, l.width, l.value_column(g), l.seq, l.dim, ws.v.get(), l.dim_pad, false);
      const Dropout dropout{.p = options.dropout,
                            .keep_scale = 1.0f / (1.0f - options.dropout),
                            .key = options.rng,
                            .head_base = head_base(options, l, b, h),
                            .seq = l.seq};
      forward_head(l, options, keys_of(options, shape, b), first_keys_of(options, shape, b), dropout,
                   ws, lse_data + unit * l.seq);
      scatter(ws.o.get(), l.dim_pad, l.seq, l.dim, out, row0, l.heads * l.dim, h * l.dim);
    }
  }
}

void CpuBackend::attention_backward(const Tensor& qkv, const Tensor& out, const Tensor& dout,
                                    const Tensor& lse, const AttentionShape& shape,
                                    const AttentionOptions& options, Tensor& dqkv) {
  const char* op = "attention_backward";
  check_shape(shape, op);
  check_dropout(options.dropout, op);
  check_no_bias(options, op);
  check_key_lengths(shape, options, op);
  check_first_keys(shape, options, op);
  const Layout l(shape);
  cpu::require(qkv.numel() == l.batch * l.seq * l.width, op,
               "qkv " + to_string(qkv.shape()) + " does not match the shape");
  cpu::require_numel(qkv, dqkv, op);
  cpu::require(out.numel() == l.batch * l.seq * l.heads * l.dim, op,
               "out " + to_string(out.shape()) + " does not match the shape");
  cpu::require_numel(out, dout, op);
  cpu::require(lse.dtype() == DType::F32 && lse.numel() == l.batch * l.heads * l.seq, op,
               "lse must be f32 [batch, heads, seq]");
  for (const Tensor* t : {&qkv, &out, &dout, static_cast<const Tensor*>(&dqkv)}) {
    cpu::with_floats(*t, [](const auto*) {});
  }
  const float* lse_data = lse.data<float>();
  const int64_t out_width = l.heads * l.dim;
  // Key and value gradients sum over the group's query heads: a unit is a whole group, so no
  // two threads ever add to the same element.
  const int64_t units = l.batch * l.groups;
#pragma omp parallel num_threads(threads_) if (worth_parallel(l, units, 5 * l.per_group))
  {
    BackwardScratch ws(l);
    std::vector<float> o_row(static_cast<size_t>(l.dim_pad));
#pragma omp for schedule(dynamic, 1)
    for (int64_t unit = 0; unit < units; ++unit) {
      const int64_t b = unit / l.groups, g = unit % l.groups;
      const int64_t row0 = b * l.seq;
      gather(qkv, row0, l.width, l.key_column(g), l.seq, l.dim, ws.k.get(), l.dim_pad, false);
      gather(qkv, row0, l.width, l.key_column(g), l.seq, l.dim, ws.kt.get(), l.seq_pad, true);
      gather(qkv, row0, l.width, l.value_column(g), l.seq, l.dim, ws.vt.get(), l.seq_pad, true);
      std::fill(ws.dk.get(), ws.dk.get() + l.seq_pad * l.dim_pad, 0.0f);
      std::fill(ws.dv.get(), ws.dv.get() + l.seq_pad * l.dim_pad, 0.0f);
      for (int64_t h = g * l.per_group; h < (g + 1) * l.per_group; ++h) {
        gather(qkv, row0, l.width, l.query_column(h), l.seq, l.dim, ws.q.get(), l.dim_pad, false);
        gather(dout, row0, out_width, h * l.dim, l.seq, l.dim, ws.dout.get(), l.dim_pad, false);
        for (int64_t t = 0; t < l.seq; ++t) {
          gather(out, row0 + t, out_width, h * l.dim, 1, l.dim, o_row.data(), l.dim_pad, false);
          const float* dout_row = ws.dout.get() + t * l.dim_pad;
          float delta = 0.0f;
#pragma omp simd reduction(+ : delta)
          for (int64_t d = 0; d < l.dim; ++d) delta += dout_row[d] * o_row[static_cast<size_t>(d)];
          ws.delta[static_cast<size_t>(t)] = delta;
          ws.lse[static_cast<size_t>(t)] = lse_data[(b * l.heads + h) * l.seq + t];
        }
        const Dropout dropout{.p = options.dropout,
                              .keep_scale = 1.0f / (1.0f - options.dropout),
                              .key = options.rng,
                              .head_base = head_base(options, l, b, h),
                              .seq = l.seq};
        backward_head(l, options, keys_of(options, shape, b), first_keys_of(options, shape, b),
                      dropout, ws);
        scatter(ws.dq.get(), l.dim_pad, l.seq, l.dim, dqkv, row0, l.width, l.query_column(h));
      }
      scatter(ws.dk.get(), l.dim_pad, l.seq, l.dim, dqkv, row0, l.width, l.key_column(g));
      scatter(ws.dv.get(), l.dim_pad, l.seq, l.dim, dqkv, row0, l.width, l.value_column(g));
    }
  }
}

}  // namespace megatron::tensor
