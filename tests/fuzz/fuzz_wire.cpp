// The daemon's wire: bytes as a client (or anything else that connects) sends them on the socket,
// read by the daemon's framing (4-byte length, then the message) and parsed as a Request, whose
// submit spec the daemon validates. The bytes go through a real socket pair, closed after them, so
// a frame that promises more than it holds ends in the reader's "closed mid-message" error.
#include <sys/socket.h>

#include "fuzz_support.h"
#include "scheduler/daemon/job_spec.h"
#include "scheduler/daemon/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A socket pair holds a few hundred KiB unread; larger inputs would block the writer.
  if (size > (64u << 10)) return 0;
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) std::abort();
  int buf = 1 << 20;
  ::setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
  size_t off = 0;
  while (off < size) {
    ssize_t w = ::send(sv[0], data + off, size - off, MSG_NOSIGNAL);
    if (w <= 0) std::abort();
    off += static_cast<size_t>(w);
  }
  ::close(sv[0]);
  fuzz::errors_only([&] {
    const std::string frame = ember::sched::read_frame(sv[1], 5);
    ember::proto::Request req;
    if (!req.ParseFromString(frame)) return;
    if (req.has_submit()) ember::sched::validate_spec(req.submit().spec(), "fuzz request");
  });
  ::close(sv[1]);
  return 0;
}
