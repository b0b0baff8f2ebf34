// Who is on the other end of the daemon's socket, and acting as that user. The kernel vouches for
// a Unix socket's peer (SO_PEERCRED: the uid and gid of the process that connected, which it
// cannot forge), so the daemon needs no passwords or tokens: the identity of a request is the
// identity of the process that sent it. Acting as a user is done in forked children only (a check
// that runs with the user's ids, or the job itself), so the daemon never changes its own ids.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

namespace ember::sched {

struct Identity {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups
  std::string name;           // the user's name, or the uid as text when the system has none
  std::string home;           // the user's home folder (user_identity only)

  bool in_group(gid_t g) const;
};

// The process connected at the other end of the Unix socket `fd`. Throws ember::Error when the
// kernel does not say.
Identity peer_identity(int fd);

// This process's own effective identity.
Identity self_identity();

// A user as the system's databases describe it (getpwuid, getgrouplist): the identity a job of
// `uid` runs with. Throws ember::Error naming the uid when the system has no such user.
Identity user_identity(uid_t uid);

// The uid of user `name` / gid of group `name`; throw ember::Error naming `what` (the setting that
// names it) when there is none.
uid_t uid_of_user(const std::string& name, const std::string& what);
gid_t gid_of_group(const std::string& name, const std::string& what);

// `name` when the system knows uid, else the number.
std::string user_name(uid_t uid);

// Switches this process to `who` for good (supplementary groups, then gid, then uid). For a
// freshly forked child only; returns false (errno set) when the kernel refuses.
bool become(const Identity& who);

// Runs `check` in a child process that has become `who` and returns what it returns (a small
// number; -1 when the child could not become `who` or died). The daemon asks "could this user
// enter that folder?" this way, with the kernel's own permission rules (ACLs and all) rather than
// a re-implementation of them.
int run_as(const Identity& who, const std::function<int()>& check);

}  // namespace ember::sched
