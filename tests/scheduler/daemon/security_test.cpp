// Who may do what with the daemon, with real users: the tests create them (useradd, when run as
// root; skipped with a message otherwise), run the daemon as root or as one of them, and send each
// request from a process that has become the user, so that the daemon sees the kernel's own
// credentials for it. The users stay on the machine for later runs (system accounts without a
// home or a login shell); creating them is serialised by a lock, so parallel tests can share them.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "daemon_fixture.h"
#include "scheduler/daemon/identity.h"

using namespace daemon_test;
using ember::sched::Identity;

namespace {

constexpr const char* kUsersGroup = "ember-test-users";
constexpr const char* kAdminGroup = "ember-test-admins";
constexpr const char* kUserA = "ember-test-a";
constexpr const char* kUserB = "ember-test-b";
constexpr const char* kAdmin = "ember-test-admin";
constexpr const char* kOutsider = "ember-test-out";  // in no group of the daemon's

// What a user got back: the response, or the error the client would have printed.
struct Reply {
  bool ok = false;
  std::string error;
  Response resp;
};

class SecurityTest : public DaemonTest {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "skipped: needs root to create test users and run jobs as them";
    DaemonTest::SetUp();
    const std::string script = std::string("set -e; ") + "for g in " + kUsersGroup + " " + kAdminGroup +
                               "; do getent group $g >/dev/null || groupadd --system $g; done; " +
                               "mk() { getent passwd $1 >/dev/null || useradd --system --no-create-home " +
                               "--home-dir /nonexistent --shell /usr/sbin/nologin --user-group $2 $1; }; " + "mk " +
                               kUserA + " '-G " + kUsersGroup + "'; mk " + kUserB + " '-G " + kUsersGroup + "'; mk " +
                               kAdmin + " '-G " + kUsersGroup + "," + kAdminGroup + "'; mk " + kOutsider + " ''";
    Result r = run({"/usr/bin/flock", "/tmp/ember-test-users.lock", "/bin/sh", "-c", script});
    ASSERT_EQ(r.status, 0) << "could not create the test users: " << r.out;
    a_ = ember::sched::user_identity(ember::sched::uid_of_user(kUserA, "test"));
    b_ = ember::sched::user_identity(ember::sched::uid_of_user(kUserB, "test"));
    admin_ = ember::sched::user_identity(ember::sched::uid_of_user(kAdmin, "test"));
    outsider_ = ember::sched::user_identity(ember::sched::uid_of_user(kOutsider, "test"));
    // The users reach the test folder (gate files, shared scripts); A's home is A's alone.
    ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);
    home_a_ = dir_ + "/home-a";
    fs::create_directories(home_a_);
    ASSERT_EQ(::chown(home_a_.c_str(), a_.uid, a_.gid), 0);
    ASSERT_EQ(::chmod(home_a_.c_str(), 0700), 0);
    config_ = dir_ + "/daemon.pbtxt";
    write_file(config_, std::string("users_group: \"") + kUsersGroup + "\"\nadmin_group: \"" + kAdminGroup + "\"\n");
  }

  // Sends `q` from a child process that has become `who`.
  Reply call_as(const Identity& who, const Request& q) {
    int p[2];
    EXPECT_EQ(::pipe(p), 0);
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(p[0]);
      std::string out;
      if (!ember::sched::become(who)) {
        out = "ERcannot become the user";
      } else {
        try {
          Response r = ember::sched::call_daemon(state_, q, 10);
          out = r.ok() ? "OK" + r.SerializeAsString() : "ER" + r.error();
        } catch (const std::exception& e) {
          out = std::string("ER") + e.what();
        }
      }
      size_t off = 0;
      while (off < out.size()) {
        ssize_t w = ::write(p[1], out.data() + off, out.size() - off);
        if (w <= 0) break;
        off += static_cast<size_t>(w);
      }
      _exit(0);
    }
    ::close(p[1]);
    std::string got;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(p[0], buf, sizeof(buf))) > 0) got.append(buf, static_cast<size_t>(n));
    ::close(p[0]);
    ::waitpid(pid, nullptr, 0);
    Reply r;
    r.ok = got.rfind("OK", 0) == 0;
    if (r.ok)
      EXPECT_TRUE(r.resp.ParseFromString(got.substr(2)));
    else
      r.error = got.size() >= 2 ? got.substr(2) : "no reply";
    return r;
  }

  Reply submit_as(const Identity& who, const JobSpec& spec) {
    Request q;
    *q.mutable_submit()->mutable_spec() = spec;
    return call_as(who, q);
  }

  Reply cancel_as(const Identity& who, int64_t id) {
    Request q;
    q.mutable_cancel()->set_job(id);
    return call_as(who, q);
  }

  Reply preempt_as(const Identity& who, int64_t id) {
    Request q;
    q.mutable_preempt()->set_job(id);
    return call_as(who, q);
  }

  Reply logs_as(const Identity& who, int64_t id) {
    Request q;
    q.mutable_logs()->set_job(id);
    return call_as(who, q);
  }

  Reply status_as(const Identity& who, int64_t id = 0) {
    Request q;
    q.mutable_status()->set_all(true);
    q.mutable_status()->set_job(id);
    return call_as(who, q);
  }

  // A job that says who it runs as, leaves a file in its working directory and waits for `gate`.
  JobSpec whoami(const std::string& name, const std::string& workdir, const std::string& gate) {
    JobSpec s;
    s.set_name(name);
    s.set_command("/bin/sh");
    s.add_args("-c");
    s.add_args("echo uid=$(id -u) gid=$(id -g) user=$USER home=$HOME; touch made-by-" + name + "; " + wait_gate(gate) +
               "; echo finished " + name);
    s.set_workdir(workdir);
    return s;
  }

  static uid_t owner_uid(const std::string& path) {
    struct stat st {};
    EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
    return st.st_uid;
  }

  Identity a_, b_, admin_, outsider_;
  std::string home_a_, config_;
};

