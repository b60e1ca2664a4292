// Beast's string_view as the standard one, so that its strings mix with ours.
#define BOOST_BEAST_USE_STD_STRING_VIEW

#include "generate/http_server.hpp"

#include <fmt/format.h>

#include <array>
#include <atomic>
#include <cctype>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <deque>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "core/error.hpp"

namespace megatron::generate {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using ErrorCode = beast::error_code;

// Bytes read ahead while an answer is pending: a pipelined request waits in them, and reading
// is how a closed connection shows.
constexpr size_t kReadAhead = size_t{64} << 10;
// A streamed answer a client is not taking is dropped past this many bytes waiting.
constexpr size_t kMaxPending = size_t{16} << 20;
// After an error answer to a client still sending, how long its bytes are read and dropped so
// that it sees the answer (closing on unread bytes resets the connection).
constexpr std::chrono::seconds kLinger(2);

bool same_text(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

std::string error_json(const std::string& message) {
  return nlohmann::json{{"error", {{"message", message}, {"type", "invalid_request_error"}}}}.dump();
}

// What the sessions share, owned by the server and outliving them.
struct Shared {
  HttpLimits limits;
  HttpHandler handler;
  std::atomic<int64_t> connections{0};
};

// One connection: its requests read one after another, each answered before the next is read.
// Everything but the post_* calls runs on the server's thread.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, Shared& shared)
      : stream_(std::move(socket)), deadline_(stream_.get_executor()), shared_(shared) {
    ++shared_.connections;
  }
  ~Session() { --shared_.connections; }

  void start() { read_request(); }

  // A connection past the limit: 503 without reading its request.
  void reject() {
    answer_error(503, "the server has too many connections open; try again shortly",
                 {{"Retry-After", "1"}});
  }

  void close() {
    phase_ = Phase::Closed;
    gone_ = true;
    ErrorCode ec;
    deadline_.cancel();
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.socket().close(ec);
  }

  bool gone() const { return gone_; }

  // From any thread: run `fn` on the server's thread.
  template <typename Fn>
  void post(Fn fn) {
    net::post(stream_.get_executor(), [self = shared_from_this(), fn = std::move(fn)]() mutable { fn(*self); });
  }

  void respond(uint64_t request, int status, std::string type, std::string body, HttpHeaders headers) {
    if (phase_ != Phase::Waiting || request != request_) return;
    phase_ = Phase::Answering;
    auto res = std::make_shared<http::response<http::string_body>>(http::int_to_status(unsigned(status)), version_);
    for (auto& [name, value] : headers) res->set(name, value);
    fill(*res, type, std::move(body));
    out_.push_back({.kind = Part::Whole, .whole = std::move(res)});
    pump();
  }

  void start_stream(uint64_t request, int status, std::string type) {
    if (phase_ != Phase::Waiting || request != request_) return;
    phase_ = Phase::Answering;
    streaming_ = true;
    chunked_ = version_ >= 11;  // HTTP/1.0 clients read to the end of the connection instead
    if (!chunked_) keep_alive_ = false;
    head_ = std::make_unique<http::response<http::empty_body>>(http::int_to_status(unsigned(status)), version_);
    head_->set(http::field::server, "megatron");
    head_->set(http::field::content_type, type);
    head_->set(http::field::cache_control, "no-cache");
    head_->keep_alive(keep_alive_);
    if (chunked_) head_->chunked(true);
    serializer_.emplace(*head_);
    out_.push_back({.kind = Part::Head});
    pump();
  }

  void send(uint64_t request, std::string part) {
    if (phase_ != Phase::Answering || request != request_ || !streaming_ || part.empty()) return;
    pending_ += part.size();
    if (pending_ > kMaxPending) {  // the client stopped reading
      close();
      return;
    }
    out_.push_back({.kind = Part::Chunk, .data = std::move(part)});
    pump();
  }

  void finish(uint64_t request) {
    if (phase_ != Phase::Answering || request != request_ || !streaming_) return;
    out_.push_back({.kind = Part::Last});
    pump();
  }

 private:
  enum class Phase { Reading, Waiting, Answering, Ready, Closed };
  struct Part {
    enum Kind { Whole, Head, Chunk, Last } kind;
    std::shared_ptr<http::response<http::string_body>> whole;
    std::string data;
  };

  void fill(http::response<http::string_body>& res, const std::string& type, std::string body) {
    res.set(http::field::server, "megatron");
    res.set(http::field::content_type, type);
    res.keep_alive(keep_alive_);
    res.body() = std::move(body);
    res.prepare_payload();
  }

  void read_request() {
    phase_ = Phase::Reading;
    parser_.emplace();
    parser_->header_limit(uint32_t(std::min<size_t>(shared_.limits.max_header_bytes, UINT32_MAX)));
    parser_->body_limit(uint64_t(shared_.limits.max_body_bytes));
    // One deadline for the whole request: a client trickling bytes does not renew it.
    timed_out_ = false;
    deadline_.expires_after(shared_.limits.request_timeout);
    deadline_.async_wait([weak = weak_from_this()](ErrorCode ec) {
      auto self = weak.lock();
      if (ec || !self || self->phase_ != Phase::Reading) return;
      self->timed_out_ = true;
      ErrorCode ignored;
      self->stream_.socket().cancel(ignored);
    });
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](ErrorCode ec, size_t) { self->on_header(ec); });
  }

  void on_header(ErrorCode ec) {
    if (ec) return on_read_error(ec);
    const auto& req = parser_->get();
    if (same_text(req[http::field::expect], "100-continue") && !parser_->is_done()) {
      static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      net::async_write(stream_, net::buffer(kContinue.data(), kContinue.size()),
                       [self = shared_from_this()](ErrorCode ec, size_t) {
                         if (ec) return self->on_read_error(ec);
                         self->read_body();
                       });
      return;
    }
    read_body();
  }

  void read_body() {
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](ErrorCode ec, size_t) { self->on_body(ec); });
  }

  void on_read_error(ErrorCode ec) {
    if (phase_ == Phase::Closed) return;
    if (timed_out_) {
      if (parser_ && parser_->got_some()) {
        return answer_error(408, fmt::format("the request did not arrive within {} s",
                                             shared_.limits.request_timeout.count() / 1000.0));
      }
      return close();  // an idle kept-alive connection
    }
    if (ec == http::error::body_limit) {
      return answer_error(413, fmt::format("the request body is over {} MiB",
                                           shared_.limits.max_body_bytes >> 20));
    }
    if (ec == http::error::header_limit) {
      return answer_error(431, fmt::format("the request's headers are over {} KiB",
                                           shared_.limits.max_header_bytes >> 10));
    }
    if (ec == http::error::end_of_stream || ec == net::error::eof ||
        ec == net::error::operation_aborted || ec == net::error::connection_reset ||
        ec == http::error::partial_message) {
      return close();
    }
    answer_error(400, "malformed HTTP request: " + ec.message());
  }

  // An answer to a request that could not be read (or a connection refused), then the
  // connection closes.
  void answer_error(int status, const std::string& message, const HttpHeaders& headers = {}) {
    deadline_.cancel();
    keep_alive_ = false;
    phase_ = Phase::Answering;
    auto res = std::make_shared<http::response<http::string_body>>(http::int_to_status(unsigned(status)), 11);
    for (const auto& [name, value] : headers) res->set(name, value);
    fill(*res, "application/json", error_json(message));
    out_.push_back({.kind = Part::Whole, .whole = std::move(res)});
    pump();
  }

  void on_body(ErrorCode ec) {
    if (ec) return on_read_error(ec);
    deadline_.cancel();
    auto& req = parser_->get();
    HttpRequest r;
    r.method = std::string(req.method_string());
    const std::string_view target = req.target();
    r.path = std::string(target.substr(0, target.find('?')));
    for (const auto& field : req) r.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    r.body = std::move(req.body());
    keep_alive_ = req.keep_alive();
    version_ = req.version();
    parser_.reset();
    phase_ = Phase::Waiting;
    streaming_ = false;
    pending_ = 0;
    ++request_;
    watch();
    auto exchange = std::make_shared<Exchange>(shared_from_this(), request_);
    try {
      shared_.handler(std::move(r), exchange);
    } catch (const std::exception& e) {
      respond(request_, 500, "application/json", error_json(e.what()), {});
    }
  }

  // While an answer is pending, read ahead: a pipelined request waits in the buffer, and the
  // end of the connection shows that the client has gone.
  void watch() {
    if (watching_ || phase_ == Phase::Closed || buffer_.size() >= kReadAhead) return;
    watching_ = true;
    stream_.socket().async_read_some(
        buffer_.prepare(std::min<size_t>(16 << 10, kReadAhead - buffer_.size())),
        [self = shared_from_this()](ErrorCode ec, size_t n) { self->on_watch(ec, n); });
  }

  void on_watch(ErrorCode ec, size_t n) {
    watching_ = false;
    if (phase_ == Phase::Closed) return;
    if (!ec) {
      buffer_.commit(n);
      if (phase_ == Phase::Ready) return read_request();
      return watch();
    }
    if (ec == net::error::operation_aborted && phase_ == Phase::Ready) return read_request();
    close();  // the end of the connection, or an error on it, while answering: the client is gone
  }

  void pump() {
    if (writing_ || out_.empty() || phase_ == Phase::Closed) return;
    writing_ = true;
    stream_.expires_after(shared_.limits.write_timeout);
    auto done = [self = shared_from_this()](ErrorCode ec, size_t) { self->on_written(ec); };
    Part& part = out_.front();
    switch (part.kind) {
      case Part::Whole:
        http::async_write(stream_, *part.whole, std::move(done));
        break;
      case Part::Head:
        http::async_write_header(stream_, *serializer_, std::move(done));
        break;
      case Part::Chunk:
        if (chunked_) {
          net::async_write(stream_, http::make_chunk(net::buffer(part.data)), std::move(done));
        } else {
          net::async_write(stream_, net::buffer(part.data), std::move(done));
        }
        break;
      case Part::Last:
        if (chunked_) {
          net::async_write(stream_, http::make_chunk_last(), std::move(done));
        } else {
          net::post(stream_.get_executor(), [done = std::move(done)]() mutable { done({}, 0); });
        }
        break;
    }
  }

  void on_written(ErrorCode ec) {
    writing_ = false;
    if (phase_ == Phase::Closed) return;
    if (ec) return close();  // the client stopped taking the answer, or left
    const Part::Kind kind = out_.front().kind;
    if (kind == Part::Chunk) pending_ -= out_.front().data.size();
    out_.pop_front();
    if (kind == Part::Whole || kind == Part::Last) return answered();
    pump();
  }

  void answered() {
    stream_.expires_never();
    serializer_.reset();
    head_.reset();
    if (!keep_alive_) return linger_close();
    phase_ = Phase::Ready;
    if (watching_) {
      ErrorCode ignored;
      stream_.socket().cancel(ignored);  // on_watch then reads the next request
    } else {
      read_request();
    }
  }

  // Half-closes, then drops what the client still sends for a while before closing, so that a
  // client still sending reads the answer rather than a reset.
  void linger_close() {
    phase_ = Phase::Closed;
    ErrorCode ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    deadline_.expires_after(kLinger);
    deadline_.async_wait([self = shared_from_this()](ErrorCode) {
      ErrorCode ignored;
      self->stream_.socket().close(ignored);
    });
    drain();
  }

  void drain() {
    stream_.socket().async_read_some(
        net::buffer(scratch_), [self = shared_from_this()](ErrorCode ec, size_t) {
          if (!ec) return self->drain();
          self->deadline_.cancel();
          ErrorCode ignored;
          self->stream_.socket().close(ignored);
        });
  }

  class Exchange final : public HttpExchange {
   public:
    Exchange(std::shared_ptr<Session> session, uint64_t request)
        : session_(std::move(session)), request_(request) {}
    void respond(int status, std::string type, std::string body, HttpHeaders headers) override {
      session_->post([r = request_, status, type = std::move(type), body = std::move(body),
                      headers = std::move(headers)](Session& s) mutable {
        s.respond(r, status, std::move(type), std::move(body), std::move(headers));
      });
    }
    void start_stream(int status, std::string type) override {
      session_->post([r = request_, status, type = std::move(type)](Session& s) mutable {
        s.start_stream(r, status, std::move(type));
      });
    }
    void send(std::string part) override {
      session_->post([r = request_, part = std::move(part)](Session& s) mutable { s.send(r, std::move(part)); });
    }
    void finish() override {
      session_->post([r = request_](Session& s) { s.finish(r); });
    }
    bool gone() const override { return session_->gone(); }

   private:
    std::shared_ptr<Session> session_;
    uint64_t request_;
  };

  beast::tcp_stream stream_;
  net::steady_timer deadline_;
  Shared& shared_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  Phase phase_ = Phase::Reading;
  uint64_t request_ = 0;  // the number of the request being answered
  bool keep_alive_ = true;
  unsigned version_ = 11;
  bool timed_out_ = false;
  bool watching_ = false;
  bool writing_ = false;
  bool streaming_ = false;
  bool chunked_ = true;
  size_t pending_ = 0;  // streamed bytes not yet written
  std::deque<Part> out_;
  std::unique_ptr<http::response<http::empty_body>> head_;
  std::optional<http::response_serializer<http::empty_body>> serializer_;
  std::array<char, 4096> scratch_{};
  std::atomic<bool> gone_{false};
};

}  // namespace

