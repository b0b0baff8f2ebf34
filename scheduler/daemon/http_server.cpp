#include "scheduler/daemon/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace ember::sched {

namespace {

using Clock = std::chrono::steady_clock;

bool parse_port(const std::string& s, int& port) {
  if (s.empty() || s.size() > 5 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  port = std::stoi(s);
  return port <= 65535;
}

// The host part of a Host header ("localhost:8080" -> "localhost", "[::1]:80" -> "[::1]").
std::string host_of(const std::string& hostport) {
  if (!hostport.empty() && hostport[0] == '[') return hostport.substr(0, hostport.find(']') + 1);
  return hostport.substr(0, hostport.find(':'));
}

// Whether a loopback-only server should answer a request naming this Host: a page on another site
// that a browser was tricked into sending here (DNS rebinding) names that site, not loopback.
bool loopback_host(const std::string& host) {
  in_addr a4{};
  return host == "localhost" || host == "[::1]" ||
         (inet_pton(AF_INET, host.c_str(), &a4) == 1 && (ntohl(a4.s_addr) >> 24) == 127);
}

std::string header(const HttpRequest& r, const std::string& name) {
  for (const auto& [k, v] : r.headers)
    if (k == name) return v;
  return "";
}

}  // namespace

HttpAddress parse_http_address(const std::string& spec, const std::string& flag) {
  const std::string expected =
      "; expected HOST:PORT with HOST an IPv4 address, localhost or [IPv6 address] and PORT "
      "0..65535, e.g. 127.0.0.1:9100";
  HttpAddress a;
  const size_t colon = spec.rfind(':');
  EMBER_CHECK(colon != std::string::npos && colon > 0, flag, " '", spec, "': no port", expected);
  std::string host = spec.substr(0, colon);
  EMBER_CHECK(parse_port(spec.substr(colon + 1), a.port), flag, " '", spec, "': bad port '", spec.substr(colon + 1),
              "'", expected);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
    in6_addr a6{};
    EMBER_CHECK(inet_pton(AF_INET6, host.c_str(), &a6) == 1, flag, " '", spec, "': '", host, "' is not an IPv6 address",
                expected);
    a.ipv6 = true;
    a.loopback = IN6_IS_ADDR_LOOPBACK(&a6);
  } else {
    if (host == "localhost") host = "127.0.0.1";
    in_addr a4{};
    EMBER_CHECK(inet_pton(AF_INET, host.c_str(), &a4) == 1, flag, " '", spec, "': '", host,
                "' is not an IP address (the daemon resolves no host names)", expected);
    a.loopback = (ntohl(a4.s_addr) >> 24) == 127;
  }
  a.host = host;
  return a;
}

const char* http_reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 421:
      return "Misdirected Request";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return "Unknown";
  }
}

struct HttpServer::Connection {
  int fd = -1;
  std::string in, out;
  size_t sent = 0;
  bool writing = false;
  Clock::time_point deadline;
};

HttpServer::HttpServer(const std::string& address, bool allow_remote, HttpHandler handler,
                       std::function<void(const std::string&)> log)
    : addr_(parse_http_address(address)), handler_(std::move(handler)), log_(std::move(log)) {
  EMBER_CHECK(addr_.loopback || allow_remote, "--http '", address,
              "': not a loopback address; the dashboard and metrics would be open to the network. Give "
              "--http-allow-remote to serve them there (they show every job's name, team and owner)");
  listen_fd_ = ::socket(addr_.ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  EMBER_CHECK(listen_fd_ >= 0, "--http '", address, "': socket: ", std::strerror(errno));
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // a restarted daemon rebinds at once
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (addr_.ipv6) {
    auto* s6 = reinterpret_cast<sockaddr_in6*>(&ss);
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons(static_cast<uint16_t>(addr_.port));
    inet_pton(AF_INET6, addr_.host.c_str(), &s6->sin6_addr);
    len = sizeof(sockaddr_in6);
  } else {
    auto* s4 = reinterpret_cast<sockaddr_in*>(&ss);
    s4->sin_family = AF_INET;
    s4->sin_port = htons(static_cast<uint16_t>(addr_.port));
    inet_pton(AF_INET, addr_.host.c_str(), &s4->sin_addr);
    len = sizeof(sockaddr_in);
  }
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&ss), len) != 0 || ::listen(listen_fd_, 64) != 0) {
    const int e = errno;
    ::close(listen_fd_);
    EMBER_FAIL("--http '", address, "': cannot listen there: ", std::strerror(e),
               e == EADDRINUSE ? " (another program, or another daemon, has the port; choose another)" : "");
  }
  EMBER_CHECK(::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&ss), &len) == 0,
              "--http: getsockname: ", std::strerror(errno));
  port_ = ntohs(addr_.ipv6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                           : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
    const int e = errno;
    ::close(listen_fd_);
    EMBER_FAIL("--http: pipe: ", std::strerror(e));
  }
}

void HttpServer::start() {
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
}

HttpServer::~HttpServer() {
  char c = 0;
  [[maybe_unused]] ssize_t w = ::write(wake_[1], &c, 1);
  if (thread_.joinable()) thread_.join();
  ::close(wake_[0]);
  ::close(wake_[1]);
  ::close(listen_fd_);
}

