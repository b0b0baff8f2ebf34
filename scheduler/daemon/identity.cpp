#include "scheduler/daemon/identity.h"

#include <grp.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace ember::sched {
namespace {

// getpw*_r / getgr*_r need a buffer whose size the system suggests; entries with many members
// need more, so the call is retried with a larger one.
template <typename Entry, typename Fn>
bool lookup(Fn&& fn, Entry* out, std::vector<char>& buf) {
  long hint = ::sysconf(_SC_GETPW_R_SIZE_MAX);
  buf.assign(hint > 0 ? static_cast<size_t>(hint) : 4096, '\0');
  for (;;) {
    Entry* result = nullptr;
    int rc = fn(out, buf.data(), buf.size(), &result);
    if (rc == ERANGE && buf.size() < (1u << 24)) {
      buf.resize(buf.size() * 2);
      continue;
    }
    return rc == 0 && result != nullptr;
  }
}

std::vector<gid_t> groups_of(const char* name, gid_t gid) {
  int n = 64;
  std::vector<gid_t> g(static_cast<size_t>(n));
  while (::getgrouplist(name, gid, g.data(), &n) < 0) g.resize(static_cast<size_t>(n));
  g.resize(static_cast<size_t>(n));
  return g;
}

}  // namespace

bool Identity::in_group(gid_t g) const {
  return gid == g || std::find(groups.begin(), groups.end(), g) != groups.end();
}

std::string user_name(uid_t uid) {
  passwd pw{};
  std::vector<char> buf;
  if (lookup([&](passwd* e, char* b, size_t n, passwd** r) { return ::getpwuid_r(uid, e, b, n, r); }, &pw, buf))
    return pw.pw_name;
  return std::to_string(uid);
}

Identity peer_identity(int fd) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  EMBER_CHECK(::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0,
              "scheduler: cannot read the caller's credentials from the socket: ", std::strerror(errno));
  Identity id;
  id.uid = cred.uid;
  id.gid = cred.gid;
  // The caller's supplementary groups as its process has them (Linux 4.13+); on older kernels the
  // system's group database stands in.
  std::vector<gid_t> g(64);
  len = static_cast<socklen_t>(g.size() * sizeof(gid_t));
  int rc = ::getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g.data(), &len);
  if (rc != 0 && errno == ERANGE) {
    g.resize(len / sizeof(gid_t) + 1);
    len = static_cast<socklen_t>(g.size() * sizeof(gid_t));
    rc = ::getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g.data(), &len);
  }
  id.name = user_name(id.uid);
  if (rc == 0) {
    g.resize(len / sizeof(gid_t));
    id.groups = g;
  } else if (id.name != std::to_string(id.uid)) {
    id.groups = groups_of(id.name.c_str(), id.gid);
  }
  return id;
}

Identity self_identity() {
  Identity id;
  id.uid = ::geteuid();
  id.gid = ::getegid();
  int n = ::getgroups(0, nullptr);
  id.groups.resize(static_cast<size_t>(std::max(n, 0)));
  if (n > 0) id.groups.resize(static_cast<size_t>(std::max(::getgroups(n, id.groups.data()), 0)));
  id.name = user_name(id.uid);
  return id;
}

Identity user_identity(uid_t uid) {
  passwd pw{};
  std::vector<char> buf;
  EMBER_CHECK(lookup([&](passwd* e, char* b, size_t n, passwd** r) { return ::getpwuid_r(uid, e, b, n, r); }, &pw, buf),
              "scheduler: no user with uid ", uid, " on this system (its job cannot run as its owner)");
  Identity id;
  id.uid = pw.pw_uid;
  id.gid = pw.pw_gid;
  id.name = pw.pw_name;
  id.home = pw.pw_dir ? pw.pw_dir : "/";
  id.groups = groups_of(pw.pw_name, pw.pw_gid);
  return id;
}

uid_t uid_of_user(const std::string& name, const std::string& what) {
  passwd pw{};
  std::vector<char> buf;
  EMBER_CHECK(lookup([&](passwd* e, char* b, size_t n, passwd** r) { return ::getpwnam_r(name.c_str(), e, b, n, r); },
                     &pw, buf),
              what, ": no user named '", name, "' on this system");
  return pw.pw_uid;
}

gid_t gid_of_group(const std::string& name, const std::string& what) {
  group gr{};
  std::vector<char> buf;
  EMBER_CHECK(
      lookup([&](group* e, char* b, size_t n, group** r) { return ::getgrnam_r(name.c_str(), e, b, n, r); }, &gr, buf),
      what, ": no group named '", name, "' on this system");
  return gr.gr_gid;
}

bool become(const Identity& who) {
  // Groups first and uid last: once the uid is dropped, the process may no longer change groups.
  if (::setgroups(who.groups.size(), who.groups.data()) != 0) return false;
  if (::setresgid(who.gid, who.gid, who.gid) != 0) return false;
  if (::setresuid(who.uid, who.uid, who.uid) != 0) return false;
  return ::geteuid() == who.uid && ::getegid() == who.gid;
}

int run_as(const Identity& who, const std::function<int()>& check) {
  pid_t pid = ::fork();
  EMBER_CHECK(pid >= 0, "scheduler: cannot fork to check a path as user ", who.name, ": ", std::strerror(errno));
  if (pid == 0) {
    if (!become(who)) _exit(255);
    _exit(check() & 0x7f);
  }
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(st) || WEXITSTATUS(st) == 255) return -1;
  return WEXITSTATUS(st);
}

}  // namespace ember::sched