TEST_F(SecurityTest, EachJobRunsAsItsOwnerAndOnlyItsOwnerOrAnAdminActsOnIt) {
  start_daemon({"--devices", "cpu:2", "--config", config_});
  Reply sub = submit_as(a_, whoami("a-job", home_a_, "gate"));
  ASSERT_TRUE(sub.ok) << sub.error;
  const int64_t id = sub.resp.job();
  ASSERT_TRUE(wait_for([&] { return log_of(id).find("uid=") != std::string::npos; })) << log_of(id);
  // It runs as A, with A's environment, and what it makes is A's.
  EXPECT_NE(log_of(id).find("uid=" + std::to_string(a_.uid) + " gid=" + std::to_string(a_.gid) + " user=" + kUserA +
                            " home=/nonexistent"),
            std::string::npos)
      << log_of(id);
  ASSERT_TRUE(wait_for([&] { return fs::exists(home_a_ + "/made-by-a-job"); }));
  EXPECT_EQ(owner_uid(home_a_ + "/made-by-a-job"), a_.uid);
  EXPECT_EQ(owner_uid(job(id).log_path()), a_.uid) << "the job's log is its owner's file";
  EXPECT_EQ(job(id).owner(), kUserA);
  EXPECT_EQ(job(id).owner_uid(), a_.uid);

  // B may not cancel, preempt or read A's job, and sees it without command, arguments or paths.
  Reply c = cancel_as(b_, id);
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.error.find("may not cancel job " + std::to_string(id) + ": it belongs to " + kUserA), std::string::npos)
      << c.error;
  Reply p = preempt_as(b_, id);
  EXPECT_FALSE(p.ok);
  EXPECT_NE(p.error.find("may not preempt"), std::string::npos) << p.error;
  Reply l = logs_as(b_, id);
  EXPECT_FALSE(l.ok);
  EXPECT_NE(l.error.find("may not read the log of job"), std::string::npos) << l.error;
  for (int64_t which : {int64_t{0}, id}) {
    Reply st = status_as(b_, which);
    ASSERT_TRUE(st.ok) << st.error;
    ASSERT_EQ(st.resp.jobs_size(), 1);
    const JobInfo& seen = st.resp.jobs(0);
    EXPECT_TRUE(seen.redacted());
    EXPECT_EQ(seen.owner(), kUserA);
    EXPECT_EQ(seen.spec().name(), "a-job");
    EXPECT_EQ(seen.state(), ember::proto::RUNNING);
    EXPECT_TRUE(seen.spec().command().empty() && seen.spec().args_size() == 0 && seen.spec().workdir().empty() &&
                seen.log_path().empty() && seen.pid() == 0)
        << seen.DebugString();
  }
  Request drain;
  drain.mutable_drain();
  Reply d = call_as(b_, drain);
  EXPECT_FALSE(d.ok);
  EXPECT_NE(d.error.find("may not drain"), std::string::npos) << d.error;

  // The admin group sees and reads everything; A acts on A's own job.
  Reply st = status_as(admin_, id);
  ASSERT_TRUE(st.ok) << st.error;
  EXPECT_FALSE(st.resp.jobs(0).redacted());
  EXPECT_EQ(st.resp.jobs(0).spec().command(), "/bin/sh");
  Reply al = logs_as(admin_, id);
  ASSERT_TRUE(al.ok) << al.error;
  EXPECT_NE(al.resp.log().find("uid="), std::string::npos);
  Reply own = logs_as(a_, id);
  ASSERT_TRUE(own.ok) << own.error;
  Reply ac = cancel_as(a_, id);
  ASSERT_TRUE(ac.ok) << ac.error;
  ASSERT_TRUE(wait_for([&] { return finished(id); }));
  EXPECT_EQ(job(id).state(), ember::proto::CANCELLED);

  // Someone outside the users' group cannot even reach the socket.
  Reply out = status_as(outsider_);
  EXPECT_FALSE(out.ok);
  EXPECT_NE(out.error.find("no daemon answers"), std::string::npos) << out.error;
  EXPECT_NE(out.error.find("Permission denied"), std::string::npos) << out.error;
}

