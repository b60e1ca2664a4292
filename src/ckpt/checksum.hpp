// The CRC-32 (zlib's) that checkpoints keep per piece, computed over several threads for large
// pieces (zlib's crc32_combine joins the parts), since one core checks under 1 GB/s.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace megatron::ckpt {

uint32_t crc32_of(std::span<const std::byte> bytes);

}  // namespace megatron::ckpt
