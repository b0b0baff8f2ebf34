// The head of an HTTP/1.1 request, as the daemon's read-only web endpoint (http_server.h) reads
// it from a stranger: bounded, strict about the grammar it needs, and an ember::Error for anything
// else, never a crash. A pure function of its input, so that it can be fuzzed on its own.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ember::sched {

// Larger heads are refused: the endpoint serves GET requests of a few hundred bytes.
inline constexpr size_t kMaxRequestHeadBytes = 8192;
inline constexpr size_t kMaxRequestHeaders = 64;

struct HttpRequest {
  std::string method;                                        // "GET", as sent (the server answers others with 405)
  std::string path;                                          // "/metrics": the target before any '?'
  std::string query;                                         // after the '?', undecoded ("" when none)
  std::string version;                                       // "HTTP/1.1" or "HTTP/1.0"
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased, values trimmed
  size_t head_bytes = 0;                                     // the head's length, blank line included
};

// Parses the request head at the start of `bytes`. nullopt: no blank line yet, so more bytes may
// complete it. Throws ember::Error naming what is wrong for a malformed head, a head over
// kMaxRequestHeadBytes (complete or not), a request with a body (GET has none), or an
// absolute-form or non-printable target. Lines end in CRLF or, leniently, LF.
std::optional<HttpRequest> parse_http_request(std::string_view bytes);

}  // namespace ember::sched
