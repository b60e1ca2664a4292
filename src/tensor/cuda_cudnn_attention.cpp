#include "tensor/cuda_cudnn_attention.hpp"

#include <stdexcept>

#ifdef MEGATRON_WITH_CUDNN
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cudnn_frontend.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <vector>
#endif

#include "core/error.hpp"

namespace megatron::tensor {

bool cudnn_attention_supports(const AttentionShape& shape, const AttentionOptions& options,
                              DType dtype) {
  return cudnn_attention_built() && (dtype == DType::Bf16 || dtype == DType::F16) &&
         shape.head_dim % 8 == 0 && shape.head_dim <= 128 && shape.groups > 0 &&
         shape.heads % shape.groups == 0 && options.first_keys.empty() &&
         options.bias == nullptr;
}

bool cudnn_cross_attention_supports(const CrossAttentionShape& shape,
                                    const AttentionOptions& options, DType dtype) {
  // The bias pointer carries the head offset: cuDNN wants 16-byte aligned tensors.
  const bool bias_ok = options.bias == nullptr ||
                       (options.bias->dtype() == DType::F32 && options.bias_offset % 4 == 0 &&
                        options.bias_columns >= shape.heads);
  return cudnn_attention_built() && (dtype == DType::Bf16 || dtype == DType::F16) &&
         shape.head_dim % 8 == 0 && shape.head_dim <= 128 && shape.groups > 0 &&
         shape.heads % shape.groups == 0 && options.first_keys.empty() && bias_ok &&
         (!shape.packed || shape.q_seq == shape.kv_seq);
}

#ifndef MEGATRON_WITH_CUDNN

bool cudnn_attention_built() { return false; }

std::string validate_cudnn_cross_attention(const CrossAttentionShape&, const AttentionOptions&,
                                           DType, bool, int) {
  return "this build has no cuDNN attention (cudnn-frontend's headers were not found)";
}

std::string validate_cudnn_attention(const AttentionShape&, const AttentionOptions&, DType, bool,
                                     int) {
  return "this build has no cuDNN attention (cudnn-frontend's headers were not found)";
}

struct CudnnAttention::State {};
CudnnAttention::CudnnAttention(Backend&, void*) {
  throw RuntimeFailure("this build has no cuDNN attention");
}
CudnnAttention::~CudnnAttention() = default;

std::string CudnnAttention::version() const { return ""; }
bool CudnnAttention::ready(const AttentionShape&, const AttentionOptions&, DType) { return false; }
bool CudnnAttention::ready(const CrossAttentionShape&, const AttentionOptions&, DType) {
  return false;
}
void CudnnAttention::cross_forward(const Tensor&, const Tensor&, const CrossAttentionShape&,
                                   const AttentionOptions&, Tensor&, Tensor&) {}
void CudnnAttention::cross_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                    const Tensor&, const CrossAttentionShape&,
                                    const AttentionOptions&, Tensor&, Tensor&, Tensor*) {}
void CudnnAttention::forward(const Tensor&, const AttentionShape&, const AttentionOptions&,
                             Tensor&, Tensor&) {}
void CudnnAttention::backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                              const AttentionShape&, const AttentionOptions&, Tensor&) {}

#else

}  // namespace megatron::tensor

// The frontend calls cuDNN through this handle (NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING): the
// binary does not link libcudnn, so it starts where cuDNN is missing.
namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;
}  // namespace cudnn_frontend

