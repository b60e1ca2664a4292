// TEMPORARY: ops not written yet; each is deleted from here as its real file lands.
#include <stdexcept>
#include "tensor/cpu_backend.hpp"
namespace megatron::tensor {
void CpuBackend::embedding_forward(const Tensor& ids, const Tensor& table, Tensor& out, int64_t row_offset, bool accumulate) { throw std::logic_error("embedding_forward: not written yet"); }
void CpuBackend::embedding_backward(const Tensor& ids, const Tensor& dout, Tensor& dtable, int64_t row_offset) { throw std::logic_error("embedding_backward: not written yet"); }
void CpuBackend::rotary(Tensor& qkv, const AttentionShape& shape, const RotaryOptions& options, bool inverse) { throw std::logic_error("rotary: not written yet"); }
void CpuBackend::attention_forward(const Tensor& qkv, const AttentionShape& shape, const AttentionOptions& options, Tensor& out, Tensor& lse) { throw std::logic_error("attention_forward: not written yet"); }
void CpuBackend::attention_backward(const Tensor& qkv, const Tensor& out, const Tensor& dout, const Tensor& lse, const AttentionShape& shape, const AttentionOptions& options, Tensor& dqkv) { throw std::logic_error("attention_backward: not written yet"); }
void CpuBackend::cross_entropy_forward(const Tensor& logits, const Tensor& targets, Tensor& loss, Tensor& lse) { throw std::logic_error("cross_entropy_forward: not written yet"); }
void CpuBackend::cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& lse, const Tensor& dloss, Tensor& dlogits) { throw std::logic_error("cross_entropy_backward: not written yet"); }
}
