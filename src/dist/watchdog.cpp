#include "dist/watchdog.hpp"

#include <semaphore.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace megatron::dist {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// What one thread is blocked in. The owner thread writes it and the watchdog thread reads it,
// both under `mutex`: the lock is uncontended but for the moment of a check, and it keeps
// `op.group` alive while it is read (the scope clears `active` under it before returning).
struct Slot {
  std::mutex mutex;
  bool active = false;
  Clock::time_point start;
  WatchedOp op;
  int depth = 0;  // open scopes; the owner thread's alone
  Clock::duration blocked{};  // summed over finished outermost scopes
};

struct Registry {
  std::mutex mutex;  // guards `slots`
  std::vector<Slot*> slots;
  std::atomic<int64_t> timeout_ms{10 * 60 * 1000};
  std::atomic<int> world_rank{0};
  std::atomic<int64_t> iteration{0};
  std::once_flag started;
  sem_t wake;                       // posted by the SIGTERM handler
  std::atomic<int> terminated_by{0};  // the signal, once one arrived
  std::atomic<bool> graceful{false};
  std::atomic<int64_t> grace_ms{500};
  std::once_flag handlers;
};

// Never destroyed: the detached watchdog thread may still read it while the process exits.
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

// Each thread's slot, listed in the registry for the thread's lifetime.
struct ThreadSlot {
  Slot slot;
  ThreadSlot() {
    std::lock_guard lock(registry().mutex);
    registry().slots.push_back(&slot);
  }
  ~ThreadSlot() {
    std::lock_guard lock(registry().mutex);
    std::erase(registry().slots, &slot);
  }
};

Slot& this_thread_slot() {
  thread_local ThreadSlot mine;
  return mine.slot;
}

[[noreturn]] void exit_with(const std::string& line, int code) {
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
  // _Exit: no destructors or atexit handlers, which could block on the stuck communication.
  std::_Exit(code);
}

[[noreturn]] void fire(const WatchedOp& op, milliseconds timeout) {
  Registry& r = registry();
  exit_with(timeout_message(r.world_rank.load(), op, timeout, r.iteration.load()), 1);
}

// A launcher ends the other ranks of a failed job with SIGTERM (then SIGKILL): each says what it
// was doing, so the job's log shows where every rank stood.
[[noreturn]] void report_termination(int signal) {
  Registry& r = registry();
  std::string line;
  {
    std::lock_guard lock(r.mutex);
    for (Slot* slot : r.slots) {
      std::lock_guard slot_lock(slot->mutex);
      if (slot->active) {
        line = termination_message(r.world_rank.load(), &slot->op, Clock::now() - slot->start,
                                   r.iteration.load());
      }
    }
  }
  if (line.empty()) line = termination_message(r.world_rank.load(), nullptr, {}, r.iteration.load());
  exit_with(line, 128 + signal);
}

Registry* g_registry = nullptr;  // for the signal handler: set before it is installed

// "megatron: error: rank 3: a second SIGINT ...": composed with async-signal-safe calls only.
void write_second_signal_message(int signal) {
  char line[512];
  std::size_t n = 0;
  auto put = [&](const char* text) {
    while (*text && n + 1 < sizeof line) line[n++] = *text++;
  };
  put("megatron: error: rank ");
  char digits[16];
  int len = 0;
  for (unsigned v = unsigned(g_registry->world_rank.load()); len == 0 || v > 0; v /= 10)
    digits[len++] = char('0' + v % 10);
  while (len > 0 && n + 1 < sizeof line) line[n++] = digits[--len];
  put(": a second ");
  put(signal == SIGINT ? "SIGINT" : signal == SIGUSR1 ? "SIGUSR1" : "SIGTERM");
  put(" before the iteration boundary the first one asked to stop at: stopped at once, "
      "without saving a checkpoint (one signal stops at the next boundary, after saving)\n");
  (void)!::write(STDERR_FILENO, line, n);
}

extern "C" void on_terminate(int signal) {
  // Only async-signal-safe work here: the watchdog thread reports.
  Registry& r = *g_registry;
  if (r.graceful.load() && r.terminated_by.exchange(signal) != 0) {
    // The user asked twice (Ctrl-C again, `kill` again): an iteration that takes long, or a
    // rank that cannot reach the boundary, must not make them reach for SIGKILL.
    write_second_signal_message(signal);
    ::_exit(128 + signal);
  }
  r.terminated_by.store(signal);
  sem_post(&r.wake);
}

void install_handler(int signal) {
  struct sigaction current{};
  sigaction(signal, nullptr, &current);
  if (current.sa_handler != SIG_DFL) return;  // someone else handles it
  struct sigaction action{};
  action.sa_handler = on_terminate;
  sigemptyset(&action.sa_mask);
  sigaction(signal, &action, nullptr);
}

void install_termination_report() {
  std::call_once(registry().handlers, [] {
    Registry& r = registry();
    sem_init(&r.wake, 0, 0);
    g_registry = &r;
    install_handler(SIGTERM);
    if (r.graceful.load()) {
      install_handler(SIGUSR1);
      install_handler(SIGINT);
    }
  });
}

// Under a graceful stop: whether SIGTERM, seen at `since`, found this rank blocked in an
// operation that has not completed within the grace period since.
bool stuck_after_signal(Clock::time_point since) {
  Registry& r = registry();
  const Clock::time_point now = Clock::now();
  const milliseconds grace(r.grace_ms.load());
  if (now - since < grace) return false;
  std::lock_guard lock(r.mutex);
  for (Slot* slot : r.slots) {
    std::lock_guard slot_lock(slot->mutex);
    if (slot->active && now - slot->start >= grace) return true;
  }
  return false;
}

