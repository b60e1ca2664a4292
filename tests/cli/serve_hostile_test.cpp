// `megatron serve` under hostile clients, over raw loopback sockets: clients that trickle a
// request a byte at a time, flood connections, pipeline requests, send chunked bodies past the
// limit, or leave before their answer. The server keeps answering everyone else, answers or
// refuses every request with a status, drops the work of clients that left, and its memory stays
// within a stated bound.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "cli/test_server.hpp"

namespace megatron::cli {
namespace serve_hostile_test {

using nlohmann::json;
using test_server::Server;
using Clock = std::chrono::steady_clock;

// A raw client connection.
class Socket {
 public:
  explicit Socket(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(uint16_t(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  }
  ~Socket() { close(); }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  Socket(Socket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }

  // Whether every byte went out (false once the server has closed the connection).
  bool write(const std::string& data) {
    size_t at = 0;
    while (at < data.size()) {
      const ssize_t n = ::send(fd_, data.data() + at, data.size() - at, MSG_NOSIGNAL);
      if (n <= 0) return false;
      at += size_t(n);
    }
    return true;
  }
  // What arrives within `wait`, until the server closes the connection or `until` appears.
  std::string read(std::chrono::milliseconds wait, const std::string& until = "") {
    std::string got;
    const auto end = Clock::now() + wait;
    while (Clock::now() < end && (until.empty() || got.find(until) == std::string::npos)) {
      pollfd p{.fd = fd_, .events = POLLIN, .revents = 0};
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now());
      if (::poll(&p, 1, int(std::max<int64_t>(left.count(), 0))) <= 0) break;
      char buffer[65536];
      const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
      if (n <= 0) break;
      got.append(buffer, size_t(n));
    }
    return got;
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

std::string request(const std::string& method, const std::string& path, const std::string& body) {
  return method + " " + path + " HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                               "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// The status of each response in `text`, with its body (responses with a Content-Length).
std::vector<std::pair<int, std::string>> responses(const std::string& text) {
  std::vector<std::pair<int, std::string>> out;
  size_t at = 0;
  while (true) {
    const size_t head_end = text.find("\r\n\r\n", at);
    if (head_end == std::string::npos || text.compare(at, 9, "HTTP/1.1 ") != 0) break;
    const std::string head = text.substr(at, head_end - at);
    std::smatch m;
    const std::regex length("[Cc]ontent-[Ll]ength: *([0-9]+)");
    const size_t size = std::regex_search(head, m, length) ? std::stoul(m[1]) : 0;
    out.emplace_back(std::stoi(text.substr(at + 9, 3)), text.substr(head_end + 4, size));
    at = head_end + 4 + size;
  }
  return out;
}

// A metric's value from /metrics (-1 when absent).
double metric(const Server& server, const std::string& name) {
  Socket s(server.port());
  s.write(request("GET", "/metrics", ""));
  const auto got = responses(s.read(std::chrono::seconds(10), "megatron_request_duration_seconds_count"));
  if (got.empty()) return -1;
  const std::regex line("(^|\n)" + name + " ([0-9.e+-]+)\n");
  std::smatch m;
  return std::regex_search(got[0].second, m, line) ? std::stod(m[2]) : -1;
}

// Peak resident memory of a process, in MiB (VmHWM).
double peak_mib(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return -1;
}

// What a 64 MiB body may cost the server on the way to its limit: the body and the buffer it
// grew out of. AddressSanitizer keeps freed buffers in its quarantine (256 MiB by default) and
// adds its own to that.
#ifdef __SANITIZE_ADDRESS__
constexpr double kFloodBoundMib = 448.0;
#else
constexpr double kFloodBoundMib = 192.0;
#endif

const std::string kShort = R"({"prompts": ["a"], "tokens_to_generate": 2})";

TEST(ServeHostile, TricklingClientsNeitherHoldUpOthersNorOutstayTheRequestTimeout) {
  Server server("--request-timeout 1");
  std::vector<Socket> tricklers;
  for (int i = 0; i < 12; ++i) {
    tricklers.emplace_back(server.port());
    tricklers.back().write("PUT /api HTTP/1.1\r\nHost: x\r\n");
  }
  const auto begin = Clock::now();
  Socket real(server.port());
  real.write(request("PUT", "/api", kShort));
  const auto answer = responses(real.read(std::chrono::seconds(20), "]]}"));
  ASSERT_EQ(answer.size(), 1u);
  EXPECT_EQ(answer[0].first, 200);
  EXPECT_LT(Clock::now() - begin, std::chrono::seconds(10));
  // A byte every 200 ms does not renew the deadline: 408 within about a second.
  Socket slow(server.port());
  std::string got;
  const std::string header = "PUT /api HTTP/1.1\r\nHost: localhost\r\n";
  for (size_t i = 0; i < header.size() && got.empty(); ++i) {
    slow.write(header.substr(i, 1));
    got = slow.read(std::chrono::milliseconds(200));
  }
  if (got.empty()) got = slow.read(std::chrono::seconds(3));
  const auto timed_out = responses(got);
  ASSERT_EQ(timed_out.size(), 1u) << got;
  EXPECT_EQ(timed_out[0].first, 408);
  for (Socket& t : tricklers) EXPECT_EQ(responses(t.read(std::chrono::seconds(3)))[0].first, 408);
}

TEST(ServeHostile, PipelinedRequestsAreEachAnsweredInOrder) {
  Server server;
  Socket s(server.port());
  std::string all;
  for (const char* prompt : {"One", "Two", "Three"}) {
    all += request("PUT", "/api", json{{"prompts", {prompt}}, {"tokens_to_generate", 2}}.dump());
  }
  ASSERT_TRUE(s.write(all));
  std::string got;
  for (int i = 0; i < 100 && responses(got).size() < 3; ++i) got += s.read(std::chrono::milliseconds(200));
  const auto answers = responses(got);
  ASSERT_EQ(answers.size(), 3u) << got;
  const char* prompts[] = {"One", "Two", "Three"};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(answers[i].first, 200);
    EXPECT_EQ(json::parse(answers[i].second)["text"][0].get<std::string>().rfind(prompts[i], 0), 0u);
  }
}

TEST(ServeHostile, RequestsWhoseClientsLeaveAreDroppedQueuedOrRunning) {
  Server server;
  const std::string slow = R"({"prompts": ["a"], "tokens_to_generate": 120, "stop_token": -1})";
  for (int i = 0; i < 8; ++i) {
    Socket s(server.port());
    s.write(request("PUT", "/api", slow));
  }  // each closed at once
  const auto begin = Clock::now();
  double abandoned = 0;
  while (Clock::now() - begin < std::chrono::seconds(60) && abandoned < 8) {
    abandoned = metric(server, "megatron_requests_abandoned_total");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(abandoned, 8);
  EXPECT_LT(metric(server, "megatron_generation_tokens_total"), 120) << "abandoned requests ran in full";
  Socket real(server.port());
  real.write(request("PUT", "/api", kShort));
  const auto answer = responses(real.read(std::chrono::seconds(20), "]]}"));
  ASSERT_EQ(answer.size(), 1u);
  EXPECT_EQ(answer[0].first, 200);
}

TEST(ServeHostile, AChunkedFloodIsRefusedWithA413AndMemoryStaysBounded) {
  Server server;
  const double before = peak_mib(server.pid());
  Socket s(server.port());
  s.write("PUT /api HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
  const std::string mib(size_t{1} << 20, ' ');
  const std::string chunk = "100000\r\n" + mib + "\r\n";
  for (int i = 0; i < 70 && s.write(chunk); ++i) {
  }
  const auto answer = responses(s.read(std::chrono::seconds(10), "}}"));
  ASSERT_EQ(answer.size(), 1u);
  EXPECT_EQ(answer[0].first, 413);
  // The body limit is 64 MiB: what was held on the way to it, and never more.
  EXPECT_LT(peak_mib(server.pid()) - before, kFloodBoundMib);
  Socket real(server.port());
  real.write(request("PUT", "/api", kShort));
  EXPECT_EQ(responses(real.read(std::chrono::seconds(20), "]]}"))[0].first, 200);
}

TEST(ServeHostile, ConnectionsPastTheLimitAre503AndTheServerRecovers) {
  Server server("--max-connections 4");
  std::vector<Socket> held;
  for (int i = 0; i < 4; ++i) held.emplace_back(server.port());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // accepted before the next
  Socket extra(server.port());
  const auto refused = responses(extra.read(std::chrono::seconds(5), "}}"));
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].first, 503);
  held.clear();
  extra.close();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  Socket real(server.port());
  real.write(request("PUT", "/api", kShort));
  EXPECT_EQ(responses(real.read(std::chrono::seconds(20), "]]}"))[0].first, 200);
}

TEST(ServeHostile, OversizedHeadersAre431AndGarbageIs400) {
  Server server;
  Socket big(server.port());
  big.write("PUT /api HTTP/1.1\r\nHost: x\r\nX-Filler: " + std::string(20000, 'x') + "\r\n\r\n");
  EXPECT_EQ(responses(big.read(std::chrono::seconds(5), "}}"))[0].first, 431);
  Socket garbage(server.port());
  garbage.write("\x01\x02 not http at all\r\n\r\n");
  EXPECT_EQ(responses(garbage.read(std::chrono::seconds(5), "}}"))[0].first, 400);
}

TEST(ServeHostile, SigtermFinishesTheRequestsTakenBeforeExiting) {
  Server server;
  Socket s(server.port());
  s.write(request("PUT", "/api", R"({"prompts": ["a"], "tokens_to_generate": 100, "stop_token": -1})"));
  const auto begin = Clock::now();
  while (metric(server, "megatron_requests_running") != 1 && Clock::now() - begin < std::chrono::seconds(20)) {
  }
  EXPECT_EQ(server.stop(SIGTERM), 0) << server.err();
  const auto answer = responses(s.read(std::chrono::seconds(20), "]]}"));
  ASSERT_EQ(answer.size(), 1u);
  EXPECT_EQ(answer[0].first, 200);
  EXPECT_EQ(json::parse(answer[0].second)["tokens"][0].size(), 101u);
}

}  // namespace serve_hostile_test
}  // namespace megatron::cli