TEST_F(SecurityTest, ASpecThatReachesIntoAnotherUsersFolderIsRefused) {
  start_daemon({"--devices", "cpu:2", "--config", config_});
  write_file(home_a_ + "/run.sh", "#!/bin/sh\necho hello\n");
  ASSERT_EQ(::chmod((home_a_ + "/run.sh").c_str(), 0755), 0);
  ASSERT_EQ(::chown((home_a_ + "/run.sh").c_str(), a_.uid, a_.gid), 0);

  JobSpec ckpt = whoami("b-ckpt", dir_, "gate");
  ckpt.set_checkpoint_dir(home_a_ + "/ckpt/b");
  Reply r = submit_as(b_, ckpt);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("checkpoint_dir '" + home_a_ + "/ckpt/b': user " + kUserB + " may not write there"),
            std::string::npos)
      << r.error;
  EXPECT_FALSE(fs::exists(home_a_ + "/ckpt")) << "nothing is created in A's folder";

  r = submit_as(b_, whoami("b-workdir", home_a_, "gate"));
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("user " + std::string(kUserB) + " may not enter the working directory"), std::string::npos)
      << r.error;
  // A file B can see, given as the working directory, is named as a file (checked as B).
  write_file(dir_ + "/a-file", "");
  r = submit_as(b_, whoami("b-file", dir_ + "/a-file", "gate"));
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("working directory '" + dir_ + "/a-file' is not a folder (it is a file)"), std::string::npos)
      << r.error;

  JobSpec prog = whoami("b-prog", dir_, "gate");
  prog.set_command(home_a_ + "/run.sh");
  prog.clear_args();
  r = submit_as(b_, prog);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("is not a program user " + std::string(kUserB) + " may run"), std::string::npos) << r.error;

  // The same specs are A's to run.
  ckpt.set_name("a-ckpt");
  ckpt.set_checkpoint_dir(home_a_ + "/ckpt/a");
  r = submit_as(a_, ckpt);
  EXPECT_TRUE(r.ok) << r.error;
  prog.set_name("a-prog");
  r = submit_as(a_, prog);
  ASSERT_TRUE(r.ok) << r.error;
  const int64_t id = r.resp.job();
  ASSERT_TRUE(wait_for([&] { return finished(id); }));
  EXPECT_EQ(job(id).state(), ember::proto::DONE) << job(id).reason();
  write_file(dir_ + "/gate", "");
}

TEST_F(SecurityTest, ADaemonThatIsNotRootTakesJobsFromItsOwnUserOnly) {
  // The daemon runs as A; its state folder must be A's.
  fs::create_directories(state_);
  ASSERT_EQ(::chown(state_.c_str(), a_.uid, a_.gid), 0);
  start_daemon({"--devices", "cpu:1", "--config", config_}, &a_);
  Reply r = submit_as(b_, whoami("b-job", dir_, "gate"));
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("user " + std::string(kUserB) + " may not submit here: this daemon runs as user " + kUserA),
            std::string::npos)
      << r.error;
  r = submit_as(a_, whoami("a-job", dir_, "gate"));
  ASSERT_TRUE(r.ok) << r.error;
  const int64_t id = r.resp.job();
  write_file(dir_ + "/gate", "");
  ASSERT_TRUE(wait_for([&] { return finished(id); }));
  EXPECT_EQ(job(id).state(), ember::proto::DONE) << job(id).reason();
  EXPECT_NE(log_of(id).find("uid=" + std::to_string(a_.uid)), std::string::npos) << log_of(id);
}

TEST_F(SecurityTest, AStateFolderOfAnotherUserIsRefused) {
  fs::create_directories(state_);
  ASSERT_EQ(::chown(state_.c_str(), a_.uid, a_.gid), 0);
  Result r = run({EMBER_EXE, "sched", "serve", "--state", state_, "--devices", "cpu:1"});
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("the folder belongs to " + std::string(kUserA) + ", expected the daemon's own user (root)"),
            std::string::npos)
      << r.out;
}