namespace megatron::tensor {

namespace fe = cudnn_frontend;

bool cudnn_attention_built() { return true; }

namespace {

// Opens the machine's cuDNN 9 once; "" when loaded, else why not.
std::string load_cudnn() {
  static const std::string failure = [] {
    for (const char* name : {"libcudnn.so.9", "libcudnn.so"}) {
      fe::cudnn_dlhandle = ::dlopen(name, RTLD_NOW | RTLD_GLOBAL);
      if (fe::cudnn_dlhandle) return std::string();
    }
    const char* why = ::dlerror();
    return std::string("cannot load cuDNN 9 (libcudnn.so.9): ") + (why ? why : "not found");
  }();
  return failure;
}

// Tensor ids in the graphs' variant packs.
enum Uid : int64_t {
  kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV, kSeqQ, kSeqKV, kSeed, kOffset, kBias, kDBias
};

// What a graph depends on; graphs are cached under it.
struct GraphKey {
  int64_t batch, seq, kv_seq, heads, groups, head_dim;
  int dtype;
  bool causal, padding, dropout, backward;
  bool fused;            // one qkv row per token (backend.hpp's layout); else q and kv apart
  int64_t bias_columns;  // an f32 score bias [seq, kv_seq, bias_columns]; 0: none
  float scale, dropout_p;
  auto tie() const {
    return std::tie(batch, seq, kv_seq, heads, groups, head_dim, dtype, causal, padding, dropout,
                    backward, fused, bias_columns, scale, dropout_p);
  }
  bool operator<(const GraphKey& o) const { return tie() < o.tie(); }
};

GraphKey key_of(const AttentionShape& s, const AttentionOptions& o, DType dtype, bool backward) {
  return {s.batch, s.seq, s.seq, s.heads, s.groups, s.head_dim, static_cast<int>(dtype),
          o.causal, !o.key_lengths.empty(), o.dropout > 0, backward, true, 0, o.scale, o.dropout};
}

GraphKey key_of(const CrossAttentionShape& s, const AttentionOptions& o, DType dtype,
                bool backward) {
  return {s.batch, s.q_seq, s.kv_seq, s.heads, s.groups, s.head_dim, static_cast<int>(dtype),
          o.causal, !o.key_lengths.empty(), o.dropout > 0, backward, s.packed,
          o.bias ? o.bias_columns : 0, o.scale, o.dropout};
}

// Queries are read in place when their head columns step by a fixed stride: always with q and
// kv apart, and in fused rows when each group has one query head. With grouped queries in fused
// rows a group's heads are not evenly spaced across groups, so they are copied out first (and
// dQ copied back).
bool queries_in_place(const GraphKey& k) { return !k.fused || k.heads == k.groups; }

// Fused rows hold, per group, its query heads, then its key, then its value (backend.hpp); apart,
// q rows hold the heads in turn and kv rows each group's key then value. Dims [batch, heads,
// seq, head_dim] with those strides.
std::vector<int64_t> qkv_strides(const GraphKey& k, int64_t head_stride) {
  const int64_t width = (k.heads + 2 * k.groups) * k.head_dim;
  return {k.seq * width, head_stride, width, 1};
}
std::vector<int64_t> dense_strides(const GraphKey& k, int64_t heads) {
  return {k.seq * heads * k.head_dim, k.head_dim, heads * k.head_dim, 1};
}
std::vector<int64_t> kv_apart_strides(const GraphKey& k) {
  const int64_t width = 2 * k.groups * k.head_dim;
  return {k.kv_seq * width, 2 * k.head_dim, width, 1};
}

// sm_version 0: the device's own; otherwise the graph targets that GPU without one (set before
// any node is added: nodes copy the graph's settings when made).
std::shared_ptr<fe::graph::Graph> make_graph(const GraphKey& k, int sm_version = 0) {
  auto graph = std::make_shared<fe::graph::Graph>();
  if (sm_version > 0) graph->set_sm_version(sm_version);
  graph->set_io_data_type(k.dtype == static_cast<int>(DType::Bf16) ? fe::DataType_t::BFLOAT16
                                                                   : fe::DataType_t::HALF)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  const int64_t per_group = k.heads / k.groups;
  auto tensor = [&](const char* name, Uid uid, std::vector<int64_t> dim,
                    std::vector<int64_t> stride) {
    return graph->tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim(
        std::move(dim)).set_stride(std::move(stride)));
  };
  const std::vector<int64_t> q_dim{k.batch, k.heads, k.seq, k.head_dim};
  const std::vector<int64_t> kv_dim{k.batch, k.groups, k.kv_seq, k.head_dim};
  const auto q_stride = k.fused && queries_in_place(k) ? qkv_strides(k, 3 * k.head_dim)
                                                       : dense_strides(k, k.heads);
  const auto kv_stride =
      k.fused ? qkv_strides(k, (per_group + 2) * k.head_dim) : kv_apart_strides(k);
  auto q = tensor("Q", kQ, q_dim, q_stride);
  auto key = tensor("K", kK, kv_dim, kv_stride);
  auto value = tensor("V", kV, kv_dim, kv_stride);

