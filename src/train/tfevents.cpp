#include "train/tfevents.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstring>

#include "core/error.hpp"

namespace megatron::train {
namespace {

constexpr std::array<uint32_t, 256> kCrcTable = [] {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    t[i] = c;
  }
  return t;
}();

// Protocol-buffer wire encoding: the handful of field kinds the events use.
void varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(char(uint8_t(v) | 0x80));
    v >>= 7;
  }
  out.push_back(char(v));
}
void key(std::string& out, int field, int wire) { varint(out, uint64_t(field) << 3 | uint64_t(wire)); }
template <class T>
void little_endian(std::string& out, T v) {
  static_assert(std::endian::native == std::endian::little, "TFRecord framing is little-endian");
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));
  out.append(bytes, sizeof(T));
}
void bytes_field(std::string& out, int field, std::string_view v) {
  key(out, field, 2);
  varint(out, v.size());
  out.append(v);
}

// Event{wall_time = 1, step = 2, <rest>}.
std::string event(double wall_time, int64_t step, const std::string& rest) {
  std::string e;
  key(e, 1, 1);
  little_endian(e, wall_time);
  key(e, 2, 0);
  varint(e, uint64_t(step));
  return e + rest;
}

std::string summary_of(const std::string& value) {
  std::string summary;
  bytes_field(summary, 1, value);  // Summary.value
  std::string rest;
  bytes_field(rest, 5, summary);  // Event.summary
  return rest;
}

double now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

uint32_t crc32c(std::string_view bytes) {
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : bytes) c = kCrcTable[(c ^ b) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(std::string_view bytes) {
  const uint32_t c = crc32c(bytes);
  return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}

std::string version_event(double wall_time) {
  std::string rest;
  bytes_field(rest, 3, "brain.Event:2");
  std::string e;
  key(e, 1, 1);
  little_endian(e, wall_time);
  return e + rest;
}

std::string scalar_event(double wall_time, int64_t step, std::string_view tag, float value) {
  std::string v;
  bytes_field(v, 1, tag);  // Value.tag
  key(v, 2, 5);            // Value.simple_value (float)
  little_endian(v, value);
  return event(wall_time, step, summary_of(v));
}

std::string text_event(double wall_time, int64_t step, std::string_view tag, std::string_view text) {
  std::string plugin;
  bytes_field(plugin, 1, "text");  // PluginData.plugin_name
  std::string metadata;
  bytes_field(metadata, 1, plugin);  // SummaryMetadata.plugin_data
  std::string tensor;
  key(tensor, 1, 0);  // TensorProto.dtype = DT_STRING
  varint(tensor, 7);
  std::string shape;
  std::string dim;
  key(dim, 1, 0);  // Dim.size = 1
  varint(dim, 1);
  bytes_field(shape, 2, dim);    // TensorShapeProto.dim
  bytes_field(tensor, 2, shape);  // TensorProto.tensor_shape: [1]
  bytes_field(tensor, 8, text);   // TensorProto.string_val
  std::string v;
  bytes_field(v, 1, tag);
  bytes_field(v, 8, tensor);    // Value.tensor
  bytes_field(v, 9, metadata);  // Value.metadata
  return event(wall_time, step, summary_of(v));
}

std::string tf_record(std::string_view data) {
  std::string length;
  little_endian(length, uint64_t(data.size()));
  std::string out = length;
  little_endian(out, masked_crc32c(length));
  out.append(data);
  little_endian(out, masked_crc32c(data));
  return out;
}

EventFile::EventFile(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  char host[256] = "localhost";
  ::gethostname(host, sizeof(host) - 1);
  static std::atomic<int> count{0};
  const double wall = now();
  path_ = dir / fmt::format("events.out.tfevents.{:010d}.{}.{}.{}", int64_t(wall), host, ::getpid(), count++);
  out_.open(path_, std::ios::binary | std::ios::app);
  if (!out_) {
    throw UserError(fmt::format("logging.tensorboard_dir: cannot write {} ({}); choose a writable "
                                "directory",
                                path_.string(), ec ? ec.message() : "cannot create the file"));
  }
  write(version_event(wall));
}

void EventFile::scalar(std::string_view tag, double value, int64_t step) {
  write(scalar_event(now(), step, tag, float(value)));
}

void EventFile::text(std::string_view tag, std::string_view text, int64_t step) {
  write(text_event(now(), step, tag, text));
}

void EventFile::write(const std::string& event) {
  out_ << tf_record(event);
  out_.flush();
}

}  // namespace megatron::train
