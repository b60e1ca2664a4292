#include "eval/requests.hpp"

#include <algorithm>

namespace megatron::eval {

Request encode_pair(const data::Tokenizer& tokenizer, std::string context,
                    std::string continuation, int32_t prefix_token) {
  if (context.empty()) return {.context = {prefix_token}, .continuation = tokenizer.encode(continuation)};
  // Python's rstrip(): any whitespace.
  size_t keep = context.size();
  while (keep > 0 && std::string_view(" \t\n\r\v\f").find(context[keep - 1]) != std::string_view::npos) {
    --keep;
  }
  if (keep < context.size()) {
    continuation = context.substr(keep) + continuation;
    context.resize(keep);
  }
  const std::vector<int32_t> whole = tokenizer.encode(context + continuation);
  Request r{.context = tokenizer.encode(context)};
  const size_t n = std::min(r.context.size(), whole.size());
  r.continuation.assign(whole.begin() + std::ptrdiff_t(n), whole.end());
  return r;
}

std::vector<Request> rolling_windows(const std::vector<int32_t>& tokens, int32_t prefix_token,
                                     int64_t max_length) {
  std::vector<Request> out;
  if (tokens.empty()) return out;
  const size_t L = size_t(max_length);
  const size_t first = std::min(L, tokens.size());
  // ([prefix] + tokens[:first - 1], tokens[:first]) made disjoint: context [prefix].
  out.push_back({.context = {prefix_token},
                 .continuation = {tokens.begin(), tokens.begin() + std::ptrdiff_t(first)}});
  size_t predicted = first;
  while (predicted < tokens.size()) {
    const size_t n = std::min(tokens.size() - predicted, L);
    const size_t end = predicted + n;
    // Window inputs tokens[end - L - 1, end - 1), predicting tokens[end - n, end): the disjoint
    // context is the inputs before the first predicted token.
    const size_t begin = end >= L + 1 ? end - L - 1 : 0;
    out.push_back({.context = {tokens.begin() + std::ptrdiff_t(begin),
                               tokens.begin() + std::ptrdiff_t(end - n)},
                   .continuation = {tokens.begin() + std::ptrdiff_t(end - n),
                                    tokens.begin() + std::ptrdiff_t(end)}});
    predicted = end;
  }
  return out;
}

std::vector<Request> overlapping_windows(const std::vector<int32_t>& tokens, int64_t seq_length,
                                         int64_t stride) {
  std::vector<Request> out;
  const int64_t T = int64_t(tokens.size());
  if (T < 2) return out;
  stride = std::clamp<int64_t>(stride, 1, seq_length);
  // Megatron's window count: max(ceil(max(T - 1 - stride, 0) / stride) + 1, 1).
  const int64_t windows = std::max<int64_t>((std::max<int64_t>(T - 1 - stride, 0) + stride - 1) / stride + 1, 1);
  for (int64_t i = 0; i < windows; ++i) {
    const int64_t begin = i * stride;
    const int64_t end = std::min(T, begin + seq_length + 1);  // window tokens [begin, end)
    if (end - begin < 2) break;
    // Window 0 scores every target; later ones the targets at the last `stride` positions.
    const int64_t scored =
        i == 0 ? end - begin - 1 : std::max<int64_t>(0, end - begin - 1 - (seq_length - stride));
    if (scored == 0) continue;
    out.push_back({.context = {tokens.begin() + begin, tokens.begin() + (end - scored)},
                   .continuation = {tokens.begin() + (end - scored), tokens.begin() + end}});
  }
  return out;
}

}  // namespace megatron::eval
