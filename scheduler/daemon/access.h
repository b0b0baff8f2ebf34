// Who may do what with the daemon (docs/scheduler/daemon.md, "Security"): its configuration file
// (proto/daemon_config.proto) read and checked, and the rules applied to each request.
//   - Root, the daemon's own user and members of admin_group are admins: they act on every job.
//   - Anyone else acts on their own jobs only (cancel, preempt, logs) and sees other users' jobs
//     without their commands, arguments, environments and paths.
//   - A daemon running as root runs each job as its owner. One that does not can only run jobs as
//     itself, so it takes submissions from its own user only.
//   - Per-user limits: devices held by running jobs, jobs waiting.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>

#include "daemon_config.pb.h"
#include "job.pb.h"
#include "scheduler/daemon/identity.h"

namespace ember::sched {

// Reads and checks a configuration file; an empty path gives the defaults. Throws ember::Error
// naming the file and the field (syntax, an unknown user or group, a negative limit).
proto::DaemonConfig read_daemon_config(const std::string& path);

class Access {
 public:
  // `self`: the daemon's own identity. Looks up the configuration's users and groups (errors name
  // `origin`, the configuration file).
  Access(const proto::DaemonConfig& config, const Identity& self, const std::string& origin);

  bool is_admin(const Identity& who) const;
  // Job owners: may `who` act on a job owned by `owner_uid` (absent: the daemon's own user)?
  bool may_act_on(const Identity& who, const proto::JobInfo& job) const;
  // Throws ember::Error unless `who` may submit to this daemon.
  void check_may_submit(const Identity& who) const;
  // `who`'s limits (the user's own entry, else the default).
  const proto::UserLimits& limits_of(uid_t uid) const;
  // The group the state folder and socket belong to.
  gid_t users_gid() const { return users_gid_; }
  bool runs_jobs_as_owners() const { return self_.uid == 0; }
  const Identity& self() const { return self_; }

  // The job's owner uid (the daemon's own user for jobs recorded without one).
  uid_t owner_of(const proto::JobInfo& job) const;

  // What a user who may not act on a job sees of it: everything but the command, arguments,
  // environment, paths and pid.
  static void redact(proto::JobInfo* job);

 private:
  proto::DaemonConfig config_;
  Identity self_;
  gid_t users_gid_ = 0;
  bool has_admin_gid_ = false;
  gid_t admin_gid_ = 0;
  std::map<uid_t, proto::UserLimits> per_user_;
};

}  // namespace ember::sched
