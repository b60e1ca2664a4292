// The Communicator: collectives and point-to-point transfers between the ranks of one process
// group, on tensors of one device: MPI for CPU tensors, NCCL for GPU tensors (the NCCL one
// forwards CPU tensors to MPI). Groups come from split(), as Megatron's process groups do.
#pragma once

#include <memory>
#include <string>

#include "tensor/tensor.hpp"

namespace megatron::dist {

enum class ReduceOp { Sum, Max };

// The split() color of a rank that joins no group (MPI_UNDEFINED): split returns nullptr there.
// Such a rank still calls split, because splitting is collective over the parent group.
inline constexpr int kNoGroup = -1;

// A non-blocking operation in flight; wait() completes it (and rethrows its failure).
class Request {
 public:
  virtual ~Request() = default;
  virtual void wait() = 0;
  // Whether it has completed (completing it if so, as wait() would), without blocking.
  virtual bool test() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string name() const = 0;  // e.g. "world", "tp", for messages

  // In place over every rank. MPI reduces 16-bit floats in f32; NCCL reduces each dtype in its
  // own arithmetic, as Megatron's bf16 tensor-parallel all-reduces do (gradients are f32).
  virtual void all_reduce(tensor::Tensor& x, ReduceOp op = ReduceOp::Sum) = 0;
  virtual std::unique_ptr<Request> all_reduce_async(tensor::Tensor& x,
                                                    ReduceOp op = ReduceOp::Sum) = 0;
  // `in` holds size() equal chunks along its elements; rank r receives the reduction of chunk r.
  // `out` may be this rank's own chunk of `in` (in place; the other chunks are then garbage).
  virtual void reduce_scatter(const tensor::Tensor& in, tensor::Tensor& out,
                              ReduceOp op = ReduceOp::Sum) = 0;
  virtual std::unique_ptr<Request> reduce_scatter_async(const tensor::Tensor& in,
                                                        tensor::Tensor& out,
                                                        ReduceOp op = ReduceOp::Sum) = 0;
  // out holds size() chunks, chunk r being rank r's `in`; `in` may be this rank's chunk of out.
  virtual void all_gather(const tensor::Tensor& in, tensor::Tensor& out) = 0;
  virtual void broadcast(tensor::Tensor& x, int root) = 0;
  virtual void send(const tensor::Tensor& x, int peer, int tag = 0) = 0;
  virtual void recv(tensor::Tensor& x, int peer, int tag = 0) = 0;
  virtual std::unique_ptr<Request> send_async(const tensor::Tensor& x, int peer, int tag = 0) = 0;
  virtual std::unique_ptr<Request> recv_async(tensor::Tensor& x, int peer, int tag = 0) = 0;
  virtual void barrier() = 0;

  // Ranks with the same color (>= 0) form a new group, ordered by key (then by rank here).
  // Collective: every rank of this group calls it, kNoGroup for one that joins none.
  virtual std::unique_ptr<Communicator> split(int color, int key, std::string name) = 0;
};

}  // namespace megatron::dist
