// The CLI <-> daemon protocol on a Unix-domain socket: each message is a 4-byte little-endian
// length and that many bytes of a serialized Request or Response (proto/job.proto); a client
// connects, sends one Request, reads one Response. Reads and writes carry a deadline, so a stuck
// peer is an ember::Error, never a hang.
#pragma once

#include <string>

#include "job.pb.h"

namespace ember::sched {

inline constexpr size_t kMaxMessageBytes = 64u << 20;  // a log chunk plus slack

// The socket a daemon with state folder `state_dir` listens on.
std::string socket_path(const std::string& state_dir);

// Frames. `timeout_s` bounds the whole read or write; throws ember::Error on timeout, EOF, a
// length above kMaxMessageBytes or a message that does not parse.
void write_frame(int fd, const std::string& bytes, double timeout_s);
std::string read_frame(int fd, double timeout_s);

// A client's round trip. Throws ember::Error naming the socket when no daemon listens there, and
// calling the daemon unresponsive when it accepts but does not answer within `timeout_s` (every
// request is answered in milliseconds by a live daemon, so a few seconds is already a hang).
proto::Response call_daemon(const std::string& state_dir, const proto::Request& req, double timeout_s = 5);

// A listening socket at `path` (a stale socket file left by a dead daemon is replaced; a live
// daemon already listening there is an error).
int listen_unix(const std::string& path);

}  // namespace ember::sched
