#include "scheduler/daemon/wire.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace ember::sched {
namespace {

using Clock = std::chrono::steady_clock;

// Waits until `fd` is ready for `events` or the deadline passes.
void wait_ready(int fd, short events, Clock::time_point deadline, const char* what) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    EMBER_CHECK(left > 0, "scheduler socket: timed out ", what);
    pollfd p{fd, events, 0};
    int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (r > 0) return;
    EMBER_CHECK(r == 0 || errno == EINTR, "scheduler socket: poll failed while ", what, ": ", std::strerror(errno));
  }
}

sockaddr_un address(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  EMBER_CHECK(path.size() < sizeof(a.sun_path), "scheduler socket path '", path, "' is ", path.size(),
              " bytes; Unix sockets allow at most ", sizeof(a.sun_path) - 1, " (use a shorter --state folder)");
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  return a;
}

}  // namespace

std::string socket_path(const std::string& state_dir) {
  return (std::filesystem::path(state_dir) / "sched.sock").string();
}

void write_frame(int fd, const std::string& bytes, double timeout_s) {
  EMBER_CHECK(bytes.size() <= kMaxMessageBytes, "scheduler message of ", bytes.size(), " bytes exceeds the limit of ",
              kMaxMessageBytes);
  auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  uint32_t n = static_cast<uint32_t>(bytes.size());
  unsigned char len[4] = {static_cast<unsigned char>(n), static_cast<unsigned char>(n >> 8),
                          static_cast<unsigned char>(n >> 16), static_cast<unsigned char>(n >> 24)};
  std::string frame(reinterpret_cast<const char*>(len), 4);
  frame += bytes;
  size_t off = 0;
  while (off < frame.size()) {
    wait_ready(fd, POLLOUT, deadline, "writing a message");
    ssize_t w = ::send(fd, frame.data() + off, frame.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    EMBER_CHECK(w > 0, "scheduler socket: write failed: ", std::strerror(errno));
    off += static_cast<size_t>(w);
  }
}

std::string read_frame(int fd, double timeout_s) {
  auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  auto read_exact = [&](char* buf, size_t n) {
    size_t off = 0;
    while (off < n) {
      wait_ready(fd, POLLIN, deadline, "reading a message");
      ssize_t r = ::recv(fd, buf + off, n - off, MSG_DONTWAIT);
      if (r < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
      EMBER_CHECK(r != 0, "scheduler socket: the peer closed the connection mid-message");
      EMBER_CHECK(r > 0, "scheduler socket: read failed: ", std::strerror(errno));
      off += static_cast<size_t>(r);
    }
  };
  unsigned char len[4];
  read_exact(reinterpret_cast<char*>(len), 4);
  size_t n = len[0] | (len[1] << 8) | (len[2] << 16) | (static_cast<size_t>(len[3]) << 24);
  EMBER_CHECK(n <= kMaxMessageBytes, "scheduler socket: a message claims ", n, " bytes, more than the limit of ",
              kMaxMessageBytes, " (not an ember peer?)");
  std::string body(n, '\0');
  read_exact(body.data(), n);
  return body;
}

proto::Response call_daemon(const std::string& state_dir, const proto::Request& req, double timeout_s) {
  const std::string path = socket_path(state_dir);
  sockaddr_un a = address(path);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  EMBER_CHECK(fd >= 0, "scheduler: cannot create a socket: ", std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0)
    EMBER_FAIL("scheduler: no daemon answers at ", path, " (", std::strerror(errno),
               "); start one with `ember sched serve --state ", state_dir, "`");
  std::string out;
  EMBER_CHECK(req.SerializeToString(&out), "scheduler: cannot serialize the request");
  write_frame(fd, out, timeout_s);
  pollfd p{fd, POLLIN, 0};
  const int wait_ms = static_cast<int>(timeout_s * 1000);
  int r;
  while ((r = ::poll(&p, 1, wait_ms)) < 0 && errno == EINTR) {
  }
  EMBER_CHECK(
      r > 0, "scheduler: the daemon at ", path, " accepted the connection but did not answer within ", timeout_s,
      " s: it is unresponsive (hung, stopped or overloaded); once that process is gone, `ember sched serve --state ",
      state_dir, "` starts a new one");
  proto::Response resp;
  EMBER_CHECK(resp.ParseFromString(read_frame(fd, timeout_s)), "scheduler: the daemon's answer does not parse");
  return resp;
}

int listen_unix(const std::string& path) {
  sockaddr_un a = address(path);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  EMBER_CHECK(fd >= 0, "scheduler: cannot create a socket: ", std::strerror(errno));
  if (std::filesystem::exists(path) || std::filesystem::is_symlink(path)) {
    // Only a socket (a dead daemon's) is ever removed: anything else there is somebody's file.
    if (!std::filesystem::is_socket(std::filesystem::symlink_status(path))) {
      ::close(fd);
      EMBER_FAIL("scheduler: '", path,
                 "' exists and is not a socket; expected the daemon's socket there (move it away)");
    }
    // A live daemon answers a connect; a dead one's socket file refuses it and can go.
    int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool live = probe >= 0 && ::connect(probe, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    if (probe >= 0) ::close(probe);
    if (live) {
      ::close(fd);
      EMBER_FAIL("scheduler: a daemon already listens at ", path);
    }
    std::filesystem::remove(path);
  }
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(fd, 64) != 0) {
    int e = errno;
    ::close(fd);
    EMBER_FAIL("scheduler: cannot listen at ", path, ": ", std::strerror(e));
  }
  return fd;
}

}  // namespace ember::sched
