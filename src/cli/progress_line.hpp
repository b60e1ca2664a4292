// A progress line on stderr for long commands: live on a terminal, one line every 10 s in logs,
// and each phase's last line always, so that logs keep its totals and rate.
#pragma once

#include <unistd.h>

#include <iostream>
#include <string>

namespace megatron::cli {

class ProgressLine {
 public:
  void operator()(const std::string& text, double seconds, bool last = false) {
    if (!tty_ && !last && seconds - last_printed_ < 10) return;
    last_printed_ = seconds;
    std::cerr << (tty_ ? "\r" : "") << text << (tty_ ? "\033[K" : "\n") << std::flush;
    if (tty_ && last) std::cerr << "\n";
  }

 private:
  bool tty_ = ::isatty(STDERR_FILENO) != 0;
  double last_printed_ = 0;  // in logs, a short run prints only its last lines
};

}  // namespace megatron::cli
