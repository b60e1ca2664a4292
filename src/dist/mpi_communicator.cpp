#include "dist/mpi_communicator.hpp"

#include <mpi.h>

#include <cstring>
#include <functional>
#include <vector>

#include "core/error.hpp"
#include "dist/watchdog.hpp"

namespace megatron::dist {
namespace {

using tensor::DType;
using tensor::Tensor;

void check(int code, const std::string& what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw RuntimeFailure(what + ": " + std::string(text, static_cast<size_t>(length)));
}

void require_host(const Tensor& x, const std::string& what) {
  if (x.device() != tensor::Device::Cpu) {
    throw std::logic_error(what + ": the MPI communicator moves CPU tensors only");
  }
}

bool is_16bit(DType d) { return d == DType::Bf16 || d == DType::F16; }

MPI_Datatype mpi_type(DType d) {
  switch (d) {
    case DType::F32: return MPI_FLOAT;
    case DType::I32: return MPI_INT32_T;
    case DType::I64: return MPI_INT64_T;
    case DType::Bf16:
    case DType::F16: return MPI_UINT16_T;  // moved as bits; reductions widen to f32 first
  }
  return MPI_BYTE;
}

MPI_Op mpi_op(ReduceOp op) { return op == ReduceOp::Sum ? MPI_SUM : MPI_MAX; }

// 16-bit floats reduce in f32: MPI has no bf16 type, and summing in 16 bits would round at
// every step of the reduction tree.
std::vector<float> widen(const Tensor& x) {
  std::vector<float> out(static_cast<size_t>(x.numel()));
  if (x.dtype() == DType::Bf16) {
    tensor::convert(std::span<const tensor::bf16>(x.data<tensor::bf16>(), out.size()), std::span(out));
  } else {
    tensor::convert(std::span<const tensor::f16>(x.data<tensor::f16>(), out.size()), std::span(out));
  }
  return out;
}

void narrow(const std::vector<float>& in, Tensor& x) {
  if (x.dtype() == DType::Bf16) {
    tensor::convert(std::span(in), std::span<tensor::bf16>(x.data<tensor::bf16>(), in.size()));
  } else {
    tensor::convert(std::span(in), std::span<tensor::f16>(x.data<tensor::f16>(), in.size()));
  }
}

// `op` names the operation for the watchdog; its group is copied, as the request may outlive
// its communicator's name in a caller's hands.
class MpiRequest final : public Request {
 public:
  MpiRequest(MPI_Request request, std::string what, WatchedOp op, std::function<void()> finish = {})
      : request_(request),
        what_(std::move(what)),
        group_(op.group),
        op_(op),
        finish_(std::move(finish)) {
    op_.group = group_;
  }
  MpiRequest(const MpiRequest&) = delete;  // op_.group points into this object's group_
  MpiRequest& operator=(const MpiRequest&) = delete;
  ~MpiRequest() override {
    if (request_ == MPI_REQUEST_NULL) return;
    WatchdogScope watched(op_);
    MPI_Wait(&request_, MPI_STATUS_IGNORE);
  }
  void wait() override {
    {
      WatchdogScope watched(op_);
      check(MPI_Wait(&request_, MPI_STATUS_IGNORE), what_);
    }
    if (finish_) std::exchange(finish_, {})();
  }
  bool test() override {
    int done = 0;
    check(MPI_Test(&request_, &done, MPI_STATUS_IGNORE), what_);
    if (done && finish_) std::exchange(finish_, {})();
    return done != 0;
  }

 private:
  MPI_Request request_;
  std::string what_;
  std::string group_;
  WatchedOp op_;
  std::function<void()> finish_;
};

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MPI_Comm comm, std::string name, bool owned)
      : comm_(comm), name_(std::move(name)), owned_(owned) {
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiCommunicator() override {
    if (owned_) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return name_; }

  void all_reduce(Tensor& x, ReduceOp op) override {
    WatchdogScope watched(watched_op("all_reduce"));
    all_reduce_async(x, op)->wait();
  }

  std::unique_ptr<Request> all_reduce_async(Tensor& x, ReduceOp op) override {
    const std::string what = describe("all-reduce", x);
    require_host(x, what);
    MPI_Request request;
    if (is_16bit(x.dtype())) {
      auto wide = std::make_shared<std::vector<float>>(widen(x));
      check(MPI_Iallreduce(MPI_IN_PLACE, wide->data(), int(wide->size()), MPI_FLOAT, mpi_op(op),
                           comm_, &request),
            what);
      return std::make_unique<MpiRequest>(request, what, watched_op("all_reduce"),
                                          [wide, x]() mutable { narrow(*wide, x); });
    }
    check(MPI_Iallreduce(MPI_IN_PLACE, x.raw(), int(x.numel()), mpi_type(x.dtype()), mpi_op(op),
                         comm_, &request),
          what);
    return std::make_unique<MpiRequest>(request, what, watched_op("all_reduce"));
  }

  void reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op) override {
    WatchdogScope watched(watched_op("reduce_scatter"));
    reduce_scatter_async(in, out, op)->wait();
  }

