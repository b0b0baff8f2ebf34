#include "scheduler/daemon/http_request.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"

namespace ember::sched {

namespace {

// RFC 9110's token characters: header names and methods.
bool is_token_char(char c) {
  const auto u = static_cast<unsigned char>(c);
  return std::isalnum(u) != 0 || std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool is_token(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), is_token_char);
}

// Printable ASCII without spaces: what a request target may hold once percent-encoded.
bool is_target(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// At most `n` bytes of what a client sent, for a message: control and non-ASCII bytes as '?', so a
// log line stays one printable line whatever the client sent.
std::string shown(std::string_view s, size_t n) {
  std::string out(s.substr(0, n));
  for (char& c : out)
    if (c < 0x20 || c > 0x7e) c = '?';
  return out;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The lines of a complete head (its blank line excluded), CR stripped.
std::vector<std::string_view> head_lines(std::string_view head) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start < head.size()) {
    size_t nl = head.find('\n', start);
    std::string_view line = head.substr(start, nl - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    EMBER_CHECK(line.find('\r') == std::string_view::npos && line.find('\0') == std::string_view::npos,
                "HTTP request: a stray CR or NUL byte in a line of the head");
    lines.push_back(line);
    start = nl + 1;
  }
  return lines;
}

void parse_request_line(std::string_view line, HttpRequest& r) {
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  EMBER_CHECK(sp2 != std::string_view::npos && line.find(' ', sp2 + 1) == std::string_view::npos,
              "HTTP request: expected a request line 'METHOD TARGET VERSION', got '", shown(line, 80), "'");
  const std::string_view method = line.substr(0, sp1), target = line.substr(sp1 + 1, sp2 - sp1 - 1),
                         version = line.substr(sp2 + 1);
  EMBER_CHECK(is_token(method), "HTTP request: the method '", shown(method, 40), "' is not a token");
  EMBER_CHECK(version == "HTTP/1.1" || version == "HTTP/1.0",
              "HTTP request: expected version HTTP/1.1 or HTTP/1.0, got '", shown(version, 40), "'");
  EMBER_CHECK(!target.empty() && target.front() == '/' && is_target(target),
              "HTTP request: expected a target that starts with '/' (origin form, printable ASCII), got '",
              shown(target, 80), "'");
  r.method = method;
  r.version = version;
  const size_t q = target.find('?');
  r.path = target.substr(0, q);
  if (q != std::string_view::npos) r.query = target.substr(q + 1);
}

void parse_header(std::string_view line, HttpRequest& r) {
  EMBER_CHECK(line.front() != ' ' && line.front() != '\t',
              "HTTP request: a folded header line (obsolete line folding is not accepted)");
  const size_t colon = line.find(':');
  EMBER_CHECK(colon != std::string_view::npos && is_token(line.substr(0, colon)),
              "HTTP request: expected a header 'Name: value', got '", shown(line, 80), "'");
  EMBER_CHECK(r.headers.size() < kMaxRequestHeaders, "HTTP request: more than ", kMaxRequestHeaders, " headers");
  std::string name = lower(line.substr(0, colon));
  const std::string_view value = trim(line.substr(colon + 1));
  // A request with a body would leave bytes this server never reads; GET and HEAD have none.
  if (name == "transfer-encoding") EMBER_FAIL("HTTP request: a body (Transfer-Encoding) where none is accepted");
  if (name == "content-length")
    EMBER_CHECK(value == "0", "HTTP request: a body (Content-Length ", shown(value, 20), ") where none is accepted");
  r.headers.emplace_back(std::move(name), std::string(value));
}

}  // namespace

std::optional<HttpRequest> parse_http_request(std::string_view bytes) {
  // The end of the head: the first empty line, CRLF or bare LF.
  size_t end = std::string_view::npos, blank = 0;
  for (size_t i = bytes.find('\n'); i != std::string_view::npos; i = bytes.find('\n', i + 1)) {
    if (i + 1 < bytes.size() && bytes[i + 1] == '\n') {
      end = i + 1, blank = 1;
      break;
    }
    if (i + 2 < bytes.size() && bytes[i + 1] == '\r' && bytes[i + 2] == '\n') {
      end = i + 1, blank = 2;
      break;
    }
  }
  const size_t head_len = end == std::string_view::npos ? bytes.size() : end + blank;
  EMBER_CHECK(head_len <= kMaxRequestHeadBytes, "HTTP request: the head is over ", kMaxRequestHeadBytes, " bytes");
  if (end == std::string_view::npos) return std::nullopt;
  std::vector<std::string_view> lines = head_lines(bytes.substr(0, end));
  EMBER_CHECK(!lines.empty() && !lines[0].empty(), "HTTP request: expected a request line, got an empty line");
  HttpRequest r;
  parse_request_line(lines[0], r);
  for (size_t i = 1; i < lines.size(); ++i) parse_header(lines[i], r);
  r.head_bytes = head_len;
  return r;
}

}  // namespace ember::sched