std::string HttpRequest::header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (same_text(key, name)) return value;
  }
  return {};
}

struct HttpServer::State {
  Shared shared;  // first: the sessions the io_context still holds when it goes use it
  net::io_context ioc{1};
  tcp::acceptor acceptor{ioc};
  net::steady_timer retry{ioc};
  std::vector<std::weak_ptr<Session>> sessions;
  std::thread thread;
  int port = 0;

  void accept() {
    acceptor.async_accept([this](ErrorCode ec, tcp::socket socket) {
      if (!acceptor.is_open()) return;
      if (ec) {  // out of descriptors, say: try again shortly rather than spin
        retry.expires_after(std::chrono::milliseconds(100));
        retry.async_wait([this](ErrorCode e) {
          if (!e) accept();
        });
        return;
      }
      std::erase_if(sessions, [](const std::weak_ptr<Session>& s) { return s.expired(); });
      ErrorCode ignored;
      socket.set_option(tcp::no_delay(true), ignored);  // streamed tokens go out at once
      const int64_t open = shared.connections.load();
      if (open >= 2 * shared.limits.max_connections) {
        socket.close(ignored);  // past even answering
      } else {
        auto session = std::make_shared<Session>(std::move(socket), shared);
        sessions.push_back(session);
        if (open >= shared.limits.max_connections) {
          session->reject();
        } else {
          session->start();
        }
      }
      accept();
    });
  }
};

