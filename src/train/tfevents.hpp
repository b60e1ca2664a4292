// TensorBoard event files without protobuf: the few Event and Summary fields scalars and text
// need, encoded by hand, in TFRecord framing with masked CRC-32C (tensorboard's
// event_file_writer and record_writer; ../shared/docs/reference/megatron-behaviour.md section 6).
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace megatron::train {

// CRC-32C (Castagnoli), and TFRecord's mask of it.
uint32_t crc32c(std::string_view bytes);
uint32_t masked_crc32c(std::string_view bytes);

// Serialized Event messages.
std::string version_event(double wall_time);  // file_version "brain.Event:2"
std::string scalar_event(double wall_time, int64_t step, std::string_view tag, float value);
std::string text_event(double wall_time, int64_t step, std::string_view tag, std::string_view text);

// One TFRecord: length, its masked CRC, the data, its masked CRC (little-endian).
std::string tf_record(std::string_view data);

// An events.out.tfevents.<time>.<host>.<pid>.<n> file in a directory (created), starting with
// the version event; every event is flushed as it is written, as tensorboard's writer does.
class EventFile {
 public:
  explicit EventFile(const std::filesystem::path& dir);
  void scalar(std::string_view tag, double value, int64_t step);
  void text(std::string_view tag, std::string_view text, int64_t step);
  const std::filesystem::path& path() const { return path_; }

 private:
  void write(const std::string& event);
  std::filesystem::path path_;
  std::ofstream out_;
};

}  // namespace megatron::train