TEST_F(SecurityTest, TheStateFolderSocketAndDatabaseHaveTheirDocumentedModes) {
  start_daemon({"--devices", "cpu:1", "--config", config_});
  const gid_t users = ember::sched::gid_of_group(kUsersGroup, "test");
  struct stat st {};
  ASSERT_EQ(::stat(state_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0770u);
  EXPECT_EQ(st.st_gid, users);
  ASSERT_EQ(::stat(ember::sched::socket_path(state_).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0660u);
  EXPECT_EQ(st.st_gid, users);
  ASSERT_EQ(::stat((state_ + "/state.db").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 077, 0u) << "the database holds every user's commands: the daemon's alone";
  ASSERT_EQ(::stat((state_ + "/jobs").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
}

TEST_F(SecurityTest, PerUserLimitsBoundDevicesAndQueuedJobs) {
  write_file(config_, std::string("users_group: \"") + kUsersGroup + "\"\nlimits { max_devices: 1 max_queued: 1 }\n" +
                          "user { name: \"" + kUserB + "\" limits { max_devices: 2 } }\n");
  start_daemon({"--devices", "cpu:3", "--policy", "fcfs", "--config", config_});
  Reply a1 = submit_as(a_, whoami("a1", dir_, "gate"));
  Reply a2 = submit_as(a_, whoami("a2", dir_, "gate"));
  ASSERT_TRUE(a1.ok && a2.ok) << a1.error << a2.error;
  Reply a3 = submit_as(a_, whoami("a3", dir_, "gate"));
  EXPECT_FALSE(a3.ok);
  EXPECT_NE(a3.error.find("has 1 job(s) waiting, the limit per user is 1"), std::string::npos) << a3.error;
  EXPECT_EQ(job(a1.resp.job()).state(), ember::proto::RUNNING);
  EXPECT_EQ(job(a2.resp.job()).state(), ember::proto::QUEUED) << "A holds one device, the limit";
  // Behind A's waiting job, even under strict FCFS: A's job is not the policy's to start.
  JobSpec wide = whoami("b-wide", dir_, "gate");
  wide.set_devices(2);
  Reply b1 = submit_as(b_, wide);
  ASSERT_TRUE(b1.ok) << b1.error;
  EXPECT_EQ(job(b1.resp.job()).state(), ember::proto::RUNNING) << "B's own limit is 2";
  JobSpec too_wide = whoami("a-wide", dir_, "gate");
  too_wide.set_devices(2);
  Reply a4 = submit_as(a_, too_wide);
  EXPECT_FALSE(a4.ok);
  EXPECT_NE(a4.error.find("may hold at most 1"), std::string::npos) << a4.error;
  write_file(dir_ + "/gate", "");
  ASSERT_TRUE(wait_for([&] { return finished(a1.resp.job()) && finished(a2.resp.job()) && finished(b1.resp.job()); }));
  EXPECT_EQ(job(a2.resp.job()).state(), ember::proto::DONE);
}

TEST(DaemonConfig, BadConfigurationFilesAreRefusedWithTheField) {
  char tmpl[] = "/tmp/esc-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  struct Case {
    std::string text, expect;
  };
  const std::vector<Case> cases = {
      {"users_group: \"no-such-group-ember\"\n", "users_group: no group named 'no-such-group-ember'"},
      {"admin_group: \"no-such-group-ember\"\n", "admin_group: no group named 'no-such-group-ember'"},
      {"user { name: \"no-such-user-ember\" }\n", "no user named 'no-such-user-ember'"},
      {"limits { max_devices: -1 }\n", "limits.max_devices: expected 0 (no limit) or more, got -1"},
      {"user { name: \"root\" limits { max_queued: -2 } }\n", "user root limits.max_queued: expected 0"},
      {"user { name: \"root\" }\nuser { name: \"root\" }\n", "user 'root' is listed twice"},
      {"users_grup: \"x\"\n", "1:11:"},
      {"limits { max_devices: 1\n", "config.pbtxt:2:1: Expected identifier"},
  };
  for (const Case& c : cases) {
    write_file(dir + "/config.pbtxt", c.text);
    Result r = run({EMBER_EXE, "sched", "serve", "--state", dir + "/state", "--config", dir + "/config.pbtxt"});
    EXPECT_NE(r.status, 0) << c.text;
    EXPECT_NE(r.out.find(c.expect), std::string::npos) << c.text << "\n" << r.out;
    EXPECT_NE(r.out.find("--config " + dir + "/config.pbtxt"), std::string::npos) << r.out;
  }
  Result r = run({EMBER_EXE, "sched", "serve", "--state", dir + "/state", "--config", dir + "/missing.pbtxt"});
  EXPECT_NE(r.out.find("cannot open it for reading"), std::string::npos) << r.out;
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
