#include "dist/nccl_communicator.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "dist/watchdog.hpp"

namespace megatron::dist {
namespace {

using tensor::DType;
using tensor::Tensor;

static_assert(sizeof(ncclUniqueId) == kNcclUniqueIdBytes);
static_assert(kNcclUniqueIdBytes % sizeof(int32_t) == 0);

[[noreturn]] void fail(const char* op, const std::string& group, const std::string& reason) {
  throw RuntimeFailure(std::string("nccl: ") + op + " on group " + group + ": " + reason);
}

std::string nccl_reason(ncclResult_t result, ncclComm_t comm) {
  std::string reason = ncclGetErrorString(result);
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && *last != '\0') reason += std::string(" (") + last + ")";
  return reason;
}

void check_nccl(ncclResult_t result, ncclComm_t comm, const char* op, const std::string& group) {
  if (result != ncclSuccess) fail(op, group, nccl_reason(result, comm));
}

void check_cuda(cudaError_t error, const char* call, const char* op, const std::string& group) {
  if (error == cudaSuccess) return;
  cudaGetLastError();  // a recoverable error must not be reported again by the next launch check
  fail(op, group,
       std::string(call) + ": " + cudaGetErrorName(error) + ": " + cudaGetErrorString(error));
}

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::F32: return ncclFloat32;
    case DType::Bf16: return ncclBfloat16;
    case DType::F16: return ncclFloat16;
    case DType::I32: return ncclInt32;
    case DType::I64: return ncclInt64;
  }
  return ncclFloat32;
}

ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::Sum ? ncclSum : ncclMax; }

size_t count_of(const Tensor& x) { return static_cast<size_t>(x.numel()); }

// Whether two tensors' bytes overlap.
bool overlap(const Tensor& a, const Tensor& b) {
  const auto* a0 = static_cast<const std::byte*>(a.raw());
  const auto* b0 = static_cast<const std::byte*>(b.raw());
  return a.bytes() > 0 && b.bytes() > 0 && a0 < b0 + b.bytes() && b0 < a0 + a.bytes();
}

// One NCCL communicator and the stream its operations run on.
struct Lane {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t done = nullptr;  // recorded after each blocking operation
};

// What the communicator and its requests share: a request may outlive its communicator.
struct State {
  std::string name;
  int rank = 0;
  int size = 1;
  int device = 0;
  cudaStream_t compute = nullptr;
  cudaEvent_t ready = nullptr;  // recorded on the compute stream before each operation
  Lane collectives;
  // Point-to-point messages from a lower group rank to a higher one (sent and received there),
  // and from a higher one to a lower one. None in a group of one rank.
  Lane upward;
  Lane downward;
  bool failed = false;  // an NCCL error was seen: the communicators are (to be) aborted
  std::string failure;

  State() = default;
  State(const State&) = delete;
  State& operator=(const State&) = delete;

  ~State() {
    cudaSetDevice(device);
    // Destroying a communicator waits for its operations; during unwinding (a failed test, an
    // error elsewhere) they may wait for peers that never come, so abort instead.
    if (!failed && std::uncaught_exceptions() > 0) failed = true;
    if (!failed) {
      try {
        WatchdogScope watched(watched_op("ncclCommDestroy"));
        wait_for_lanes("ncclCommDestroy");
      } catch (const std::exception&) {
        failed = true;
      }
    }
    for (Lane* lane : lanes_last_first()) {
      if (lane->comm != nullptr) {
        WatchdogScope watched(watched_op(failed ? "ncclCommAbort" : "ncclCommDestroy"));
        if (failed) {
          ncclCommAbort(lane->comm);
        } else {
          ncclCommDestroy(lane->comm);
        }
      }
      if (lane->done != nullptr) cudaEventDestroy(lane->done);
      if (lane->stream != nullptr) cudaStreamDestroy(lane->stream);
    }
    if (ready != nullptr) cudaEventDestroy(ready);
    cudaGetLastError();
  }

  WatchedOp watched_op(const char* op, int peer = -1) const {
    return {.op = op, .peer = peer, .group = name, .group_size = size};
  }

  std::array<Lane*, 3> lanes_last_first() { return {&downward, &upward, &collectives}; }

  void cuda(cudaError_t error, const char* call, const char* op) const {
    check_cuda(error, call, op, name);
  }

