#include "train/calibration.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>

#include "dist/launcher.hpp"

namespace megatron::train {
namespace {

using tensor::Backend;
using tensor::DType;
using tensor::Tensor;

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Seconds one call of `work` takes: one warm-up call, then calls until `budget` seconds have
// passed (at least 3, at most 50); the median, so a preempted call does not count.
template <class Work>
double time_call(Backend& backend, Work&& work, double budget) {
  work();
  backend.synchronize();
  std::vector<double> times;
  const double start = now();
  while (times.size() < 3 || (times.size() < 50 && now() - start < budget)) {
    const double t0 = now();
    work();
    backend.synchronize();
    times.push_back(now() - t0);
  }
  std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2),
                   times.end());
  return std::max(times[times.size() / 2], 1e-9);
}

Tensor random_tensor(Backend& backend, const tensor::Shape& shape, DType dtype, uint64_t stream) {
  Tensor t = backend.empty(shape, dtype);
  backend.normal(t, 0.0f, 1.0f, {.seed = 1234, .stream = stream});
  return t;
}

plan::RateGrid measure_gemms(Backend& backend, DType dtype, const CalibrationGrid& grid,
                             double budget) {
  plan::RateGrid out;
  out.axes = {grid.gemm_sizes, grid.gemm_sizes, grid.gemm_sizes};
  for (double m : grid.gemm_sizes)
    for (double n : grid.gemm_sizes)
      for (double k : grid.gemm_sizes) {
        const auto M = static_cast<int64_t>(m), N = static_cast<int64_t>(n),
                   K = static_cast<int64_t>(k);
        const Tensor a = random_tensor(backend, {M, K}, dtype, 1);
        const Tensor b = random_tensor(backend, {K, N}, dtype, 2);
        Tensor c = backend.empty({M, N}, dtype);
        const double seconds =
            time_call(backend, [&] { backend.gemm(a, false, b, false, c); }, budget);
        out.rates.push_back(2 * m * n * k / seconds);
      }
  return out;
}

// Causal self-attention over `heads` heads of one sequence, forward and backward, at each
// (sequence, head dim); the rates count the FLOPs the kernels execute (plan/stage_work.hpp).
std::pair<plan::RateGrid, plan::RateGrid> measure_attention(Backend& backend, DType dtype,
                                                            const CalibrationGrid& grid,
                                                            double target_flops, double budget) {
  plan::RateGrid forward, backward;
  forward.axes = backward.axes = {grid.attention_seqs, grid.attention_head_dims};
  for (double seq : grid.attention_seqs)
    for (double d : grid.attention_head_dims) {
      const double per_head = 4 * (seq * (seq + 1) / 2) * d;
      const auto heads = static_cast<int64_t>(std::clamp(std::ceil(target_flops / per_head), 1.0, 64.0));
      const tensor::AttentionShape shape{.batch = 1, .seq = static_cast<int64_t>(seq),
                                         .heads = heads, .groups = heads,
                                         .head_dim = static_cast<int64_t>(d)};
      tensor::AttentionOptions options;
      options.scale = static_cast<float>(1 / std::sqrt(d));
      options.causal = true;
      const Tensor qkv = random_tensor(backend, {shape.seq, shape.qkv_width()}, dtype, 3);
      Tensor out = backend.empty({shape.seq, heads * shape.head_dim}, dtype);
      Tensor lse = backend.empty({1, heads, shape.seq}, DType::F32);
      const Tensor dout = random_tensor(backend, {shape.seq, heads * shape.head_dim}, dtype, 4);
      Tensor dqkv = backend.empty({shape.seq, shape.qkv_width()}, dtype);
      const double flops = per_head * static_cast<double>(heads);
      const double f = time_call(
          backend, [&] { backend.attention_forward(qkv, shape, options, out, lse); }, budget);
      const double b = time_call(
          backend,
          [&] { backend.attention_backward(qkv, out, dout, lse, shape, options, dqkv); }, budget);
      forward.rates.push_back(flops / f);
      backward.rates.push_back(2.5 * flops / b);
    }
  return {forward, backward};
}

