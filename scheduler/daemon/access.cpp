#include "scheduler/daemon/access.h"

#include <set>

#include "core/error.h"
#include "scheduler/daemon/job_spec.h"

namespace ember::sched {
namespace {

void check_limits(const proto::UserLimits& l, const std::string& where) {
  EMBER_CHECK(l.max_devices() >= 0, where, ".max_devices: expected 0 (no limit) or more, got ", l.max_devices());
  EMBER_CHECK(l.max_queued() >= 0, where, ".max_queued: expected 0 (no limit) or more, got ", l.max_queued());
}

}  // namespace

proto::DaemonConfig read_daemon_config(const std::string& path) {
  proto::DaemonConfig c;
  if (path.empty()) return c;
  const std::string err = parse_text_format(read_text_file(path, "--config"), &c);
  EMBER_CHECK(err.empty(), "--config ", path, ":", err,
              " (fields: users_group, admin_group, limits { max_devices max_queued }, user { name limits })");
  check_limits(c.limits(), "--config " + path + ": limits");
  std::set<std::string> seen;
  for (const proto::UserEntry& u : c.user()) {
    EMBER_CHECK(!u.name().empty(), "--config ", path, ": a user entry has no name");
    EMBER_CHECK(seen.insert(u.name()).second, "--config ", path, ": user '", u.name(), "' is listed twice");
    check_limits(u.limits(), "--config " + path + ": user " + u.name() + " limits");
  }
  return c;
}

Access::Access(const proto::DaemonConfig& config, const Identity& self, const std::string& origin)
    : config_(config), self_(self) {
  const std::string where = "--config " + origin + ": ";
  users_gid_ = config.users_group().empty() ? self.gid : gid_of_group(config.users_group(), where + "users_group");
  if (!config.admin_group().empty()) {
    admin_gid_ = gid_of_group(config.admin_group(), where + "admin_group");
    has_admin_gid_ = true;
  }
  for (const proto::UserEntry& u : config.user()) per_user_[uid_of_user(u.name(), where + "user")] = u.limits();
}

bool Access::is_admin(const Identity& who) const {
  return who.uid == 0 || who.uid == self_.uid || (has_admin_gid_ && who.in_group(admin_gid_));
}

uid_t Access::owner_of(const proto::JobInfo& job) const {
  return job.has_owner_uid() ? job.owner_uid() : self_.uid;
}

bool Access::may_act_on(const Identity& who, const proto::JobInfo& job) const {
  return is_admin(who) || who.uid == owner_of(job);
}

void Access::check_may_submit(const Identity& who) const {
  if (runs_jobs_as_owners() || who.uid == self_.uid) return;
  EMBER_FAIL("user ", who.name, " may not submit here: this daemon runs as user ", self_.name,
             " and can run jobs only as ", self_.name,
             " (a daemon started as root runs each job as the user who submitted it)");
}

const proto::UserLimits& Access::limits_of(uid_t uid) const {
  auto it = per_user_.find(uid);
  return it != per_user_.end() ? it->second : config_.limits();
}

void Access::redact(proto::JobInfo* job) {
  proto::JobSpec* s = job->mutable_spec();
  s->clear_command();
  s->clear_args();
  s->clear_env();
  s->clear_workdir();
  s->clear_checkpoint_dir();
  job->clear_log_path();
  job->clear_pid();
  job->clear_events();
  job->set_redacted(true);
}

}  // namespace ember::sched
