// TEMPORARY: ops not written yet; each is deleted from here as its real file lands.
#include <stdexcept>
#include "tensor/cpu_backend.hpp"
namespace megatron::tensor {
void CpuBackend::gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c, float alpha, float beta) { throw std::logic_error("gemm: not written yet"); }
void CpuBackend::gemm_batched(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, Tensor& c, float alpha, float beta) { throw std::logic_error("gemm_batched: not written yet"); }
void CpuBackend::add(const Tensor& a, const Tensor& b, Tensor& out) { throw std::logic_error("add: not written yet"); }
void CpuBackend::axpy(float alpha, const Tensor& x, Tensor& y) { throw std::logic_error("axpy: not written yet"); }
void CpuBackend::scale(Tensor& x, float alpha) { throw std::logic_error("scale: not written yet"); }
void CpuBackend::bias_add(Tensor& x, const Tensor& bias) { throw std::logic_error("bias_add: not written yet"); }
void CpuBackend::bias_grad(const Tensor& dy, Tensor& dbias) { throw std::logic_error("bias_grad: not written yet"); }
void CpuBackend::gelu_forward(const Tensor& x, Tensor& y, bool tanh_approx) { throw std::logic_error("gelu_forward: not written yet"); }
void CpuBackend::gelu_backward(const Tensor& dy, const Tensor& x, Tensor& dx, bool tanh_approx) { throw std::logic_error("gelu_backward: not written yet"); }
void CpuBackend::swiglu_forward(const Tensor& x, Tensor& y) { throw std::logic_error("swiglu_forward: not written yet"); }
void CpuBackend::swiglu_backward(const Tensor& dy, const Tensor& x, Tensor& dx) { throw std::logic_error("swiglu_backward: not written yet"); }
void CpuBackend::dropout_forward(const Tensor& x, Tensor& y, float p, RngKey key) { throw std::logic_error("dropout_forward: not written yet"); }
void CpuBackend::dropout_backward(const Tensor& dy, Tensor& dx, float p, RngKey key) { throw std::logic_error("dropout_backward: not written yet"); }
void CpuBackend::dropout_add(const Tensor& x, const Tensor& residual, Tensor& out, float p, RngKey key) { throw std::logic_error("dropout_add: not written yet"); }
void CpuBackend::layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, Tensor& y, Tensor& mean, Tensor& rstd) { throw std::logic_error("layer_norm_forward: not written yet"); }
void CpuBackend::layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta) { throw std::logic_error("layer_norm_backward: not written yet"); }
void CpuBackend::rms_norm_forward(const Tensor& x, const Tensor& gamma, float eps, Tensor& y, Tensor& rstd) { throw std::logic_error("rms_norm_forward: not written yet"); }
void CpuBackend::rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& rstd, Tensor& dx, Tensor& dgamma) { throw std::logic_error("rms_norm_backward: not written yet"); }
double CpuBackend::sum(const Tensor& x) { throw std::logic_error("sum: not written yet"); }
double CpuBackend::dot(const Tensor& a, const Tensor& b) { throw std::logic_error("dot: not written yet"); }
double CpuBackend::sum_squares(const Tensor& x) { throw std::logic_error("sum_squares: not written yet"); }
bool CpuBackend::all_finite(const Tensor& x) { throw std::logic_error("all_finite: not written yet"); }
void CpuBackend::normal(Tensor& x, float mean, float std, RngKey key) { throw std::logic_error("normal: not written yet"); }
void CpuBackend::adamw_update(Tensor& master, const Tensor& grad, Tensor& m, Tensor& v, const AdamWStep& step) { throw std::logic_error("adamw_update: not written yet"); }
void CpuBackend::sgd_update(Tensor& master, const Tensor& grad, Tensor& momentum, const SgdStep& step) { throw std::logic_error("sgd_update: not written yet"); }
}