  // The answer of a completion query (cudaEventQuery, cudaStreamQuery): done, not yet, or an
  // error thrown. "Not yet" is also left in the thread's last-error slot, where the next kernel
  // launch's check would read it as that kernel's failure, so it is cleared here. (Completion is
  // polled this way every pipeline step.)
  bool finished(cudaError_t answer, const char* call, const char* op) const {
    if (answer == cudaErrorNotReady) {
      static_cast<void>(cudaGetLastError());
      return false;
    }
    cuda(answer, call, op);
    return true;
  }

  void require_healthy(const char* op) const {
    if (failed) fail(op, name, "the communicator was aborted after an earlier error: " + failure);
  }

  // Throws (and aborts every communicator) if NCCL reports an asynchronous error, such as a
  // peer that failed or a network error.
  void poll(const char* op) {
    require_healthy(op);
    for (Lane* lane : lanes_last_first()) {
      if (lane->comm == nullptr) continue;
      ncclResult_t async = ncclSuccess;
      const ncclResult_t result = ncclCommGetAsyncError(lane->comm, &async);
      if (result != ncclSuccess) {
        abort_after(nccl_reason(result, lane->comm), op);
      }
      if (async != ncclSuccess && async != ncclInProgress) {
        abort_after(nccl_reason(async, lane->comm), op);
      }
    }
  }

  [[noreturn]] void abort_after(const std::string& reason, const char* op) {
    failed = true;
    failure = reason;
    for (Lane* lane : lanes_last_first()) {
      if (lane->comm != nullptr) ncclCommAbort(lane->comm);
      lane->comm = nullptr;
    }
    fail(op, name, reason);
  }

  // Waits on the host for every operation issued so far, checking for NCCL errors meanwhile
  // (cudaStreamSynchronize would wait forever on a failed peer).
  void wait_for_lanes(const char* op) {
    for (Lane* lane : lanes_last_first()) {
      if (lane->stream == nullptr) continue;
      for (int spins = 0;; ++spins) {
        if (finished(cudaStreamQuery(lane->stream), "cudaStreamQuery", op)) break;
        poll(op);
        if (spins < 64) {
          std::this_thread::yield();
        } else {
          std::this_thread::sleep_for(std::chrono::microseconds(100));
        }
      }
    }
  }

  // Orders `lane` after the work the compute stream holds now.
  void begin(Lane& lane, const char* op) {
    require_healthy(op);
    cuda(cudaEventRecord(ready, compute), "cudaEventRecord", op);
    cuda(cudaStreamWaitEvent(lane.stream, ready, 0), "cudaStreamWaitEvent", op);
  }

  // Orders the compute stream after what `lane` holds now: a blocking operation's end.
  void finish(Lane& lane, const char* op) {
    cuda(cudaEventRecord(lane.done, lane.stream), "cudaEventRecord", op);
    cuda(cudaStreamWaitEvent(compute, lane.done, 0), "cudaStreamWaitEvent", op);
  }

  // An event for a request: recorded on `lane` after its operation.
  cudaEvent_t finish_later(Lane& lane, const char* op) {
    cudaEvent_t done = nullptr;
    cuda(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreateWithFlags", op);
    const cudaError_t error = cudaEventRecord(done, lane.stream);
    if (error != cudaSuccess) {
      cudaEventDestroy(done);
      cuda(error, "cudaEventRecord", op);
    }
    return done;
  }
};

// An operation in flight on a communication stream; it keeps its tensors' buffers alive.
class NcclRequest final : public Request {
 public:
  NcclRequest(std::shared_ptr<State> state, const char* op, cudaEvent_t done,
              std::vector<Tensor> tensors)
      : state_(std::move(state)), op_(op), done_(done), tensors_(std::move(tensors)) {}
  NcclRequest(const NcclRequest&) = delete;
  NcclRequest& operator=(const NcclRequest&) = delete;
  ~NcclRequest() override {
    // Later compute may reuse the buffers once they are released: order it after the operation.
    if (!completed_) cudaStreamWaitEvent(state_->compute, done_, 0);
    cudaEventDestroy(done_);
  }

  void wait() override {
    if (completed_) return;
    state_->poll(op_);
    state_->cuda(cudaStreamWaitEvent(state_->compute, done_, 0), "cudaStreamWaitEvent", op_);
    complete();
  }

  bool test() override {
    if (completed_) return true;
    if (!state_->finished(cudaEventQuery(done_), "cudaEventQuery", op_)) {
      state_->poll(op_);
      return false;
    }
    wait();  // already complete on the GPU: the stream wait costs nothing
    return true;
  }

 private:
  void complete() {
    completed_ = true;
    tensors_.clear();
  }

