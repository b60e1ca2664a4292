// A progress line on stderr for long commands: live on a terminal, one line every 10 s in logs,
// and each phase's last line always, so that logs keep its totals and rate.
#pragma once

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <string>
#include <string_view>

namespace megatron {

class ProgressLine {
 public:
  // `first_at_once`: the first line prints without waiting 10 s, so that a log shows the work
  // began (a corpus's preprocessing, say).
  explicit ProgressLine(bool first_at_once = false)
      : last_printed_(first_at_once ? -kLogPeriod : 0) {}

  void operator()(const std::string& text, double seconds, bool last = false) {
    if (!tty_ && !last && seconds - last_printed_ < kLogPeriod) return;
    last_printed_ = seconds;
    std::cerr << (tty_ ? "\r" : "") << text << (tty_ ? "\033[K" : "\n") << std::flush;
    if (tty_ && last) std::cerr << "\n";
  }

  // "VERB DONE/ALL UNIT, RATE UNIT/s, ETA N s" for a phase that began `seconds` ago; the phase's
  // last line (done == all) always prints.
  void count(std::string_view verb, int64_t done, int64_t all, std::string_view unit, double seconds) {
    const double rate = double(done) / std::max(seconds, 1e-9);
    (*this)(fmt::format("{} {}/{} {}, {:.2f} {}/s, ETA {:.0f} s", verb, done, all, unit, rate, unit,
                        double(all - done) / std::max(rate, 1e-9)),
            seconds, done == all);
  }

  // Ends a live line that no `last` call ended, before other output follows it.
  void end_line() const {
    if (tty_) std::cerr << "\n" << std::flush;
  }

 private:
  static constexpr double kLogPeriod = 10;
  bool tty_ = ::isatty(STDERR_FILENO) != 0;
  double last_printed_ = 0;  // in logs, a short run prints only its last lines
};

}  // namespace megatron
