// The daemon's read-only web endpoint (`ember sched serve --http ADDR`): a small HTTP/1.1 server on
// its own thread, for /metrics, the dashboard and its JSON. GET and HEAD only, one request per
// connection (the answer closes it), heads bounded by http_request.h, every connection with a
// deadline, at most kMaxConnections at once; a malformed request is answered 400 and logged as
// the ember::Error it raised, and nothing a client sends can stop the thread. The handler runs on
// this thread: it must read only what is safe to read from it (the daemon hands it snapshots).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <string>
#include <thread>

#include "scheduler/daemon/http_request.h"

namespace ember::sched {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

// An address to listen on: "HOST:PORT" with HOST an IPv4 address, "localhost" or "[IPv6]", PORT
// 0..65535 (0: any free port, see HttpServer::port()).
struct HttpAddress {
  std::string host;  // numeric, as given ("localhost" becomes 127.0.0.1)
  int port = 0;
  bool ipv6 = false;
  bool loopback = false;  // 127.0.0.0/8 or ::1
};
// Throws ember::Error naming `flag` and the address for anything else (a host name: the daemon
// resolves nothing; the operator says which interface).
HttpAddress parse_http_address(const std::string& spec, const std::string& flag = "--http");

class HttpServer {
 public:
  static constexpr int kMaxConnections = 64;
  static constexpr double kConnectionSeconds = 10;  // a connection's whole life: request and answer

  // Binds and listens now (so that a port in use, or a remote address without `allow_remote`, is an
  // ember::Error at the daemon's start, naming the address); start() then serves on a thread of its
  // own. `log` receives one line per problem (a bad request, a handler's error); it is called on
  // the server's thread.
  HttpServer(const std::string& address, bool allow_remote, HttpHandler handler,
             std::function<void(const std::string&)> log);
  void start();
  ~HttpServer();  // stops the thread, closes every connection
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }
  std::string url() const;  // "http://127.0.0.1:PORT/"
  // Requests answered so far by (path, status), for the metrics; read on the server's thread only
  // (from the handler), where it is written.
  const std::map<std::pair<std::string, int>, long long>& answered() const { return answered_; }

 private:
  struct Connection;
  void loop();
  void accept_new(std::vector<Connection>& conns);
  bool on_readable(Connection& c);
  void answer(Connection& c, const HttpRequest* req, HttpResponse resp);

  HttpAddress addr_;
  int port_ = 0;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  HttpHandler handler_;
  std::function<void(const std::string&)> log_;
  std::map<std::pair<std::string, int>, long long> answered_;
  std::thread thread_;
};

// The reason phrase of a status this server sends ("OK", "Not Found", ...).
const char* http_reason(int status);

}  // namespace ember::sched
