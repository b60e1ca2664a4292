#include "plan/hardware.hpp"

#include <algorithm>
#include <cctype>
#include <deque>
#include <mutex>
#include <string>

#include "core/error.hpp"
#include "core/printable.hpp"
#include "plan/cpu_rates.hpp"
#include "plan/hardware_file.hpp"

namespace megatron::plan {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;

// Memory sizes are what the driver reports as total (nvidia-smi memory.total), since that is
// what a job can address: the A100's marketed "80GB" is 80 GiB, the H100's 79.6 GiB, and the
// H200's "141GB" is 140.4 GiB (143771 MiB), not 141e9 bytes. Peak FLOP/s are dense (NVIDIA
// quotes "with sparsity" figures at twice these). NVLink is the one-direction half of the
// quoted bidirectional bandwidth; inter-node is one InfiniBand HCA per GPU, as in DGX systems.
// dp_overlap 0.7: Megatron overlaps gradient reduce-scatter with the backward of earlier
// buckets; the last bucket and the weight all-gather of the first stay exposed.
std::vector<HardwareProfile> make_profiles() {
  return {
      {
          .name = "a100-80gb",
          // NVIDIA A100 Tensor Core GPU datasheet (SXM4 80GB): BF16 312 TFLOPS, TF32 156
          // TFLOPS, 80GB HBM2e at 2,039 GB/s, NVLink 600 GB/s; HDR InfiniBand 200 Gb/s.
          .description = "NVIDIA A100 SXM4 80GB",
          .peak_flops_16bit = 312e12,
          .peak_flops_32bit = 156e12,
          .achievable_fraction = 0.60,
          .memory_bytes = 81920 * kMiB,
          .memory_bandwidth = 2.039e12,
          .intra_node_bandwidth = 300e9,
          .inter_node_bandwidth = 25e9,
          .dp_overlap = 0.7,
      },
      {
          .name = "h100-sxm",
          // NVIDIA H100 Tensor Core GPU datasheet (SXM5): BF16 1,979 TFLOPS with sparsity,
          // TF32 989 with sparsity, 80GB HBM3 at 3.35 TB/s, NVLink 900 GB/s; NDR 400 Gb/s.
          .description = "NVIDIA H100 SXM5 80GB",
          .peak_flops_16bit = 989e12,
          .peak_flops_32bit = 494.5e12,
          .achievable_fraction = 0.55,
          .memory_bytes = 81559 * kMiB,
          .memory_bandwidth = 3.35e12,
          .intra_node_bandwidth = 450e9,
          .inter_node_bandwidth = 50e9,
          .dp_overlap = 0.7,
      },
      {
          .name = "h200",
          // NVIDIA H200 Tensor Core GPU datasheet (SXM): same compute as H100 SXM, 141GB
          // HBM3e at 4.8 TB/s, NVLink 900 GB/s; NDR 400 Gb/s.
          .description = "NVIDIA H200 SXM 141GB",
          .peak_flops_16bit = 989e12,
          .peak_flops_32bit = 494.5e12,
          .achievable_fraction = 0.55,
          .memory_bytes = 143771 * kMiB,
          .memory_bandwidth = 4.8e12,
          .intra_node_bandwidth = 450e9,
          .inter_node_bandwidth = 50e9,
          .dp_overlap = 0.7,
      },
      {
          .name = "cpu",
          // This project's CI machine: 2 cores of an AMD EPYC (Zen 4, family 25 model 17),
          // 24 GiB. Zen 4 runs AVX-512 FMAs on two 256-bit pipes: 32 f32 FLOP per cycle per
          // core; a register-resident FMA loop measured 116.6 GFLOP/s on one core (~3.6 GHz
          // boost), so 2 cores give ~233 GFLOP/s. bf16 is storage only (math in f32), so the
          // 16-bit peak is the f32 one. Ranks talk through shared-memory MPI.
          .description = "2-core AMD EPYC (Zen 4, AVX-512), shared-memory MPI",
          .device = "cpu",
          .peak_flops_16bit = 233e9,
          .peak_flops_32bit = 233e9,
          // The best calibrated GEMM (the rate grids below) and out = a + b over 256 MiB.
          .achievable_fraction = 0.89,
          .memory_bytes = 24 * kGiB,
          .memory_bandwidth = 34e9,
          .intra_node_bandwidth = 10e9,
          .inter_node_bandwidth = 1e9,
          .dp_overlap = 0.0,
          // Resident memory of `megatron run` beyond its tensors (scripts/bench/memory.sh):
          // 11 MiB of code and libraries, plus OpenBLAS's GEMM buffers and the backend's
          // per-thread conversion scratch once large GEMMs run; measured 103-129 MiB from
          // gpt-tiny to GPT-2 124M on 2 threads.
          .runtime_overhead_bytes = 112.0 * 1024 * 1024,
          .kernel_overhead_s = 0,  // measured: below a microsecond
          .rates_16bit = cpu_rates_16bit(),
          .rates_32bit = cpu_rates_32bit(),
          .source = "datasheet; rates measured with `megatron plan --calibrate` (cpu_rates.cpp)",
      },
  };
}

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return out;
}

// Short names people type; each maps to the profile it means.
constexpr std::pair<std::string_view, std::string_view> kAliases[] = {
    {"a100", "a100-80gb"},
    {"h100", "h100-sxm"},
};

}  // namespace

const std::vector<HardwareProfile>& hardware_profiles() {
  static const std::vector<HardwareProfile> profiles = make_profiles();
  return profiles;
}

bool is_profile_file(std::string_view name) {
  return name.size() > 5 && lower(name.substr(name.size() - 5)) == ".json";
}

const HardwareProfile& find_hardware(std::string_view name) {
  if (is_profile_file(name)) {
    // Files are read once per process; a deque keeps the references handed out valid.
    static std::mutex mutex;
    static std::deque<std::pair<std::string, HardwareProfile>> files;
    const std::lock_guard<std::mutex> lock(mutex);
    for (const auto& [path, profile] : files)
      if (path == name) return profile;
    HardwareProfile profile = read_hardware_file(std::string(name));
    return files.emplace_back(std::string(name), std::move(profile)).second;
  }
  std::string wanted = lower(name);
  for (const auto& [alias, target] : kAliases)
    if (wanted == alias) wanted = target;
  for (const HardwareProfile& profile : hardware_profiles())
    if (profile.name == wanted) return profile;

  std::string known;
  for (const HardwareProfile& profile : hardware_profiles())
    known += (known.empty() ? "" : ", ") + profile.name;
  std::string aliases;
  for (const auto& [alias, target] : kAliases)
    aliases += (aliases.empty() ? "" : ", ") + std::string(alias) + " = " + std::string(target);
  throw UserError("unknown hardware '" + printable(name) + "'; known profiles: " + known +
                  " (aliases: " + aliases + "), or a profile file NAME.json from `megatron plan "
                  "--calibrate`");
}

}  // namespace megatron::plan
