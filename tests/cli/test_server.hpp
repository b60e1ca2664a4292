// `megatron serve` started for a test: the GPT-2 test checkpoint on a free loopback port, one
// thread, for the test's lifetime; and a JSON request sent to it with the status it must get.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "cli/gpt2_checkpoint.hpp"
#include "cli/run_command.hpp"
#include "cli/tiny_job.hpp"
#include "support/temp_dir.hpp"

extern char** environ;

namespace megatron::cli::test_server {

// A server on a free loopback port for the test's lifetime.
class Server {
 public:
  explicit Server(const std::string& extra = "") {
    namespace fs = std::filesystem;
    const fs::path port_file = dir_.path() / "port";
    const std::string command = std::string("cd '") + MEGATRON_SOURCE_DIR + "' && " + mpi_sanitizer_env() + " exec '" +
                                MEGATRON_BINARY + "' serve " + gpt2_checkpoint().string() + kGpt2 +
                                " --threads 1 --host 127.0.0.1 --port 0 --port-file " +
                                port_file.string() + " " + extra + " >" + (dir_.path() / "out").string() +
                                " 2>" + (dir_.path() / "err").string();
    const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
    EXPECT_EQ(posix_spawn(&pid_, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ), 0);
    for (int i = 0; i < 600 && port_ == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {  // it ended before listening
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        break;
      }
      const std::string text = slurp(port_file);
      if (!text.empty() && text.back() == '\n') port_ = std::stoi(text);
    }
    if (port_ == 0) ADD_FAILURE() << "the server did not start: " << err();
  }
  ~Server() {
    if (pid_ > 0 && exit_code_ < 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(120, 0);
    return c;
  }
  // Sends `signal` and waits for the exit code.
  int stop(int signal) {
    kill(pid_, signal);
    int status = 0;
    waitpid(pid_, &status, 0);
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return exit_code_;
  }
  std::string err() const { return slurp(dir_.path() / "err"); }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }

 private:
  test_support::TempDir dir_;
  pid_t pid_ = -1;
  int port_ = 0;
  int exit_code_ = -1;
};

inline nlohmann::json send(httplib::Client& c, const std::string& method, const std::string& path, const std::string& body,
          int expect_status) {
  const auto res = method == "PUT" ? c.Put(path, body, "application/json") : c.Post(path, body, "application/json");
  EXPECT_TRUE(res) << method << " " << path << ": no answer";
  if (!res) return {};
  EXPECT_EQ(res->status, expect_status) << body << "\n" << res->body;
  return nlohmann::json::parse(res->body);
}

}  // namespace megatron::cli::test_server
