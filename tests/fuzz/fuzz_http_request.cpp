// The daemon's web endpoint (`ember sched serve --http`): bytes as any client on the network sends
// them, parsed as an HTTP request head (scheduler/daemon/http_request.h), and the same bytes read
// as a job's log for its progress reports (scheduler/daemon/progress.h). Either parses or is an
// ember::Error; a parsed head is within the bounds the server relies on.
#include "fuzz_support.h"
#include "scheduler/daemon/http_request.h"
#include "scheduler/daemon/progress.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  fuzz::errors_only([&] {
    if (auto r = ember::sched::parse_http_request(bytes)) {
      if (r->head_bytes > ember::sched::kMaxRequestHeadBytes || r->head_bytes > size ||
          r->headers.size() > ember::sched::kMaxRequestHeaders || r->path.empty() || r->path[0] != '/')
        std::abort();
    }
  });
  if (auto p = ember::sched::latest_progress(bytes))
    if (p->epoch() < 0 || p->step() < 0) std::abort();
  return 0;
}
