// The Communicator of a world of one rank: collectives are identities, so a single-process run
// (no launcher) trains through the same code path as a job without ever initialising MPI.
#pragma once

#include <memory>
#include <string>

#include "dist/communicator.hpp"
#include "tensor/backend.hpp"

namespace megatron::dist {

// Rank 0 of 1. all_reduce, broadcast and barrier leave everything as it is; reduce_scatter and
// all_gather copy `in` to `out` (one chunk); send and recv have no peer and throw logic_error.
class SelfCommunicator final : public Communicator {
 public:
  // `backend` copies tensors that do not live on the CPU; CPU tensors need none.
  explicit SelfCommunicator(std::string name = "world", tensor::Backend* backend = nullptr);

  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return name_; }

  void all_reduce(tensor::Tensor& x, ReduceOp op) override;
  std::unique_ptr<Request> all_reduce_async(tensor::Tensor& x, ReduceOp op) override;
  void reduce_scatter(const tensor::Tensor& in, tensor::Tensor& out, ReduceOp op) override;
  std::unique_ptr<Request> reduce_scatter_async(const tensor::Tensor& in, tensor::Tensor& out,
                                                ReduceOp op) override;
  void all_gather(const tensor::Tensor& in, tensor::Tensor& out) override;
  void broadcast(tensor::Tensor& x, int root) override;
  void send(const tensor::Tensor& x, int peer, int tag) override;
  void recv(tensor::Tensor& x, int peer, int tag) override;
  std::unique_ptr<Request> send_async(const tensor::Tensor& x, int peer, int tag) override;
  std::unique_ptr<Request> recv_async(tensor::Tensor& x, int peer, int tag) override;
  void barrier() override {}
  // Another SelfCommunicator named `name`, or nullptr for kNoGroup.
  std::unique_ptr<Communicator> split(int color, int key, std::string name) override;

 private:
  void copy(const tensor::Tensor& in, tensor::Tensor& out, const char* op) const;
  void require_root(int root) const;

  std::string name_;
  tensor::Backend* backend_;
};

}  // namespace megatron::dist