  std::shared_ptr<fe::graph::Tensor_attributes> seq_q, seq_kv, seed, offset, bias, dbias;
  // The bias, f32 [heads, seq, kv_seq] (cuDNN reads keys contiguous; the cross-attention op's
  // [seq, kv_seq, columns] is transposed into it, and the gradient back).
  const std::vector<int64_t> bias_dim{1, k.heads, k.seq, k.kv_seq};
  const std::vector<int64_t> bias_stride{k.heads * k.seq * k.kv_seq, k.seq * k.kv_seq, k.kv_seq, 1};
  if (k.bias_columns > 0)
    bias = graph->tensor(fe::graph::Tensor_attributes().set_name("bias").set_uid(kBias)
                             .set_dim(bias_dim).set_stride(bias_stride)
                             .set_data_type(fe::DataType_t::FLOAT));
  if (k.padding) {
    auto lengths = [&](const char* name, Uid uid) {
      return graph->tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid)
                               .set_dim({k.batch, 1, 1, 1}).set_stride({1, 1, 1, 1})
                               .set_data_type(fe::DataType_t::INT32));
    };
    seq_q = lengths("seq_q", kSeqQ);
    seq_kv = lengths("seq_kv", kSeqKV);
  }
  if (k.dropout) {
    auto scalar = [&](const char* name, Uid uid) {
      return graph->tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid)
                               .set_dim({1, 1, 1, 1}).set_stride({1, 1, 1, 1})
                               .set_is_pass_by_value(true).set_data_type(fe::DataType_t::INT64));
    };
    seed = scalar("seed", kSeed);
    offset = scalar("offset", kOffset);
  }
  auto stats_attributes = [&](std::shared_ptr<fe::graph::Tensor_attributes> t) {
    t->set_uid(kStats).set_dim({k.batch, k.heads, k.seq, 1}).set_stride({k.heads * k.seq, k.seq, 1, 1})
        .set_data_type(fe::DataType_t::FLOAT);
  };

  if (!k.backward) {
    auto options = fe::graph::SDPA_attributes().set_name("attention").set_generate_stats(true)
                       .set_causal_mask(k.causal).set_attn_scale(k.scale);
    if (k.padding) options.set_padding_mask(true).set_seq_len_q(seq_q).set_seq_len_kv(seq_kv);
    if (k.dropout) options.set_dropout(k.dropout_p, seed, offset);
    if (bias) options.set_bias(bias);
    auto [o, stats] = graph->sdpa(q, key, value, options);
    o->set_output(true).set_uid(kO).set_dim(q_dim).set_stride(dense_strides(k, k.heads));
    stats->set_output(true);
    stats_attributes(stats);
    return graph;
  }
  auto o = tensor("O", kO, q_dim, dense_strides(k, k.heads));
  auto d_o = tensor("dO", kDO, q_dim, dense_strides(k, k.heads));
  auto stats = graph->tensor(fe::graph::Tensor_attributes().set_name("stats"));
  stats_attributes(stats);
  auto options = fe::graph::SDPA_backward_attributes().set_name("attention_backward")
                     .set_causal_mask(k.causal).set_attn_scale(k.scale)
                     .set_deterministic_algorithm(true);
  if (k.padding) options.set_padding_mask(true).set_seq_len_q(seq_q).set_seq_len_kv(seq_kv);
  if (k.dropout) options.set_dropout(k.dropout_p, seed, offset);
  if (bias) {
    dbias = graph->tensor(fe::graph::Tensor_attributes().set_name("dbias").set_uid(kDBias)
                              .set_dim(bias_dim).set_stride(bias_stride)
                              .set_data_type(fe::DataType_t::FLOAT));
    options.set_bias(bias).set_dbias(dbias);
  }
  auto grads = graph->sdpa_backward(q, key, value, o, d_o, stats, options);
  grads[0]->set_output(true).set_uid(kDQ).set_dim(q_dim).set_stride(q_stride);
  grads[1]->set_output(true).set_uid(kDK).set_dim(kv_dim).set_stride(kv_stride);
  grads[2]->set_output(true).set_uid(kDV).set_dim(kv_dim).set_stride(kv_stride);
  return graph;
}