HttpServer::HttpServer(const std::string& host, int port, HttpLimits limits, HttpHandler handler)
    : state_(std::make_unique<State>()) {
  state_->shared.limits = limits;
  state_->shared.handler = std::move(handler);
  const auto refuse = [&](const std::string& why) {
    return UserError(fmt::format("cannot listen on {}:{} ({}): give another --port or --host", host,
                                 port, why));
  };
  ErrorCode ec;
  tcp::resolver resolver(state_->ioc);
  const auto endpoints = resolver.resolve(host, std::to_string(port),
                                          tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || endpoints.empty()) throw refuse("not an address of this machine");
  const tcp::endpoint endpoint = endpoints.begin()->endpoint();
  tcp::acceptor& a = state_->acceptor;
  a.open(endpoint.protocol(), ec);
  if (!ec) a.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(endpoint, ec);
  if (!ec) a.listen(net::socket_base::max_listen_connections, ec);
  if (ec) throw refuse(ec == net::error::address_in_use ? "in use" : ec.message());
  state_->port = a.local_endpoint().port();
}

HttpServer::~HttpServer() { stop(); }

int HttpServer::port() const { return state_->port; }

void HttpServer::start() {
  state_->accept();
  state_->thread = std::thread([s = state_.get()] { s->ioc.run(); });
}

void HttpServer::stop_accepting() {
  net::post(state_->ioc, [s = state_.get()] {
    ErrorCode ignored;
    s->acceptor.close(ignored);
    s->retry.cancel();
  });
}

void HttpServer::stop() {
  if (!state_->thread.joinable()) return;
  net::post(state_->ioc, [s = state_.get()] {
    ErrorCode ignored;
    s->acceptor.close(ignored);
    s->retry.cancel();
    for (auto& weak : s->sessions) {
      if (auto session = weak.lock()) session->close();
    }
  });
  state_->thread.join();
}

}  // namespace megatron::generate
