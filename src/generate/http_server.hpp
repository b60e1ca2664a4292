// The HTTP/1.1 layer of `megatron serve`, on Boost.Beast: one event-driven thread holds every
// connection, so no client, however slow, holds a worker. Each is bounded: a whole request must
// arrive within a deadline, headers and body have size limits (chunked bodies too), each write must
// be taken within a deadline, connections past a limit are answered 503, pipelined requests are
// answered in order, and a client that closes its connection while its answer is pending is seen
// as gone, so the work for it can stop.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace megatron::generate {

struct HttpLimits {
  int64_t max_connections = 256;      // open at once; more are answered 503 and closed
  size_t max_header_bytes = 16 << 10;  // request line and headers (431 past it)
  size_t max_body_bytes = size_t{64} << 20;  // decoded, chunked or not (413 past it)
  // For a client to send each whole request, headers and body, and how long a kept-alive
  // connection may sit idle: a client trickling bytes gets 408 when it runs out.
  std::chrono::milliseconds request_timeout{30000};
  // For a client to take each part of an answer; one that stops reading is disconnected.
  std::chrono::milliseconds write_timeout{30000};
};

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // the target without its query
  HttpHeaders headers;
  std::string body;
  // The header's value ("" when absent); names compare without case.
  std::string header(std::string_view name) const;
};

// One request's answer, given from any thread: respond() once, or start_stream(), send()s and
// finish(). Calls after the client has gone are dropped.
class HttpExchange {
 public:
  virtual ~HttpExchange() = default;
  virtual void respond(int status, std::string content_type, std::string body,
                       HttpHeaders headers = {}) = 0;
  // A chunked answer whose parts follow as they are made (server-sent events).
  virtual void start_stream(int status, std::string content_type) = 0;
  virtual void send(std::string part) = 0;
  virtual void finish() = 0;
  // Whether the client has closed its connection (or stopped taking the answer).
  virtual bool gone() const = 0;
};

// Called on the server's thread for each request, which it must not hold up: it answers at once
// or hands the exchange on.
using HttpHandler = std::function<void(HttpRequest, std::shared_ptr<HttpExchange>)>;

class HttpServer {
 public:
  // Listens on host:port (0: a free port). Throws UserError when it cannot.
  HttpServer(const std::string& host, int port, HttpLimits limits, HttpHandler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const;
  // Serves on a thread of its own until stop().
  void start();
  // New connections are refused; open ones are still served.
  void stop_accepting();
  // Closes every connection and ends the thread. Exchanges still held must be released before
  // the server is destroyed.
  void stop();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace megatron::generate