std::string failed(fe::error_t status) {
  return status.is_good() ? "" : status.get_message();
}

}  // namespace

std::string validate_cudnn_attention(const AttentionShape& shape, const AttentionOptions& options,
                                     DType dtype, bool backward, int sm_version) {
  if (!cudnn_attention_supports(shape, options, dtype))
    return "these options stay with the flash kernels (cudnn_attention_supports is false)";
  if (std::string failure = load_cudnn(); !failure.empty()) return failure;
  try {
    auto graph = make_graph(key_of(shape, options, dtype, backward), sm_version);
    return failed(graph->validate());
  } catch (const std::exception& e) {
    return e.what();
  }
}

std::string validate_cudnn_cross_attention(const CrossAttentionShape& shape,
                                           const AttentionOptions& options, DType dtype,
                                           bool backward, int sm_version) {
  if (!cudnn_cross_attention_supports(shape, options, dtype))
    return "these options stay with the cross-attention kernels";
  if (std::string failure = load_cudnn(); !failure.empty()) return failure;
  try {
    return failed(make_graph(key_of(shape, options, dtype, backward), sm_version)->validate());
  } catch (const std::exception& e) {
    return e.what();
  }
}

struct CudnnAttention::State {
  Backend* backend = nullptr;
  cudaStream_t stream = nullptr;
  cudnnHandle_t handle = nullptr;
  std::mutex mutex;
  std::map<GraphKey, std::pair<std::shared_ptr<fe::graph::Graph>, int64_t>> graphs;
  std::map<GraphKey, bool> usable;  // by the forward's key

  // The built graph and its workspace bytes; builds it on first use (seconds: cuDNN compiles).
  std::pair<std::shared_ptr<fe::graph::Graph>, int64_t>& built(const GraphKey& k) {
    const std::lock_guard<std::mutex> lock(mutex);
    auto it = graphs.find(k);
    if (it != graphs.end()) return it->second;
    auto graph = make_graph(k);
    // Each step needs the one before it: stop at the first that fails.
    auto step = [](fe::error_t status) {
      if (!status.is_good())
        throw RuntimeFailure("cuDNN attention cannot build its graph: " + status.get_message());
    };
    step(graph->validate());
    step(graph->build_operation_graph(handle));
    step(graph->create_execution_plans({fe::HeurMode_t::A}));
    step(graph->check_support(handle));
    step(graph->build_plans(handle));
    int64_t workspace = 0;
    if (!graph->get_workspace_size(workspace).is_good()) workspace = 0;
    return graphs.emplace(k, std::make_pair(graph, workspace)).first->second;
  }

  // Builds (once) a forward graph and its backward; false, with one warning, when cuDNN refuses
  // either, so both stay with the kernels.
  bool both_built(const GraphKey& forward, const GraphKey& backward, const char* what) {
    if (auto it = usable.find(forward); it != usable.end()) return it->second;
    bool ok = true;
    try {
      built(forward);
      built(backward);
    } catch (const std::exception& e) {
      ok = false;
      std::cerr << "megatron: warning: " << e.what() << " (" << what << " of " << forward.batch
                << " x " << forward.seq << " by " << forward.kv_seq << " tokens, "
                << forward.heads << " heads of " << forward.head_dim
                << "): the attention kernels run it\n";
    }
    usable.emplace(forward, ok);
    return ok;
  }

  void run(const GraphKey& k, std::unordered_map<int64_t, void*>& pack) {
    auto& [graph, workspace_bytes] = built(k);
    Tensor workspace =
        backend->empty({std::max<int64_t>(1, (workspace_bytes + 3) / 4)}, DType::F32);
    fe::error_t status = graph->execute(handle, pack, workspace.raw());
    if (!status.is_good()) throw RuntimeFailure("cuDNN attention: " + status.get_message());
  }
};

namespace {

void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    cudaGetLastError();
    throw RuntimeFailure(std::string("cuDNN attention: ") + what + ": " +
                         cudaGetErrorString(status));
  }
}

