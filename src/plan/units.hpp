// How the planner writes numbers for people: GiB with one decimal, counts with thousands
// separators or a short suffix (174.6B), so reports and warnings read the same everywhere.
#pragma once

#include <cstdint>
#include <string>

namespace megatron::plan {

inline constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;

std::string gib(double bytes);               // "91.2 GiB"
std::string bytes_text(double bytes);        // GiB from 1 GiB up, else MiB or KiB: "734.0 MiB"
std::string flops_text(double flops);        // "3386.2 PFLOP", "61.4 TFLOP", "12.0 GFLOP"
std::string with_separators(int64_t count);  // "174,615,846,912"
std::string short_count(double count);       // "174.6B", "1.3B", "350.0M", "12.3K"

}  // namespace megatron::plan
