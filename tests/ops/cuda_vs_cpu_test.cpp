// Mode 2 of the op harness: every case on the CUDA backend against the CPU backend (the oracle),
// forward outputs and gradients, on the same inputs. Built only with CUDA; without a GPU every
// case skips with a message, as tests/kernels' do.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/cuda_harness.hpp"
#include "ops/op_case.hpp"
#include "tensor/host_io.hpp"

namespace megatron::ops_test {
namespace {

using tensor::Tensor;

constexpr uint32_t kSeed = 4321;

// cuda_harness.hpp's fixture (skip without a GPU, one CPU and one CUDA backend), with TF32 off:
// the cases are f32, and TF32's 10-bit mantissa would take the GEMMs' results 1e-3 away.
class OpsOnCuda : public test_support::CudaOpTest, public ::testing::WithParamInterface<OpCase> {
 protected:
  tensor::CudaOptions gpu_options() const override { return {.allow_tf32 = false}; }

  // Every result within the case's gpu_rtol of the CPU's, by the cuda_harness rule (rtol *
  // max(1, max|cpu|)): tolerance_for(F32) for one op, more for a layer of chained ops.
  void expect_all_close(const std::vector<Tensor>& want, const std::vector<Tensor>& got,
                        double rtol, const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t k = 0; k < want.size(); ++k) {
      const std::string name = what + (want.size() > 1 ? " " + std::to_string(k) : "");
      expect_close(tensor::to_floats(gpu(), got[k]), tensor::to_floats(cpu(), want[k]), rtol, 0.0,
                   name.c_str());
    }
  }
};

TEST_P(OpsOnCuda, ForwardAndGradientsMatchTheCpuBackend) {
  const OpCase& c = GetParam();
  OpRun on_cpu = c.make(cpu(), kSeed, 1), on_gpu = c.make(gpu(), kSeed, 1);
  const double rtol = c.tolerance.gpu_rtol;
  const std::vector<Tensor> want = on_cpu.forward(), got = on_gpu.forward();
  expect_all_close(want, got, rtol, c.name + ": output");
  // The same output weights on each backend: drawn on the host from one seed.
  const std::vector<Tensor> w_cpu = output_weights(cpu(), want, kSeed + 1);
  const std::vector<Tensor> w_gpu = output_weights(gpu(), got, kSeed + 1);
  const std::vector<Tensor> grads_cpu = on_cpu.backward(w_cpu);
  const std::vector<Tensor> grads_gpu = on_gpu.backward(w_gpu);
  ASSERT_EQ(grads_cpu.size(), on_cpu.inputs.size());
  ASSERT_EQ(grads_gpu.size(), grads_cpu.size());
  for (size_t i = 0; i < grads_cpu.size(); ++i) {
    expect_all_close({grads_cpu[i]}, {grads_gpu[i]}, rtol,
                     c.name + ": d" + on_cpu.inputs[i].name);
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, OpsOnCuda, ::testing::ValuesIn(all_op_cases()),
                         [](const ::testing::TestParamInfo<OpCase>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace megatron::ops_test