// Sleeps up to `d`, waking early when a termination signal arrives.
void nap(milliseconds d) {
  timespec until{};
  clock_gettime(CLOCK_REALTIME, &until);
  const int64_t ns = until.tv_nsec + int64_t(d.count()) * 1'000'000;
  until.tv_sec += ns / 1'000'000'000;
  until.tv_nsec = ns % 1'000'000'000;
  while (sem_timedwait(&registry().wake, &until) != 0 && errno == EINTR) {
  }
}

void watch() {
  Registry& r = registry();
  std::optional<Clock::time_point> signalled;  // when a graceful stop's SIGTERM was seen
  for (;;) {
    const milliseconds timeout(r.timeout_ms.load());
    // Poll often enough that a timeout fires within a tenth of itself, at most every 100 ms
    // (every 50 ms while a SIGTERM's grace period runs).
    nap(std::clamp(timeout / 10, milliseconds(10), milliseconds(signalled ? 50 : 100)));
    if (const int signal = r.terminated_by.load()) {
      if (!r.graceful.load()) report_termination(signal);
      if (signal == SIGTERM) {
        if (!signalled) signalled = Clock::now();
        if (stuck_after_signal(*signalled)) report_termination(signal);
      }
    }
    const Clock::time_point now = Clock::now();
    std::lock_guard lock(r.mutex);
    for (Slot* slot : r.slots) {
      std::lock_guard slot_lock(slot->mutex);
      if (slot->active && now - slot->start > timeout) fire(slot->op, timeout);
    }
  }
}

// "30 s", "1.5 s", "10 min".
std::string format_duration(milliseconds d) {
  char text[32];
  if (d.count() >= 60'000 && d.count() % 60'000 == 0) {
    std::snprintf(text, sizeof text, "%lld min", static_cast<long long>(d.count() / 60'000));
  } else {
    std::snprintf(text, sizeof text, "%g s", static_cast<double>(d.count()) / 1000.0);
  }
  return text;
}

}  // namespace

void Watchdog::set_timeout(milliseconds timeout) {
  registry().timeout_ms.store(std::max<int64_t>(timeout.count(), 1));
}

milliseconds Watchdog::timeout() { return milliseconds(registry().timeout_ms.load()); }

void Watchdog::set_world_rank(int rank) { registry().world_rank.store(rank); }

void enable_graceful_stop(milliseconds grace) {
  Registry& r = registry();
  r.grace_ms.store(grace.count());
  r.graceful.store(true);
  install_termination_report();
}

int stop_signal() {
  Registry& r = registry();
  return r.graceful.load() ? r.terminated_by.load() : 0;
}

void set_current_iteration(int64_t iteration) { registry().iteration.store(iteration); }

WatchdogScope::WatchdogScope(const WatchedOp& op) {
  Slot& slot = this_thread_slot();
  outermost_ = slot.depth++ == 0;
  if (!outermost_) return;
  std::call_once(registry().started, [] {
    install_termination_report();  // once, whoever comes first
    std::thread(watch).detach();
  });
  std::lock_guard lock(slot.mutex);
  slot.op = op;
  slot.start = Clock::now();
  slot.active = true;
}

WatchdogScope::~WatchdogScope() {
  Slot& slot = this_thread_slot();
  --slot.depth;
  if (!outermost_) return;
  std::lock_guard lock(slot.mutex);
  slot.active = false;
  slot.blocked += Clock::now() - slot.start;
}

double seconds_blocked_in_communication() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  double total = 0.0;
  for (Slot* slot : r.slots) {
    std::lock_guard slot_lock(slot->mutex);
    total += std::chrono::duration<double>(slot->blocked).count();
  }
  return total;
}

std::string timeout_message(int world_rank, const WatchedOp& op, milliseconds timeout,
                            int64_t iteration) {
  std::string what = op.op;
  if (op.peer >= 0) what += " rank " + std::to_string(op.peer);
  const std::string when =
      iteration > 0 ? "at iteration " + std::to_string(iteration) : "during start-up";
  return "megatron: error: rank " + std::to_string(world_rank) + ": " + what + " on group " +
         std::string(op.group) + " (" + std::to_string(op.group_size) +
         (op.group_size == 1 ? " rank" : " ranks") + ") did not complete within " +
         format_duration(timeout) + " " + when +
         ": a peer rank died or is stuck; see the other ranks' messages, or raise "
         "parallel.timeout_minutes";
}

std::string termination_message(int world_rank, const WatchedOp* op, Clock::duration blocked,
                                int64_t iteration) {
  const std::string when =
      iteration > 0 ? "at iteration " + std::to_string(iteration) : "during start-up";
  std::string where = "outside communication";
  if (op) {
    where = std::string("in ") + op->op;
    if (op->peer >= 0) where += " rank " + std::to_string(op->peer);
    where += " on group " + std::string(op->group) + " (" + std::to_string(op->group_size) +
             (op->group_size == 1 ? " rank" : " ranks") + "), waiting for " +
             format_duration(std::chrono::duration_cast<milliseconds>(blocked));
  }
  return "megatron: error: rank " + std::to_string(world_rank) + ": stopped by SIGTERM " + where +
         " " + when + ": the launcher ends the job when a rank fails or is cancelled; see the "
         "first failing rank's message";
}

}  // namespace megatron::dist