// Bytes per second of out = a + b over arrays far larger than any cache.
double measure_bandwidth(Backend& backend, int64_t elements, double budget) {
  const Tensor a = random_tensor(backend, {elements}, DType::F32, 5);
  const Tensor b = random_tensor(backend, {elements}, DType::F32, 6);
  Tensor out = backend.empty({elements}, DType::F32);
  const double seconds = time_call(backend, [&] { backend.add(a, b, out); }, budget);
  return 3.0 * static_cast<double>(elements) * 4 / seconds;
}

// What each small kernel costs regardless of its size: a run of adds of 4096 elements.
double measure_kernel_overhead(Backend& backend, double bandwidth, double budget) {
  constexpr int kCalls = 200;
  constexpr int64_t kElements = 4096;
  const Tensor a = random_tensor(backend, {kElements}, DType::F32, 7);
  Tensor out = backend.empty({kElements}, DType::F32);
  const double seconds = time_call(
      backend, [&] { for (int i = 0; i < kCalls; ++i) backend.add(a, a, out); }, budget);
  const double moving = 3.0 * kElements * 4 / bandwidth;
  return std::max(seconds / kCalls - moving, 0.0);
}

// Bus bandwidth of an all-reduce (bytes each rank sends and receives, one direction, per
// second): what a ring moves, 2 (n - 1) / n of the buffer, over the time.
double measure_all_reduce(Backend& backend, dist::Communicator& world, int64_t elements,
                          double budget) {
  Tensor x = random_tensor(backend, {elements}, DType::F32, 8);
  // Every rank runs the same number of calls: the count comes from rank 0's timing.
  world.barrier();
  const double t0 = now();
  for (int i = 0; i < 3; ++i) world.all_reduce(x);
  backend.synchronize();
  Tensor calls = backend.empty({1}, DType::F32);
  backend.fill(calls, std::clamp(std::ceil(budget / ((now() - t0) / 3)), 3.0, 50.0));
  world.broadcast(calls, 0);
  float n = 0;
  backend.read(calls, &n);
  world.barrier();
  const double start = now();
  for (int i = 0; i < static_cast<int>(n); ++i) world.all_reduce(x);
  backend.synchronize();
  const double seconds = (now() - start) / n;
  const double ranks = world.size();
  return 2 * (ranks - 1) / ranks * static_cast<double>(elements) * 4 / seconds;
}

std::string host_name() {
  char host[256] = "localhost";
  ::gethostname(host, sizeof(host) - 1);
  return host;
}

std::string today() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d", &tm);
  return text;
}

}  // namespace

CalibrationGrid calibration_grid(tensor::Device device, bool quick) {
  if (quick) return {{64, 256}, {128, 256}, {64}};
  // Octaves: throughput is not smooth in the sizes (a 64-wide output runs at half the rate of a
  // 128-wide one on OpenBLAS), so a coarser grid interpolates across such dips.
  if (device == tensor::Device::Cpu)
    return {{64, 128, 256, 512, 1024, 2048, 4096}, {128, 256, 512, 1024, 2048}, {64, 128}};
  return {{256, 512, 1024, 2048, 4096, 8192, 16384}, {512, 1024, 2048, 4096, 8192}, {64, 128}};
}