// Per local head h, the bias column (i * kv_seq + j) * columns + offset + h of the cross-attention
// op's layout to or from row h of a [heads, q_seq * kv_seq] f32 tensor.
void move_bias_columns(cudaStream_t stream, const CrossAttentionShape& s,
                       const AttentionOptions& o, void* columns_layout, void* heads_layout,
                       bool into_heads) {
  const size_t f = sizeof(float), cells = static_cast<size_t>(s.q_seq * s.kv_seq);
  const size_t pitch = static_cast<size_t>(o.bias_columns) * f;
  for (int64_t h = 0; h < s.heads; ++h) {
    auto* column = static_cast<std::byte*>(columns_layout) + static_cast<size_t>(o.bias_offset + h) * f;
    auto* row = static_cast<std::byte*>(heads_layout) + static_cast<size_t>(h) * cells * f;
    if (into_heads)
      check_cuda(cudaMemcpy2DAsync(row, f, column, pitch, f, cells, cudaMemcpyDeviceToDevice,
                                   stream), "bias");
    else
      check_cuda(cudaMemcpy2DAsync(column, pitch, row, f, f, cells, cudaMemcpyDeviceToDevice,
                                   stream), "bias gradient");
  }
}

// Copies each group's query heads between the qkv rows and a dense [tokens, heads, d] tensor.
void copy_queries(cudaStream_t stream, const AttentionShape& s, const Tensor& from, Tensor& to,
                  bool into_qkv) {
  const size_t element = size_of(from.dtype());
  const int64_t per_group = s.heads / s.groups, width = s.qkv_width();
  const size_t rows = static_cast<size_t>(s.batch * s.seq);
  const size_t bytes = static_cast<size_t>(per_group * s.head_dim) * element;
  for (int64_t g = 0; g < s.groups; ++g) {
    const size_t qkv_offset = static_cast<size_t>(g * (per_group + 2) * s.head_dim) * element;
    const size_t dense_offset = static_cast<size_t>(g * per_group * s.head_dim) * element;
    const size_t qkv_pitch = static_cast<size_t>(width) * element;
    const size_t dense_pitch = static_cast<size_t>(s.heads * s.head_dim) * element;
    auto* src = static_cast<const std::byte*>(from.raw());
    auto* dst = static_cast<std::byte*>(to.raw());
    if (into_qkv)
      check_cuda(cudaMemcpy2DAsync(dst + qkv_offset, qkv_pitch, src + dense_offset, dense_pitch,
                                   bytes, rows, cudaMemcpyDeviceToDevice, stream),
                 "copy dQ");
    else
      check_cuda(cudaMemcpy2DAsync(dst + dense_offset, dense_pitch, src + qkv_offset, qkv_pitch,
                                   bytes, rows, cudaMemcpyDeviceToDevice, stream),
                 "copy queries");
  }
}

}  // namespace

CudnnAttention::CudnnAttention(Backend& backend, void* stream) : state_(std::make_unique<State>()) {
  state_->backend = &backend;
  state_->stream = static_cast<cudaStream_t>(stream);
  if (std::string failure = load_cudnn(); !failure.empty())
    throw RuntimeFailure(failure + "; set MEGATRON_CUDNN_ATTENTION=0 to use the flash kernels");
  try {
    if (fe::detail::create_handle(&state_->handle) != CUDNN_STATUS_SUCCESS)
      throw RuntimeFailure("cudnnCreate failed");
    fe::detail::set_stream(state_->handle, state_->stream);
  } catch (const std::exception& e) {
    throw RuntimeFailure(std::string("cuDNN attention cannot start (") + e.what() +
                         "); set MEGATRON_CUDNN_ATTENTION=0 to use the flash kernels");
  }
}

CudnnAttention::~CudnnAttention() {
  if (state_ && state_->handle) fe::detail::destroy_handle(state_->handle);
}

bool CudnnAttention::ready(const AttentionShape& shape, const AttentionOptions& options,
                           DType dtype) {
  return state_->both_built(key_of(shape, options, dtype, false),
                            key_of(shape, options, dtype, true), "attention");
}

std::string CudnnAttention::version() const {
  const auto v = static_cast<int64_t>(fe::detail::get_backend_version());
  return std::to_string(v / 10000) + "." + std::to_string(v % 10000 / 100) + "." +
         std::to_string(v % 100);
}

