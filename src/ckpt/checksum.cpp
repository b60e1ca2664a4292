#include "ckpt/checksum.hpp"

#include <zlib.h>

#include <algorithm>
#include <future>
#include <thread>
#include <vector>

namespace megatron::ckpt {
namespace {

uint32_t serial_crc(std::span<const std::byte> bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  constexpr size_t kStep = size_t(1) << 30;  // zlib takes lengths as uInt
  for (size_t at = 0; at < bytes.size(); at += kStep) {
    crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes.data() + at),
                uInt(std::min(kStep, bytes.size() - at)));
  }
  return uint32_t(crc);
}

}  // namespace

uint32_t crc32_of(std::span<const std::byte> bytes) {
  constexpr size_t kMinPart = size_t(8) << 20;  // below this a thread costs more than it saves
  const size_t threads = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 8);
  const size_t parts = std::min(threads, std::max<size_t>(bytes.size() / kMinPart, 1));
  if (parts == 1) return serial_crc(bytes);
  const size_t part = bytes.size() / parts;
  std::vector<std::future<uint32_t>> rest;
  for (size_t p = 1; p < parts; ++p) {
    const size_t begin = p * part, end = p + 1 == parts ? bytes.size() : begin + part;
    rest.push_back(std::async(std::launch::async, serial_crc, bytes.subspan(begin, end - begin)));
  }
  uLong crc = serial_crc(bytes.first(part));
  for (size_t p = 1; p < parts; ++p) {
    const size_t length = (p + 1 == parts ? bytes.size() : (p + 1) * part) - p * part;
    crc = crc32_combine(crc, rest[p - 1].get(), z_off_t(length));
  }
  return uint32_t(crc);
}

}  // namespace megatron::ckpt