plan::HardwareProfile calibrate(const plan::HardwareProfile& base, Backend& backend,
                                dist::Communicator* world, const CalibrationOptions& options) {
  const bool cpu = backend.device() == tensor::Device::Cpu;
  const CalibrationGrid grid = calibration_grid(backend.device(), options.quick);
  const double budget = options.quick ? 0.01 : cpu ? 0.03 : 0.02;
  const bool measures = world == nullptr || world->rank() == 0;
  auto say = [&](const std::string& line) {
    if (options.progress && measures) options.progress(line);
  };

  plan::HardwareProfile out = base;
  out.device = cpu ? "cpu" : "cuda";
  // Ranks sharing a machine would share its cores and memory: rank 0 measures the kernels
  // alone while the others wait; then all measure the collectives together.
  if (measures) {
    const double start = now();
    const int64_t elements = options.quick ? (int64_t{1} << 22) : cpu ? (int64_t{1} << 26)
                                                                      : (int64_t{1} << 28);
    say(fmt::format("memory bandwidth: out = a + b over {} MiB arrays", elements * 4 >> 20));
    out.memory_bandwidth = measure_bandwidth(backend, elements, budget);
    say(fmt::format("  {:.1f} GB/s", out.memory_bandwidth / 1e9));
    out.kernel_overhead_s = measure_kernel_overhead(backend, out.memory_bandwidth, budget);
    say(fmt::format("kernel overhead: {:.1f} us per small kernel", out.kernel_overhead_s * 1e6));

    double best = 0;
    for (const auto& [dtype, rates, name] :
         {std::tuple{DType::F32, &out.rates_32bit, "f32"},
          std::tuple{DType::Bf16, &out.rates_16bit, "bf16"}}) {
      const std::size_t points = grid.gemm_sizes.size() * grid.gemm_sizes.size() *
                                 grid.gemm_sizes.size();
      say(fmt::format("{} GEMMs: {} shapes, m, n, k in {}", name, points,
                      fmt::join(grid.gemm_sizes, "/")));
      rates->gemm = measure_gemms(backend, dtype, grid, budget);
      const double peak = *std::max_element(rates->gemm.rates.begin(), rates->gemm.rates.end());
      say(fmt::format("  best {:.1f} GFLOP/s, smallest shape {:.1f} GFLOP/s ({:.0f} s so far)",
                      peak / 1e9, rates->gemm.rates.front() / 1e9, now() - start));
      const double datasheet = dtype == DType::F32 ? base.peak_flops_32bit : base.peak_flops_16bit;
      if (datasheet > 0) best = std::max(best, peak / datasheet);
      say(fmt::format("{} attention (causal, forward and backward): sequence {} x head dim {}",
                      name, fmt::join(grid.attention_seqs, "/"),
                      fmt::join(grid.attention_head_dims, "/")));
      std::tie(rates->attention_forward, rates->attention_backward) =
          measure_attention(backend, dtype, grid, cpu ? 2e8 : 2e10, budget);
      say(fmt::format("  forward {:.1f}-{:.1f}, backward {:.1f}-{:.1f} GFLOP/s ({:.0f} s so far)",
                      *std::min_element(rates->attention_forward.rates.begin(),
                                        rates->attention_forward.rates.end()) / 1e9,
                      *std::max_element(rates->attention_forward.rates.begin(),
                                        rates->attention_forward.rates.end()) / 1e9,
                      *std::min_element(rates->attention_backward.rates.begin(),
                                        rates->attention_backward.rates.end()) / 1e9,
                      *std::max_element(rates->attention_backward.rates.begin(),
                                        rates->attention_backward.rates.end()) / 1e9,
                      now() - start));
    }
    if (best > 0) out.achievable_fraction = std::min(best, 1.0);
  }

  std::string links;
  if (world != nullptr && world->size() > 1) {
    const int64_t elements = options.quick ? (int64_t{1} << 18) : cpu ? (int64_t{1} << 22)
                                                                      : (int64_t{1} << 26);
    say(fmt::format("all-reduce over {} ranks: {} MiB", world->size(), elements * 4 >> 20));
    const double bandwidth = measure_all_reduce(backend, *world, elements, budget);
    // One node when every rank's local rank is its rank (the launcher put all on one host).
    Tensor local = backend.empty({1}, DType::F32);
    const dist::LaunchInfo launch = dist::launch_info();
    backend.fill(local, launch.local_rank == launch.rank ? 0.0 : 1.0);
    world->all_reduce(local);
    float spread = 0;
    backend.read(local, &spread);
    (spread == 0 ? out.intra_node_bandwidth : out.inter_node_bandwidth) = bandwidth;
    links = fmt::format(", {} ranks ({})", world->size(), spread == 0 ? "one node" : "several nodes");
    say(fmt::format("  {:.2f} GB/s bus bandwidth, kept as the {} bandwidth", bandwidth / 1e9,
                    spread == 0 ? "intra-node" : "inter-node"));
  }
  out.source = fmt::format("megatron plan --calibrate{} on {}, {}, {}{}",
                           options.quick ? " --quick" : "", host_name(), today(),
                           backend.description(), links);
  return out;
}

}  // namespace megatron::train