namespace {

// Inputs every graph of these options reads besides the tensors: lengths and the dropout draw.
struct Extras {
  Tensor seq_q, seq_kv;
  int64_t seed = 0, offset = 0;
};

Extras cudnn_extras(Backend& backend, const AttentionShape& s, const AttentionOptions& o,
                    std::unordered_map<int64_t, void*>& pack) {
  Extras x;
  if (!o.key_lengths.empty()) {
    std::vector<int32_t> all(static_cast<size_t>(s.batch), static_cast<int32_t>(s.seq));
    std::vector<int32_t> keys(o.key_lengths.begin(), o.key_lengths.end());
    x.seq_q = backend.empty({s.batch}, DType::I32);
    x.seq_kv = backend.empty({s.batch}, DType::I32);
    backend.write(x.seq_q, all.data());
    backend.write(x.seq_kv, keys.data());
    pack[kSeqQ] = x.seq_q.raw();
    pack[kSeqKV] = x.seq_kv.raw();
  }
  if (o.dropout > 0) {
    // cuDNN draws its own Philox stream: the same seed and stream give the same masks, but they
    // are not the flash kernels' masks.
    x.seed = static_cast<int64_t>(o.rng.seed);
    x.offset = static_cast<int64_t>(o.rng.stream ^ (static_cast<uint64_t>(o.head_offset) << 48));
  }
  return x;
}

}  // namespace

namespace {

// What forward and backward both pass: Q (in place, or its heads copied out), K and V in place,
// the lengths and the dropout draw. Owns what the pack points at until the call returns, so it
// stays where it was made.
struct Inputs {
  std::unordered_map<int64_t, void*> pack;
  Extras extras;
  Tensor queries;
  size_t key_offset = 0, value_offset = 0;
  Inputs(const Inputs&) = delete;
  Inputs(Backend& backend, cudaStream_t stream, const GraphKey& k, const Tensor& qkv,
         const AttentionShape& shape, const AttentionOptions& options)
      : extras(cudnn_extras(backend, shape, options, pack)) {
    if (options.dropout > 0) {
      pack[kSeed] = &extras.seed;
      pack[kOffset] = &extras.offset;
    }
    const size_t element = size_of(qkv.dtype());
    const int64_t per_group = shape.heads / shape.groups;
    key_offset = static_cast<size_t>(per_group * shape.head_dim) * element;
    value_offset = static_cast<size_t>((per_group + 1) * shape.head_dim) * element;
    auto* base = static_cast<std::byte*>(qkv.raw());
    if (queries_in_place(k)) {
      pack[kQ] = base;
    } else {
      queries = backend.empty({shape.batch * shape.seq, shape.heads * shape.head_dim},
                              qkv.dtype());
      copy_queries(stream, shape, qkv, queries, false);
      pack[kQ] = queries.raw();
    }
    pack[kK] = base + key_offset;
    pack[kV] = base + value_offset;
  }
  // The cross-attention op's: fused rows as above, or q and kv apart (each group's key, then
  // its value, in kv's rows); the f32 score bias transposed into [heads, q_seq, kv_seq].
  Inputs(Backend& backend, cudaStream_t stream, const GraphKey& k, const Tensor& q,
         const Tensor& kv, const CrossAttentionShape& shape, const AttentionOptions& options)
      : Inputs(backend, stream, k, q, shape.self(), options) {
    if (!shape.packed) {
      const size_t element = size_of(q.dtype());
      key_offset = 0;
      value_offset = static_cast<size_t>(shape.head_dim) * element;
      pack[kQ] = q.raw();
      pack[kK] = kv.raw();
      pack[kV] = static_cast<std::byte*>(kv.raw()) + value_offset;
    }
    if (options.bias) {
      bias = backend.empty({shape.heads, shape.q_seq, shape.kv_seq}, DType::F32);
      move_bias_columns(stream, shape, options, options.bias->raw(), bias.raw(), true);
      pack[kBias] = bias.raw();
    }
  }
  Tensor bias;
};

}  // namespace

