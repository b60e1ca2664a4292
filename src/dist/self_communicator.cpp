#include "dist/self_communicator.hpp"

#include <cstring>
#include <stdexcept>

namespace megatron::dist {
namespace {

class DoneRequest final : public Request {
 public:
  void wait() override {}
  bool test() override { return true; }
};

[[noreturn]] void no_peer(const std::string& group, const char* op, int peer) {
  throw std::logic_error("group " + group + " has one rank: no rank " + std::to_string(peer) +
                         " to " + op);
}

}  // namespace

SelfCommunicator::SelfCommunicator(std::string name, tensor::Backend* backend)
    : name_(std::move(name)), backend_(backend) {}

void SelfCommunicator::all_reduce(tensor::Tensor&, ReduceOp) {}

std::unique_ptr<Request> SelfCommunicator::all_reduce_async(tensor::Tensor&, ReduceOp) {
  return std::make_unique<DoneRequest>();
}

std::unique_ptr<Request> SelfCommunicator::reduce_scatter_async(const tensor::Tensor& in,
                                                                tensor::Tensor& out, ReduceOp op) {
  reduce_scatter(in, out, op);
  return std::make_unique<DoneRequest>();
}

void SelfCommunicator::reduce_scatter(const tensor::Tensor& in, tensor::Tensor& out, ReduceOp) {
  copy(in, out, "reduce-scatter");
}

void SelfCommunicator::all_gather(const tensor::Tensor& in, tensor::Tensor& out) {
  copy(in, out, "all-gather");
}

void SelfCommunicator::broadcast(tensor::Tensor&, int root) { require_root(root); }

void SelfCommunicator::send(const tensor::Tensor&, int peer, int) {
  no_peer(name_, "send to", peer);
}
void SelfCommunicator::recv(tensor::Tensor&, int peer, int) {
  no_peer(name_, "receive from", peer);
}
std::unique_ptr<Request> SelfCommunicator::send_async(const tensor::Tensor&, int peer, int) {
  no_peer(name_, "send to", peer);
}
std::unique_ptr<Request> SelfCommunicator::recv_async(tensor::Tensor&, int peer, int) {
  no_peer(name_, "receive from", peer);
}

std::unique_ptr<Communicator> SelfCommunicator::split(int color, int, std::string name) {
  if (color == kNoGroup) return nullptr;
  return std::make_unique<SelfCommunicator>(std::move(name), backend_);
}

// The one chunk is the whole tensor, so the shapes must agree as the MPI communicator's would.
void SelfCommunicator::copy(const tensor::Tensor& in, tensor::Tensor& out, const char* op) const {
  if (in.numel() != out.numel() || in.dtype() != out.dtype()) {
    throw std::logic_error(std::string(op) + " on group " + name_ + " (1 rank): needs 1 chunk of " +
                           tensor::to_string(out.shape()) + ", got " +
                           tensor::to_string(in.shape()));
  }
  if (in.raw() == out.raw()) return;
  if (backend_) {
    backend_->copy(in, out);
  } else if (in.device() == tensor::Device::Cpu && out.device() == tensor::Device::Cpu) {
    std::memcpy(out.raw(), in.raw(), in.bytes());
  } else {
    throw std::logic_error(std::string(op) + " on group " + name_ +
                           ": a SelfCommunicator without a backend copies CPU tensors only");
  }
}

void SelfCommunicator::require_root(int root) const {
  if (root != 0) {
    throw std::logic_error("broadcast on group " + name_ + " (1 rank): root " +
                           std::to_string(root) + " does not exist");
  }
}

}  // namespace megatron::dist