  std::shared_ptr<State> state_;
  const char* op_;
  cudaEvent_t done_;
  std::vector<Tensor> tensors_;
  bool completed_ = false;
};

bool on_cpu(const Tensor& x) { return x.device() == tensor::Device::Cpu; }

// A zeroed CPU tensor of `n` i32, for the MPI communicator to move (no Backend at hand here).
Tensor host_ints(int64_t n) {
  std::shared_ptr<std::byte> buffer(new std::byte[size_t(n) * sizeof(int32_t)](),
                                    std::default_delete<std::byte[]>());
  return Tensor(std::move(buffer), 0, {n}, DType::I32, tensor::Device::Cpu);
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(std::unique_ptr<Communicator> mpi, cudaStream_t compute, int device)
      : mpi_(std::move(mpi)), state_(std::make_shared<State>()) {
    State& s = *state_;
    s.name = mpi_->name();
    s.rank = mpi_->rank();
    s.size = mpi_->size();
    s.device = device;
    s.compute = compute;
    try {
      ncclUniqueId id;
      const NcclUniqueIdBytes bytes = nccl_unique_id_over(*mpi_);
      std::memcpy(id.internal, bytes.data(), sizeof(id.internal));
      agree_on_local_setup();
      // Every rank of the group must arrive; one that never does is the watchdog's to report.
      const char* op = "ncclCommInitRank";
      WatchdogScope watched(s.watched_op(op));
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.blocking = 1;
      config.commName = s.name.c_str();
      check_nccl(ncclCommInitRankConfig(&s.collectives.comm, s.size, id, s.rank, &config),
                 s.collectives.comm, op, s.name);
      if (s.size > 1) {
        // The point-to-point communicators: the same ranks, their own resources and streams.
        ncclConfig_t p2p = NCCL_CONFIG_INITIALIZER;
        p2p.blocking = 1;
        p2p.splitShare = 0;
        p2p.commName = s.name.c_str();
        for (Lane* lane : {&s.upward, &s.downward}) {
          check_nccl(ncclCommSplit(s.collectives.comm, 0, s.rank, &lane->comm, &p2p),
                     s.collectives.comm, "ncclCommSplit", s.name);
        }
      }
    } catch (...) {
      s.failed = true;  // the destructor aborts what was created instead of waiting on it
      throw;
    }
  }

  int rank() const override { return state_->rank; }
  int size() const override { return state_->size; }
  std::string name() const override { return state_->name; }

  void all_reduce(Tensor& x, ReduceOp op) override {
    if (on_cpu(x)) return mpi_->all_reduce(x, op);
    issue_all_reduce(x, op);
    state_->finish(state_->collectives, "all_reduce");
  }

  std::unique_ptr<Request> all_reduce_async(Tensor& x, ReduceOp op) override {
    if (on_cpu(x)) return mpi_->all_reduce_async(x, op);
    issue_all_reduce(x, op);
    return request(state_->collectives, "all_reduce", {x});
  }

  void reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op) override {
    if (on_cpu(in) && on_cpu(out)) return mpi_->reduce_scatter(in, out, op);
    issue_reduce_scatter(in, out, op);
    state_->finish(state_->collectives, "reduce_scatter");
  }

  std::unique_ptr<Request> reduce_scatter_async(const Tensor& in, Tensor& out,
                                                ReduceOp op) override {
    if (on_cpu(in) && on_cpu(out)) return mpi_->reduce_scatter_async(in, out, op);
    issue_reduce_scatter(in, out, op);
    return request(state_->collectives, "reduce_scatter", {in, out});
  }

  void all_gather(const Tensor& in, Tensor& out) override {
    if (on_cpu(in) && on_cpu(out)) return mpi_->all_gather(in, out);
    const char* op = "all_gather";
    require_same_device(in, out, op);
    require_chunks(out, in, op);
    // In place when `in` is exactly this rank's chunk of `out`, which NCCL handles itself.
    const auto* own = static_cast<const std::byte*>(out.raw()) + size_t(rank()) * in.bytes();
    if (in.raw() != own && overlap(in, out)) {
      throw std::logic_error(what(op) + ": `in` overlaps `out` without being this rank's chunk");
    }
    State& s = *state_;
    s.begin(s.collectives, op);
    check_nccl(ncclAllGather(in.raw(), out.raw(), count_of(in), nccl_type(in.dtype()),
                             s.collectives.comm, s.collectives.stream),
               s.collectives.comm, op, s.name);
    s.finish(s.collectives, op);
  }