void CudnnAttention::forward(const Tensor& qkv, const AttentionShape& shape,
                             const AttentionOptions& options, Tensor& out, Tensor& lse) {
  const GraphKey k = key_of(shape, options, qkv.dtype(), false);
  Inputs in(*state_->backend, state_->stream, k, qkv, shape, options);
  in.pack[kO] = out.raw();
  in.pack[kStats] = lse.raw();
  state_->run(k, in.pack);
}

void CudnnAttention::cross_forward(const Tensor& q, const Tensor& kv,
                                   const CrossAttentionShape& shape,
                                   const AttentionOptions& options, Tensor& out, Tensor& lse) {
  const GraphKey k = key_of(shape, options, q.dtype(), false);
  Inputs in(*state_->backend, state_->stream, k, q, kv, shape, options);
  in.pack[kO] = out.raw();
  in.pack[kStats] = lse.raw();
  state_->run(k, in.pack);
}

void CudnnAttention::cross_backward(const Tensor& q, const Tensor& kv, const Tensor& out,
                                    const Tensor& dout, const Tensor& lse,
                                    const CrossAttentionShape& shape,
                                    const AttentionOptions& options, Tensor& dq, Tensor& dkv,
                                    Tensor* dbias) {
  const GraphKey k = key_of(shape, options, q.dtype(), true);
  Inputs in(*state_->backend, state_->stream, k, q, kv, shape, options);
  auto* grad_kv = static_cast<std::byte*>(dkv.raw());
  Tensor dqueries, dbias_heads;
  if (queries_in_place(k)) {
    in.pack[kDQ] = dq.raw();
  } else {
    dqueries = state_->backend->empty(in.queries.shape(), dq.dtype());
    in.pack[kDQ] = dqueries.raw();
  }
  in.pack[kO] = out.raw();
  in.pack[kDO] = dout.raw();
  in.pack[kStats] = lse.raw();
  in.pack[kDK] = grad_kv + in.key_offset;
  in.pack[kDV] = grad_kv + in.value_offset;
  if (options.bias) {
    dbias_heads = state_->backend->empty({shape.heads, shape.q_seq, shape.kv_seq}, DType::F32);
    in.pack[kDBias] = dbias_heads.raw();
  }
  state_->run(k, in.pack);
  if (!queries_in_place(k)) copy_queries(state_->stream, shape.self(), dqueries, dq, true);
  if (options.bias && dbias) {
    // cuDNN writes the gradient; the op accumulates into its own heads' columns only: spread the
    // rows into zeros shaped like dbias and add.
    Tensor spread = state_->backend->empty(dbias->shape(), DType::F32);
    state_->backend->fill(spread, 0.0);
    move_bias_columns(state_->stream, shape, options, spread.raw(), dbias_heads.raw(), false);
    state_->backend->axpy(1.0f, spread, *dbias);
  }
}

bool CudnnAttention::ready(const CrossAttentionShape& shape, const AttentionOptions& options,
                           DType dtype) {
  return state_->both_built(key_of(shape, options, dtype, false),
                            key_of(shape, options, dtype, true), "cross-attention");
}

void CudnnAttention::backward(const Tensor& qkv, const Tensor& out, const Tensor& dout,
                              const Tensor& lse, const AttentionShape& shape,
                              const AttentionOptions& options, Tensor& dqkv) {
  const GraphKey k = key_of(shape, options, qkv.dtype(), true);
  Inputs in(*state_->backend, state_->stream, k, qkv, shape, options);
  auto* grad = static_cast<std::byte*>(dqkv.raw());
  Tensor dqueries;
  if (queries_in_place(k)) {
    in.pack[kDQ] = grad;
  } else {
    dqueries = state_->backend->empty(in.queries.shape(), dqkv.dtype());
    in.pack[kDQ] = dqueries.raw();
  }
  in.pack[kO] = out.raw();
  in.pack[kDO] = dout.raw();
  in.pack[kStats] = lse.raw();
  in.pack[kDK] = grad + in.key_offset;
  in.pack[kDV] = grad + in.value_offset;
  state_->run(k, in.pack);
  if (!queries_in_place(k)) copy_queries(state_->stream, shape, dqueries, dqkv, true);
}

#endif  // MEGATRON_WITH_CUDNN

}  // namespace megatron::tensor
