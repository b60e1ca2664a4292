#include "data/token_ids.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "core/error.hpp"

namespace megatron::data {
namespace {

struct IdRange {
  int64_t min = 0, max = 0;
};

// Plain min/max reductions over a typed array: compilers turn this into SIMD min/max, so the
// scan runs at memory bandwidth. The .bin mapping is page-aligned and holds whole tokens, so
// it is a valid T array.
template <class T>
IdRange range_of(const T* ids, std::size_t count) {
  T lo = std::numeric_limits<T>::max(), hi = std::numeric_limits<T>::lowest();
  for (std::size_t i = 0; i < count; ++i) {
    lo = std::min(lo, ids[i]);
    hi = std::max(hi, ids[i]);
  }
  return {static_cast<int64_t>(lo), static_cast<int64_t>(hi)};
}

template <class T>
std::size_t first_outside(const T* ids, std::size_t count, int64_t vocab_size) {
  for (std::size_t i = 0; i < count; ++i)
    if (static_cast<int64_t>(ids[i]) < 0 || static_cast<int64_t>(ids[i]) >= vocab_size) return i;
  return count;
}

template <class T>
void check_as(const IndexedDataset& dataset, int64_t vocab_size) {
  if constexpr (std::is_unsigned_v<T>)
    if (static_cast<uint64_t>(std::numeric_limits<T>::max()) < static_cast<uint64_t>(vocab_size))
      return;
  const auto bytes = dataset.token_bytes();
  const auto* ids = reinterpret_cast<const T*>(bytes.data());
  const std::size_t count = bytes.size() / sizeof(T);
  if (count == 0) return;
  const IdRange range = range_of(ids, count);
  if (range.min >= 0 && range.max < vocab_size) return;

  // Only a dataset that fails pays for finding where.
  const std::size_t at = first_outside(ids, count, vocab_size);
  const auto offsets = dataset.sequence_offsets();
  const auto byte = static_cast<int64_t>(at * sizeof(T));
  const auto sequence =
      std::upper_bound(offsets.begin(), offsets.end(), byte) - offsets.begin() - 1;
  throw UserError(fmt::format(
      "dataset '{}': sequence {} holds token id {}, outside the model's vocabulary of {} ids "
      "(model.vocab_size): the dataset was made with another tokenizer, or model.vocab_size "
      "is wrong",
      dataset.prefix(), sequence, static_cast<int64_t>(ids[at]), vocab_size));
}

}  // namespace

void check_token_ids(const IndexedDataset& dataset, int64_t vocab_size) {
  switch (dataset.token_type()) {
    case TokenType::U8:
      return check_as<uint8_t>(dataset, vocab_size);
    case TokenType::I8:
      return check_as<int8_t>(dataset, vocab_size);
    case TokenType::U16:
      return check_as<uint16_t>(dataset, vocab_size);
    case TokenType::I16:
      return check_as<int16_t>(dataset, vocab_size);
    case TokenType::I32:
      return check_as<int32_t>(dataset, vocab_size);
    case TokenType::I64:
      return check_as<int64_t>(dataset, vocab_size);
    case TokenType::F32:
    case TokenType::F64:
      break;  // refused when the dataset was opened
  }
}

}  // namespace megatron::data
