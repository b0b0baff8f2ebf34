// The web endpoint's request parser (scheduler/daemon/http_request.h): what it accepts, that an
// incomplete head asks for more, and that every malformed head is an ember::Error naming the
// problem, including every prefix and single-byte corruption of a valid request.
#include "scheduler/daemon/http_request.h"

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"

using ember::Error;
using ember::sched::parse_http_request;

namespace {

std::string error_of(const std::string& bytes) {
  try {
    parse_http_request(bytes);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(HttpRequest, ParsesAGetWithHeadersAndQuery) {
  const std::string head = "GET /api/state?x=1 HTTP/1.1\r\nHost: 127.0.0.1:9100\r\nAccept:  */* \r\n\r\n";
  auto r = parse_http_request(head + "trailing bytes are not part of the head");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->method, "GET");
  EXPECT_EQ(r->path, "/api/state");
  EXPECT_EQ(r->query, "x=1");
  EXPECT_EQ(r->version, "HTTP/1.1");
  ASSERT_EQ(r->headers.size(), 2u);
  EXPECT_EQ(r->headers[0].first, "host");
  EXPECT_EQ(r->headers[0].second, "127.0.0.1:9100");
  EXPECT_EQ(r->headers[1].second, "*/*");
  EXPECT_EQ(r->head_bytes, head.size());
}

TEST(HttpRequest, AcceptsBareLineFeeds) {
  auto r = parse_http_request("HEAD /metrics HTTP/1.0\nHost: localhost\n\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->method, "HEAD");
  EXPECT_EQ(r->path, "/metrics");
}

TEST(HttpRequest, AnIncompleteHeadAsksForMore) {
  const std::string head = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  for (size_t n = 0; n + 1 < head.size(); ++n) EXPECT_FALSE(parse_http_request(head.substr(0, n))) << n;
  EXPECT_TRUE(parse_http_request(head));
}

TEST(HttpRequest, MalformedHeadsAreErrorsNamingTheProblem) {
  EXPECT_NE(error_of("GET\r\n\r\n").find("expected a request line 'METHOD TARGET VERSION'"), std::string::npos);
  EXPECT_NE(error_of("GET / HTTP/2\r\n\r\n").find("expected version HTTP/1.1"), std::string::npos);
  EXPECT_NE(error_of("GET http://x/ HTTP/1.1\r\n\r\n").find("expected a target that starts with '/'"),
            std::string::npos);
  EXPECT_NE(error_of("G(T / HTTP/1.1\r\n\r\n").find("is not a token"), std::string::npos);
  EXPECT_NE(error_of("GET / HTTP/1.1\r\nno colon\r\n\r\n").find("expected a header 'Name: value'"), std::string::npos);
  EXPECT_NE(error_of("GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n").find("folded"), std::string::npos);
  EXPECT_NE(error_of("GET / HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello").find("a body"), std::string::npos);
  EXPECT_NE(error_of("GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n").find("a body"), std::string::npos);
  EXPECT_NE(error_of("GET /\x01 HTTP/1.1\r\n\r\n").find("printable ASCII"), std::string::npos);
  EXPECT_NE(error_of(std::string("GET / HTTP/1.1\r\nA: \0\r\n\r\n", 24)).find("NUL"), std::string::npos);
  EXPECT_NE(error_of("\r\n\r\n").find("expected a request line"), std::string::npos);
  std::string many = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 65; ++i) many += "H" + std::to_string(i) + ": v\r\n";
  EXPECT_NE(error_of(many + "\r\n").find("more than 64 headers"), std::string::npos);
}

TEST(HttpRequest, AHeadOverTheBoundIsRefusedCompleteOrNot) {
  const std::string big = "GET /" + std::string(ember::sched::kMaxRequestHeadBytes, 'a');
  EXPECT_NE(error_of(big).find("over 8192 bytes"), std::string::npos);
  EXPECT_NE(error_of(big + " HTTP/1.1\r\n\r\n").find("over 8192 bytes"), std::string::npos);
}

// Every single-byte change of a valid head parses or is an ember::Error: nothing else escapes.
TEST(HttpRequest, CorruptedHeadsNeverEscapeAsAnythingButError) {
  const std::string head = "GET /metrics?a=b HTTP/1.1\r\nHost: localhost:1\r\nAccept: */*\r\n\r\n";
  int errors = 0;
  for (size_t i = 0; i < head.size(); ++i)
    for (int b : {0, 1, int(' '), int(':'), int('\r'), int('\n'), int('/'), 0x7f, 0xff}) {
      std::string bad = head;
      bad[i] = static_cast<char>(b);
      try {
        parse_http_request(bad);
      } catch (const Error&) {
        ++errors;
      }
    }
  EXPECT_GT(errors, 0);
}

}  // namespace