  void broadcast(Tensor& x, int root) override {
    if (on_cpu(x)) return mpi_->broadcast(x, root);
    const char* op = "broadcast";
    if (root < 0 || root >= size()) {
      throw std::logic_error(what(op) + ": root " + std::to_string(root) + " does not exist");
    }
    State& s = *state_;
    s.begin(s.collectives, op);
    check_nccl(ncclBroadcast(x.raw(), x.raw(), count_of(x), nccl_type(x.dtype()), root,
                             s.collectives.comm, s.collectives.stream),
               s.collectives.comm, op, s.name);
    s.finish(s.collectives, op);
  }

  void send(const Tensor& x, int peer, int tag) override {
    if (on_cpu(x)) return mpi_->send(x, peer, tag);
    Lane& lane = issue_send(x, peer);
    state_->finish(lane, "send");
  }

  void recv(Tensor& x, int peer, int tag) override {
    if (on_cpu(x)) return mpi_->recv(x, peer, tag);
    Lane& lane = issue_recv(x, peer);
    state_->finish(lane, "recv");
  }

  std::unique_ptr<Request> send_async(const Tensor& x, int peer, int tag) override {
    if (on_cpu(x)) return mpi_->send_async(x, peer, tag);
    return request(issue_send(x, peer), "send", {x});
  }

  std::unique_ptr<Request> recv_async(Tensor& x, int peer, int tag) override {
    if (on_cpu(x)) return mpi_->recv_async(x, peer, tag);
    return request(issue_recv(x, peer), "recv", {x});
  }

  void barrier() override {
    WatchdogScope watched(state_->watched_op("barrier"));
    state_->wait_for_lanes("barrier");
    mpi_->barrier();
  }

  std::unique_ptr<Communicator> split(int color, int key, std::string name) override {
    std::unique_ptr<Communicator> child = mpi_->split(color, key, std::move(name));
    if (child == nullptr) return nullptr;
    return std::make_unique<NcclCommunicator>(std::move(child), state_->compute, state_->device);
  }

 private:
  std::string what(const char* op) const {
    return std::string("nccl: ") + op + " on group " + state_->name;
  }

  void require_same_device(const Tensor& a, const Tensor& b, const char* op) const {
    if (a.device() != b.device()) {
      throw std::logic_error(what(op) + ": its tensors live on " +
                             std::string(tensor::name(a.device())) + " and " +
                             std::string(tensor::name(b.device())));
    }
  }

  // `whole` must hold size() chunks of `chunk`'s size and dtype.
  void require_chunks(const Tensor& whole, const Tensor& chunk, const char* op) const {
    if (whole.numel() != chunk.numel() * size() || whole.dtype() != chunk.dtype()) {
      throw std::logic_error(what(op) + ": needs " + std::to_string(size()) + " chunks of " +
                             std::string(tensor::name(chunk.dtype())) + " " +
                             tensor::to_string(chunk.shape()) + ", got " +
                             std::string(tensor::name(whole.dtype())) + " " +
                             tensor::to_string(whole.shape()));
    }
  }

  // The lane of a message from group rank `from` to group rank `to`: both ends use the same.
  Lane& lane_of(int from, int to, int peer, const char* op) {
    if (peer < 0 || peer >= size() || peer == rank()) {
      throw std::logic_error(what(op) + ": rank " + std::to_string(rank()) +
                             " cannot exchange with rank " + std::to_string(peer) + " of " +
                             std::to_string(size()));
    }
    return from < to ? state_->upward : state_->downward;
  }

  // Makes the device current and creates the streams and events, then learns whether every
  // rank did: a rank that failed alone would leave the others waiting in ncclCommInitRank.
  void agree_on_local_setup() {
    State& s = *state_;
    const char* op = "ncclCommInitRank";
    std::string error;
    try {
      s.cuda(cudaSetDevice(s.device), "cudaSetDevice", op);
      s.cuda(cudaEventCreateWithFlags(&s.ready, cudaEventDisableTiming), "cudaEventCreateWithFlags",
             op);
      for (Lane* lane : s.lanes_last_first()) {
        if (lane != &s.collectives && s.size == 1) continue;
        s.cuda(cudaStreamCreateWithFlags(&lane->stream, cudaStreamNonBlocking),
               "cudaStreamCreateWithFlags", op);
        s.cuda(cudaEventCreateWithFlags(&lane->done, cudaEventDisableTiming),
               "cudaEventCreateWithFlags", op);
      }
    } catch (const RuntimeFailure& e) {
      error = e.what();
    }
    Tensor failures = host_ints(1);
    *failures.data<int32_t>() = error.empty() ? 0 : 1;
    mpi_->all_reduce(failures, ReduceOp::Sum);
    if (!error.empty()) throw RuntimeFailure(error);
    const int32_t failed = *failures.data<int32_t>();
    if (failed > 0) {
      fail(op, s.name,
           std::to_string(failed) + " of its " + std::to_string(s.size) +
               " ranks could not set up their CUDA device (see their messages)");
    }
  }

