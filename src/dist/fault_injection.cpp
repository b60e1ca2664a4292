#include "dist/fault_injection.hpp"

#include <charconv>
#include <csignal>
#include <cstdlib>
#include <string>

#include "core/error.hpp"

namespace megatron::dist {
namespace {

constexpr std::string_view kForm =
    "expected kill:rank=R:iteration=I, hang:rank=R:iteration=I or "
    "kill_during_save:rank=R:iteration=I (R, I whole numbers)";

[[noreturn]] void malformed(std::string_view text) {
  throw UserError("MEGATRON_FAULT=" + std::string(text) + ": " + std::string(kForm));
}

// Consumes "<key>=<number>" from the front of `rest`, then a ':' unless it ends there.
template <typename Int>
bool take_field(std::string_view& rest, std::string_view key, Int& value) {
  if (!rest.starts_with(key) || rest.size() <= key.size() || rest[key.size()] != '=') return false;
  rest.remove_prefix(key.size() + 1);
  const auto [end, error] = std::from_chars(rest.data(), rest.data() + rest.size(), value);
  if (error != std::errc() || end == rest.data() || value < 0) return false;
  rest.remove_prefix(static_cast<size_t>(end - rest.data()));
  if (rest.starts_with(':')) rest.remove_prefix(1);
  return true;
}

}  // namespace

std::optional<Fault> parse_fault(std::string_view text) {
  if (text.empty()) return std::nullopt;
  Fault fault;
  std::string_view rest = text;
  if (rest.starts_with("kill:")) {
    fault.kind = Fault::Kind::Kill;
    rest.remove_prefix(5);
  } else if (rest.starts_with("hang:")) {
    fault.kind = Fault::Kind::Hang;
    rest.remove_prefix(5);
  } else if (rest.starts_with("kill_during_save:")) {
    fault.kind = Fault::Kind::KillDuringSave;
    rest.remove_prefix(17);
  } else {
    malformed(text);
  }
  if (!take_field(rest, "rank", fault.rank) || !take_field(rest, "iteration", fault.iteration) ||
      !rest.empty() || text.ends_with(':')) {
    malformed(text);
  }
  return fault;
}

void inject_fault(int world_rank, int64_t iteration) {
  const char* value = std::getenv("MEGATRON_FAULT");
  if (!value) return;
  const std::optional<Fault> fault = parse_fault(value);
  if (!fault || fault->rank != world_rank || fault->iteration != iteration) return;
  if (fault->kind == Fault::Kind::Kill) std::raise(SIGKILL);
  if (fault->kind == Fault::Kind::Hang) std::raise(SIGSTOP);
}

void inject_save_fault(int world_rank, int64_t iteration) {
  const char* value = std::getenv("MEGATRON_FAULT");
  if (!value) return;
  const std::optional<Fault> fault = parse_fault(value);
  if (fault && fault->kind == Fault::Kind::KillDuringSave && fault->rank == world_rank &&
      fault->iteration == iteration) {
    std::raise(SIGKILL);
  }
}

}  // namespace megatron::dist