std::string HttpServer::url() const {
  return "http://" + (addr_.ipv6 ? "[" + addr_.host + "]" : addr_.host) + ":" + std::to_string(port_) + "/";
}

void HttpServer::loop() {
  std::vector<Connection> conns;
  for (;;) {
    std::vector<pollfd> fds = {{wake_[0], POLLIN, 0}};
    const bool room = static_cast<int>(conns.size()) < kMaxConnections;
    if (room) fds.push_back({listen_fd_, POLLIN, 0});
    const size_t first = fds.size();
    auto now = Clock::now();
    int timeout = -1;
    for (const Connection& c : conns) {
      fds.push_back({c.fd, static_cast<short>(c.writing ? POLLOUT : POLLIN), 0});
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(c.deadline - now).count() + 1;
      timeout = timeout < 0 ? static_cast<int>(std::max<long long>(0, left))
                            : std::min(timeout, static_cast<int>(std::max<long long>(0, left)));
    }
    if (::poll(fds.data(), fds.size(), timeout) < 0) {
      if (errno == EINTR) continue;
      log_(std::string("http: poll: ") + std::strerror(errno));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // no busy loop while it lasts
      continue;
    }
    if (fds[0].revents & POLLIN) break;
    now = Clock::now();
    for (size_t i = 0; i < conns.size(); ++i) {
      Connection& c = conns[i];
      const short ev = fds[first + i].revents;
      bool keep = now < c.deadline;  // past its deadline: a slow or silent client is dropped
      if (keep && ev && !c.writing) keep = on_readable(c);
      if (keep && c.writing && (ev & (POLLOUT | POLLERR | POLLHUP))) {
        const ssize_t n = ::send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
        if (n > 0) c.sent += static_cast<size_t>(n);
        keep = (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR))) && c.sent < c.out.size();
      }
      if (!keep) {
        ::close(c.fd);
        c.fd = -1;
      }
    }
    conns.erase(std::remove_if(conns.begin(), conns.end(), [](const Connection& c) { return c.fd < 0; }), conns.end());
    if (room && (fds[1].revents & POLLIN)) accept_new(conns);
  }
  for (Connection& c : conns) ::close(c.fd);
}

void HttpServer::accept_new(std::vector<Connection>& conns) {
  while (static_cast<int>(conns.size()) < kMaxConnections) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    Connection c;
    c.fd = fd;
    c.deadline = Clock::now() + std::chrono::milliseconds(static_cast<int>(kConnectionSeconds * 1000));
    conns.push_back(std::move(c));
  }
}

// Reads what the client sent; answers once the head is complete or broken. False: drop it (it
// closed before asking anything).
bool HttpServer::on_readable(Connection& c) {
  char buf[4096];
  const ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
  if (n == 0) return false;
  if (n < 0) return errno == EAGAIN || errno == EINTR;
  c.in.append(buf, static_cast<size_t>(n));
  std::optional<HttpRequest> req;
  try {
    req = parse_http_request(c.in);
  } catch (const Error& e) {
    log_(std::string("http: ") + e.what());
    HttpResponse bad{c.in.size() > kMaxRequestHeadBytes ? 431 : 400, "text/plain; charset=utf-8",
                     std::string(e.what()) + "\n"};
    answer(c, nullptr, std::move(bad));
    return true;
  }
  if (!req) return true;
  HttpResponse resp;
  if (req->method != "GET" && req->method != "HEAD") {
    resp = {405, "text/plain; charset=utf-8", "only GET and HEAD: this endpoint is read-only\n"};
  } else if (addr_.loopback && !header(*req, "host").empty() && !loopback_host(host_of(header(*req, "host")))) {
    resp = {421, "text/plain; charset=utf-8", "this endpoint answers requests for a loopback host only\n"};
  } else {
    try {
      resp = handler_(*req);
    } catch (const std::exception& e) {
      log_(std::string("http: ") + req->path + ": " + e.what());
      resp = {500, "text/plain; charset=utf-8", std::string(e.what()) + "\n"};
    }
  }
  answer(c, &*req, std::move(resp));
  return true;
}

void HttpServer::answer(Connection& c, const HttpRequest* req, HttpResponse resp) {
  // Counted by path only for the paths the handler serves: any other path a client invents would
  // make a new series of the metric.
  ++answered_[{req && resp.status < 400 ? req->path : std::string("other"), resp.status}];
  std::string head = "HTTP/1.1 " + std::to_string(resp.status) + " " + http_reason(resp.status) + "\r\n";
  head += "Content-Type: " + resp.content_type + "\r\n";
  head += "Content-Length: " + std::to_string(resp.body.size()) + "\r\n";
  // The page loads only its own files; the answers are live, so nothing caches them.
  head += "Content-Security-Policy: default-src 'self'\r\nX-Content-Type-Options: nosniff\r\n";
  head += "Cache-Control: no-store\r\nConnection: close\r\n\r\n";
  c.out = std::move(head);
  if (!req || req->method != "HEAD") c.out += resp.body;
  c.writing = true;
  c.sent = 0;
  ::shutdown(c.fd, SHUT_RD);
}

}  // namespace ember::sched
