// The daemon's web endpoint (`ember sched serve --http`), through real sockets: addresses it
// refuses (each an ember::Error naming the address), requests that are garbage or hostile (each
// answered or dropped, logged, and the endpoint serves on), and jobs' progress reports reaching
// `ember sched queue` and /metrics. The page in a real browser and the metrics through
// Prometheus's own parser are tests/scheduler/web/.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <regex>

#include "daemon_fixture.h"

using namespace daemon_test;

namespace {

// A client: connects to 127.0.0.1:port, sends `bytes` (optionally in two parts with a pause, as a
// slow client would), and returns everything until the server closes (or the deadline passes).
std::string http_exchange(int port, const std::string& bytes, bool close_write = false) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return "connect failed";
  }
  size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server may answer and close before reading everything
    off += static_cast<size_t>(n);
  }
  if (close_write) ::shutdown(fd, SHUT_WR);
  std::string out;
  wait_for([&] {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) return false;
    char buf[8192];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n > 0) out.append(buf, static_cast<size_t>(n));
    return n <= 0;
  });
  ::close(fd);
  return out;
}

std::string get(int port, const std::string& path, const std::string& method = "GET") {
  return http_exchange(port, method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
}

class WebTest : public DaemonTest {
 protected:
  // The port the daemon printed ("metrics and dashboard at http://127.0.0.1:PORT/").
  int port() {
    std::smatch m;
    std::string out;
    EXPECT_TRUE(wait_for([&] {
      out = read_file(dir_ + "/daemon.out");
      return std::regex_search(out, m, std::regex("dashboard at http://127\\.0\\.0\\.1:([0-9]+)/"));
    })) << out;
    return m.empty() ? 0 : std::stoi(m[1]);
  }

  // `ember sched serve` with these flags, which must fail: its output.
  std::string refused(const std::vector<std::string>& flags) {
    std::vector<std::string> argv = {EMBER_EXE, "sched", "serve", "--state", state_, "--devices", "cpu:1"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    Result r = run(argv);
    EXPECT_NE(r.status, 0) << r.out;
    return r.out;
  }
};

TEST_F(WebTest, AddressesTheEndpointRefusesAreErrorsNamingThem) {
  std::string out = refused({"--http", "10.1.2.3:9100"});
  EXPECT_NE(out.find("--http '10.1.2.3:9100': not a loopback address"), std::string::npos) << out;
  EXPECT_NE(out.find("--http-allow-remote"), std::string::npos) << out;
  out = refused({"--http", "9100"});
  EXPECT_NE(out.find("--http '9100': no port"), std::string::npos) << out;
  out = refused({"--http", "example.com:9100"});
  EXPECT_NE(out.find("'example.com' is not an IP address"), std::string::npos) << out;
  out = refused({"--http", "127.0.0.1:99999"});
  EXPECT_NE(out.find("bad port '99999'"), std::string::npos) << out;
  out = refused({"--http", "[::zz]:80"});
  EXPECT_NE(out.find("'::zz' is not an IPv6 address"), std::string::npos) << out;
  out = refused({"--http-allow-remote"});
  EXPECT_NE(out.find("--http-allow-remote: give --http HOST:PORT too"), std::string::npos) << out;

  // A port another program holds.
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const std::string taken = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  out = refused({"--http", taken});
  ::close(fd);
  EXPECT_NE(out.find("--http '" + taken + "': cannot listen there: Address already in use"), std::string::npos) << out;
  // Refused before the daemon did anything: no socket was left to answer.
  EXPECT_FALSE(fs::exists(ember::sched::socket_path(state_))) << out;
}

TEST_F(WebTest, GarbageIsAnsweredOrDroppedAndTheEndpointServesOn) {
  start_daemon({"--devices", "cpu:1", "--http", "127.0.0.1:0"});
  const int p = port();
  ASSERT_GT(p, 0);
  EXPECT_NE(get(p, "/metrics").find("HTTP/1.1 200 OK"), std::string::npos);
  EXPECT_NE(http_exchange(p, "\x16\x03\x01 binary junk\r\n\r\n").find("HTTP/1.1 400 Bad Request"), std::string::npos);
  EXPECT_NE(http_exchange(p, "GET / HTTP/1.1\r\nX: " + std::string(10000, 'a')).find("HTTP/1.1 431"),
            std::string::npos);
  EXPECT_NE(get(p, "/", "POST").find("HTTP/1.1 405"), std::string::npos);
  EXPECT_NE(get(p, "/nothing-here").find("HTTP/1.1 404"), std::string::npos);
  EXPECT_NE(http_exchange(p, "GET /metrics HTTP/1.1\r\nHost: attacker.example\r\n\r\n").find("HTTP/1.1 421"),
            std::string::npos);
  // A client that says half a request and leaves, and one that says nothing and stays open while
  // others are served.
  EXPECT_EQ(http_exchange(p, "GET /met", true), "");
  const int silent = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(p));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(silent, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  const std::string head = get(p, "/metrics", "HEAD");
  ::close(silent);
  EXPECT_NE(head.find("HTTP/1.1 200 OK"), std::string::npos) << head;
  EXPECT_EQ(head.find("# TYPE"), std::string::npos) << "HEAD answered with a body";
  const std::string metrics = get(p, "/metrics");
  EXPECT_NE(metrics.find("ember_sched_http_requests_total{path=\"other\",code=\"400\"} 1"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("ember_sched_http_requests_total{path=\"/metrics\",code=\"200\"} 2"), std::string::npos)
      << metrics;
  // The socket still serves too, and each bad request was logged as the error it raised.
  EXPECT_NO_THROW(status());
  const std::string log = read_file(dir_ + "/daemon.out");
  EXPECT_NE(log.find("http: HTTP request: the method '\?\?\?' is not a token"), std::string::npos) << log;
  EXPECT_NE(log.find("http: HTTP request: the head is over 8192 bytes"), std::string::npos) << log;
}

TEST_F(WebTest, AJobsProgressReachesTheQueueAndTheMetrics) {
  // --quiet: the address of port 0 is still printed, the one way to learn it.
  start_daemon({"--devices", "cpu:1", "--http", "127.0.0.1:0", "--quiet"});
  const int p = port();
  JobSpec s = gated("reporter", 1, "gate");
  s.set_args(1,
             "echo 'ember-progress epoch=2 epochs=5 step=40 loss=0.2500 samples_per_s=1234.5'; " + wait_gate("gate"));
  s.set_queue("vision");
  const auto submitted = std::chrono::steady_clock::now();
  const int64_t id = submit(s);
  ASSERT_TRUE(wait_for([&] { return log_of(id).find("ember-progress") != std::string::npos; }));
  Result q = cli({"queue"});
  EXPECT_EQ(q.status, 0) << q.out;
  EXPECT_NE(q.out.find("epoch 2/5 step 40 loss 0.2500 1234.5/s"), std::string::npos) << q.out;
  const std::string m = get(p, "/metrics");
  const std::string labels = "{job_id=\"" + std::to_string(id) + "\",name=\"reporter\",team=\"vision\"}";
  EXPECT_NE(m.find("ember_sched_job_samples_per_second" + labels + " 1234.5"), std::string::npos) << m;
  EXPECT_NE(m.find("ember_sched_job_loss" + labels + " 0.25"), std::string::npos) << m;
  // Its run time so far is within the time since it was submitted (not counted twice).
  const double since = std::chrono::duration<double>(std::chrono::steady_clock::now() - submitted).count();
  const size_t at = m.find("ember_sched_job_run_seconds" + labels + " ");
  ASSERT_NE(at, std::string::npos) << m;
  const double run_s = std::stod(m.substr(at + m.substr(at).find(' ') + 1));
  EXPECT_GT(run_s, 0);
  EXPECT_LE(run_s, since) << m;
  const std::string state = get(p, "/api/state");
  EXPECT_NE(state.find("\"progress\": {\"epoch\": 2, \"epochs\": 5, \"step\": 40"), std::string::npos) << state;
  // Anyone may read the endpoint: it shows no command, path or log of anyone's job (all live in
  // the test's folder here).
  EXPECT_EQ(state.find(dir_), std::string::npos) << state;
  EXPECT_EQ(state.find("ember-progress"), std::string::npos) << state;
  write_file(dir_ + "/gate", "");
  ASSERT_TRUE(wait_for([&] { return finished(id); }));
}

}  // namespace