  void issue_all_reduce(Tensor& x, ReduceOp reduce) {
    const char* op = "all_reduce";
    State& s = *state_;
    s.begin(s.collectives, op);
    check_nccl(ncclAllReduce(x.raw(), x.raw(), count_of(x), nccl_type(x.dtype()), nccl_op(reduce),
                             s.collectives.comm, s.collectives.stream),
               s.collectives.comm, op, s.name);
  }

  void issue_reduce_scatter(const Tensor& in, Tensor& out, ReduceOp reduce) {
    const char* op = "reduce_scatter";
    require_same_device(in, out, op);
    require_chunks(in, out, op);
    // In place when `out` is exactly this rank's chunk of `in`, which NCCL handles itself.
    const auto* own = static_cast<const std::byte*>(in.raw()) + size_t(rank()) * out.bytes();
    if (out.raw() != own && overlap(in, out)) {
      throw std::logic_error(what(op) + ": `out` overlaps `in` without being this rank's chunk");
    }
    State& s = *state_;
    s.begin(s.collectives, op);
    check_nccl(ncclReduceScatter(in.raw(), out.raw(), count_of(out), nccl_type(in.dtype()),
                                 nccl_op(reduce), s.collectives.comm, s.collectives.stream),
               s.collectives.comm, op, s.name);
  }

  Lane& issue_send(const Tensor& x, int peer) {
    const char* op = "send";
    Lane& lane = lane_of(rank(), peer, peer, op);
    State& s = *state_;
    s.begin(lane, op);
    check_nccl(ncclSend(x.raw(), count_of(x), nccl_type(x.dtype()), peer, lane.comm, lane.stream),
               lane.comm, op, s.name);
    return lane;
  }

  Lane& issue_recv(Tensor& x, int peer) {
    const char* op = "recv";
    Lane& lane = lane_of(peer, rank(), peer, op);
    State& s = *state_;
    s.begin(lane, op);
    check_nccl(ncclRecv(x.raw(), count_of(x), nccl_type(x.dtype()), peer, lane.comm, lane.stream),
               lane.comm, op, s.name);
    return lane;
  }

  std::unique_ptr<Request> request(Lane& lane, const char* op, std::vector<Tensor> tensors) {
    cudaEvent_t done = state_->finish_later(lane, op);
    return std::make_unique<NcclRequest>(state_, op, done, std::move(tensors));
  }

  // Declared first, destroyed last: the NCCL communicators go before the MPI one.
  std::unique_ptr<Communicator> mpi_;
  std::shared_ptr<State> state_;
};

}  // namespace

NcclUniqueIdBytes nccl_unique_id_over(Communicator& mpi) {
  // 32 i32 words on the CPU, so that the MPI communicator broadcasts them as they are. Rank 0
  // sends zeros if it has no id (a real id never is all zeros), so that every rank fails.
  Tensor x = host_ints(int64_t(kNcclUniqueIdBytes / sizeof(int32_t)));
  std::string root_error;
  if (mpi.rank() == 0) {
    ncclUniqueId id;
    const ncclResult_t result = ncclGetUniqueId(&id);
    if (result == ncclSuccess) {
      std::memcpy(x.raw(), id.internal, kNcclUniqueIdBytes);
    } else {
      root_error = nccl_reason(result, nullptr);
    }
  }
  mpi.broadcast(x, 0);
  if (!root_error.empty()) fail("ncclGetUniqueId", mpi.name(), root_error);
  NcclUniqueIdBytes bytes;
  std::memcpy(bytes.data(), x.raw(), kNcclUniqueIdBytes);
  bool all_zero = true;
  for (std::byte b : bytes) all_zero = all_zero && b == std::byte{0};
  if (all_zero) fail("ncclGetUniqueId", mpi.name(), "rank 0 could not create the unique id");
  return bytes;
}

std::unique_ptr<Communicator> make_nccl_communicator(std::unique_ptr<Communicator> mpi,
                                                     void* compute_stream, int device) {
  if (mpi == nullptr) throw std::logic_error("make_nccl_communicator: no MPI communicator");
  return std::make_unique<NcclCommunicator>(std::move(mpi),
                                            static_cast<cudaStream_t>(compute_stream), device);
}

}  // namespace megatron::dist