  std::unique_ptr<Request> reduce_scatter_async(const Tensor& in, Tensor& out,
                                                ReduceOp op) override {
    const std::string what = describe("reduce-scatter", in);
    require_host(in, what);
    require_chunks(in, out, what);
    const int count = int(out.numel());
    MPI_Request request;
    if (is_16bit(in.dtype())) {
      auto wide = std::make_shared<std::vector<float>>(widen(in));
      auto mine = std::make_shared<std::vector<float>>(static_cast<size_t>(count));
      check(MPI_Ireduce_scatter_block(wide->data(), mine->data(), count, MPI_FLOAT, mpi_op(op),
                                      comm_, &request),
            what);
      return std::make_unique<MpiRequest>(request, what, watched_op("reduce_scatter"),
                                          [wide, mine, out]() mutable { narrow(*mine, out); });
    }
    const size_t chunk_bytes = size_t(count) * tensor::size_of(in.dtype());
    std::byte* own_chunk = static_cast<std::byte*>(in.raw()) + size_t(rank()) * chunk_bytes;
    if (out.raw() == own_chunk) {
      // In place: MPI leaves the result at the start of the buffer; move it to this rank's chunk.
      void* whole = in.raw();
      check(MPI_Ireduce_scatter_block(MPI_IN_PLACE, whole, count, mpi_type(in.dtype()),
                                      mpi_op(op), comm_, &request),
            what);
      return std::make_unique<MpiRequest>(
          request, what, watched_op("reduce_scatter"),
          [whole, own_chunk, chunk_bytes] { std::memmove(own_chunk, whole, chunk_bytes); });
    }
    check(MPI_Ireduce_scatter_block(in.raw(), out.raw(), count, mpi_type(in.dtype()), mpi_op(op),
                                    comm_, &request),
          what);
    return std::make_unique<MpiRequest>(request, what, watched_op("reduce_scatter"));
  }

  void all_gather(const Tensor& in, Tensor& out) override {
    const std::string what = describe("all-gather", in);
    require_host(in, what);
    require_chunks(out, in, what);
    WatchdogScope watched(watched_op("all_gather"));
    const size_t chunk_bytes = size_t(in.numel()) * tensor::size_of(in.dtype());
    if (in.raw() == static_cast<const std::byte*>(out.raw()) + size_t(rank()) * chunk_bytes) {
      // In place: `in` is this rank's chunk of `out`.
      check(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, out.raw(), int(in.numel()),
                          mpi_type(in.dtype()), comm_),
            what);
      return;
    }
    check(MPI_Allgather(in.raw(), int(in.numel()), mpi_type(in.dtype()), out.raw(),
                        int(in.numel()), mpi_type(in.dtype()), comm_),
          what);
  }

  void broadcast(Tensor& x, int root) override {
    const std::string what = describe("broadcast", x);
    require_host(x, what);
    WatchdogScope watched(watched_op("broadcast"));
    check(MPI_Bcast(x.raw(), int(x.numel()), mpi_type(x.dtype()), root, comm_), what);
  }

  // The request's wait is watched; MPI_Isend and MPI_Irecv return at once.
  void send(const Tensor& x, int peer, int tag) override { send_async(x, peer, tag)->wait(); }
  void recv(Tensor& x, int peer, int tag) override { recv_async(x, peer, tag)->wait(); }

  std::unique_ptr<Request> send_async(const Tensor& x, int peer, int tag) override {
    const std::string what = describe("send to rank " + std::to_string(peer), x);
    require_host(x, what);
    MPI_Request request;
    check(MPI_Isend(x.raw(), int(x.numel()), mpi_type(x.dtype()), peer, tag, comm_, &request),
          what);
    return std::make_unique<MpiRequest>(request, what, watched_op("send to", peer));
  }

  std::unique_ptr<Request> recv_async(Tensor& x, int peer, int tag) override {
    const std::string what = describe("receive from rank " + std::to_string(peer), x);
    require_host(x, what);
    MPI_Request request;
    check(MPI_Irecv(x.raw(), int(x.numel()), mpi_type(x.dtype()), peer, tag, comm_, &request),
          what);
    return std::make_unique<MpiRequest>(request, what, watched_op("receive from", peer));
  }

  void barrier() override {
    WatchdogScope watched(watched_op("barrier"));
    check(MPI_Barrier(comm_), name_ + " barrier");
  }

  std::unique_ptr<Communicator> split(int color, int key, std::string name) override {
    MPI_Comm child;
    WatchdogScope watched(watched_op("split"));
    check(MPI_Comm_split(comm_, color == kNoGroup ? MPI_UNDEFINED : color, key, &child),
          name_ + " split into " + name);
    if (child == MPI_COMM_NULL) return nullptr;
    return std::make_unique<MpiCommunicator>(child, std::move(name), true);
  }

 private:
  WatchedOp watched_op(const char* op, int peer = -1) const {
    return {.op = op, .peer = peer, .group = name_, .group_size = size_};
  }
  std::string describe(const std::string& op, const Tensor& x) const {
    return "rank " + std::to_string(rank_) + " of group " + name_ + ": " + op + " of " +
           std::string(tensor::name(x.dtype())) + " " + tensor::to_string(x.shape());
  }
  // `whole` must hold size() chunks of `chunk`'s size and dtype.
  void require_chunks(const Tensor& whole, const Tensor& chunk, const std::string& what) const {
    if (whole.numel() != chunk.numel() * size_ || whole.dtype() != chunk.dtype()) {
      throw std::logic_error(what + ": needs " + std::to_string(size_) + " chunks of " +
                             tensor::to_string(chunk.shape()));
    }
  }

  MPI_Comm comm_;
  std::string name_;
  bool owned_;
  int rank_ = 0, size_ = 1;
};

}  // namespace

MpiRuntime::MpiRuntime() {
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (!initialised) {
    int provided = 0;
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  }
}

MpiRuntime::~MpiRuntime() {
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (finalised) return;
  // MPI_Finalize may wait for the other ranks; one that hangs must not hold this one forever.
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  WatchdogScope watched({.op = "MPI_Finalize", .group = "world", .group_size = size});
  MPI_Finalize();
}

std::unique_ptr<Communicator> MpiRuntime::world() const {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  Watchdog::set_world_rank(rank);
  return std::make_unique<MpiCommunicator>(MPI_COMM_WORLD, "world", false);
}

}  // namespace megatron::dist
