// Fault injection for drills and tests: MEGATRON_FAULT makes one rank die (SIGKILL) or freeze
// (SIGSTOP, as a hung GPU would) at one iteration, or die in the middle of saving a checkpoint,
// so that the failure paths can be seen.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace megatron::dist {

struct Fault {
  enum class Kind { Kill, Hang, KillDuringSave };
  Kind kind = Kind::Kill;
  int rank = 0;           // world rank
  int64_t iteration = 0;  // as given to set_current_iteration
};

// Parses "kill:rank=1:iteration=3", "hang:rank=1:iteration=3" or
// "kill_during_save:rank=0:iteration=4"; empty: no fault. Throws UserError naming the expected
// form on anything else.
std::optional<Fault> parse_fault(std::string_view text);

// Raises the fault of env MEGATRON_FAULT when `world_rank` and `iteration` match it: SIGKILL
// for kill, SIGSTOP for hang (the process stays, frozen, until someone kills it). Otherwise
// returns. The trainer calls it at the start of each iteration.
void inject_fault(int world_rank, int64_t iteration);

// KillDuringSave: SIGKILL when the checkpoint of `iteration` has its rank files written but is
// not yet complete (no index, `latest` not moved). The checkpointer calls it there.
void inject_save_fault(int world_rank, int64_t iteration);

}  // namespace megatron::dist
