// The communication watchdog: a rank blocked in a collective or transfer for longer than the
// timeout (a peer died or hangs) prints one line naming rank, group and operation, and exits 1.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace megatron::dist {

// Process-wide settings of the watchdog. Its thread starts with the first watched operation
// and checks the operations in flight about every 100 ms; an operation itself costs an
// uncontended lock and a clock read, never a thread wake-up.
class Watchdog {
 public:
  // How long one operation may block; 10 minutes by default (Megatron's
  // --distributed-timeout-minutes). Applies to operations already in flight too.
  static void set_timeout(std::chrono::milliseconds timeout);
  static std::chrono::milliseconds timeout();
  // The world rank named in the message; the world communicator sets it when it is created.
  static void set_world_rank(int rank);
};

// Graceful stop (what Slurm's time limit and preemption signals ask for): from now on SIGTERM,
// SIGUSR1 and SIGINT only set stop_signal(), and training stops at its next iteration boundary;
// a second one of them ends the process at once (exit 128 + signal, one error line). A
// rank that SIGTERM finds blocked in one communication operation which then makes no progress
// for `grace` is reported and ended as before: that is a launcher stopping a failed job (Open
// MPI sends SIGKILL one second after SIGTERM).
void enable_graceful_stop(std::chrono::milliseconds grace = std::chrono::milliseconds(500));
// The signal that asked for a graceful stop, or 0.
int stop_signal();

// The training iteration named in the message; the trainer sets it as each one begins.
// 0 (the default) means the job is still starting up.
void set_current_iteration(int64_t iteration);

// One blocking operation, as the message names it. `op` is a string literal ("all_reduce");
// `peer` is the group rank of a send's or receive's partner, -1 for a collective; `group`
// must outlive the operation.
struct WatchedOp {
  const char* op = "";
  int peer = -1;
  std::string_view group;
  int group_size = 1;
};

// Watches the operation of its lifetime on this thread. Scopes nest (a blocking all_reduce
// waits on its request): the outermost one is watched, from when it opened.
class WatchdogScope {
 public:
  explicit WatchdogScope(const WatchedOp& op);
  ~WatchdogScope();
  WatchdogScope(const WatchdogScope&) = delete;
  WatchdogScope& operator=(const WatchdogScope&) = delete;

 private:
  bool outermost_;
};

// Wall-clock seconds this process's threads have spent inside watched operations (blocking
// calls and waits): the communication that computation did not hide.
double seconds_blocked_in_communication();

// The line a rank prints when SIGTERM ends it (the launcher stopping a failed job) once any
// communication was watched: where it stood, e.g. "megatron: error: rank 0: stopped by SIGTERM
// in all_reduce on group dp (2 ranks), waiting for 1.2 s at iteration 3: ...". `op` is null
// outside communication.
std::string termination_message(int world_rank, const WatchedOp* op,
                                std::chrono::steady_clock::duration blocked, int64_t iteration);

// The line printed on a timeout, without its newline, e.g. "megatron: error: rank 3:
// all_reduce on group dp (2 ranks) did not complete within 30 s at iteration 7: ...".
std::string timeout_message(int world_rank, const WatchedOp& op, std::chrono::milliseconds timeout,
                            int64_t iteration);

}  // namespace megatron::dist
