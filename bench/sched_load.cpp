// bench/sched_load: the scheduler daemon under load. A daemon (`ember sched serve`, its own
// process, as users run it) starts on a state folder whose database already holds a long history
// of finished jobs; then many clients at once send it a mix of the requests people make (submit,
// queue, logs, cancel), each client a thread with its own connections, as concurrent `ember sched`
// commands would be. It prints the latency of every kind of request (median, 99th percentile,
// worst), the errors (there must be none), and checks the database afterwards: SQLite's
// `PRAGMA integrity_check`, every job present once, every cancelled job recorded as cancelled.
// No reference program: nothing else speaks this protocol. What a person should expect: every
// request well under a second, the 99th percentile under 50 ms.
#include <signal.h>
#include <sqlite3.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_util.h"
#include "core/error.h"
#include "scheduler/daemon/store.h"
#include "scheduler/daemon/wire.h"

namespace {

namespace fs = std::filesystem;
using namespace ember;
using Clock = std::chrono::steady_clock;

struct Options {
  int history = 10000;
  int clients = 50;
  int requests = 2000;
};

// The history: finished jobs written straight into a database as the daemon keeps it. Built in
// /dev/shm (no fsync per transaction) and copied into place: only the load is measured.
void write_history(const std::string& state_dir, int n) {
  const char* shm = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  const std::string tmp = std::string(shm) + "/ember-load-history-" + std::to_string(::getpid()) + ".db";
  {
    sched::Store store(tmp);
    const double t0 = 1.7e9;
    for (int i = 0; i < n; ++i) {
      sched::JobRecord r;
      proto::JobSpec* s = r.info.mutable_spec();
      s->set_name("history-" + std::to_string(i));
      s->set_command("/bin/true");
      s->set_workdir("/tmp");
      r.info.set_owner_uid(::geteuid());
      r.info.set_owner_gid(::getegid());
      r.info.set_owner("bench");
      r.info.set_state(i % 10 == 0 ? proto::FAILED : proto::DONE);
      r.info.set_submit_time(t0 + i);
      r.info.set_first_start(t0 + i + 1);
      r.info.set_last_start(t0 + i + 1);
      r.info.set_finish_time(t0 + i + 60);
      r.info.set_run_seconds(59);
      r.info.set_attempts(1);
      r.info.set_reason(i % 10 == 0 ? "failed (exit 1)" : "exit 0");
      store.insert(r, "submitted");
      store.save(r, r.info.reason());
    }
  }
  fs::copy_file(tmp, fs::path(state_dir) / "state.db");
  fs::remove(tmp);
}

pid_t start_daemon(const std::string& ember, const std::string& state_dir) {
  pid_t pid = ::fork();
  EMBER_CHECK(pid >= 0, "fork failed");
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    std::vector<std::string> argv = {ember,   "sched",   "serve",   "--state", state_dir,      "--devices",
                                     "cpu:4", "--quiet", "--grace", "2",       "--max-queued", "100000"};
    std::vector<char*> a;
    for (std::string& s : argv) a.push_back(s.data());
    a.push_back(nullptr);
    ::execv(a[0], a.data());
    _exit(127);
  }
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  for (;;) {
    try {
      proto::Request q;
      q.mutable_status();
      sched::call_daemon(state_dir, q, 5);
      return pid;
    } catch (const Error&) {
      int st;
      EMBER_CHECK(::waitpid(pid, &st, WNOHANG) == 0, "the daemon exited at start-up (", ember, ")");
      EMBER_CHECK(Clock::now() < deadline, "the daemon did not answer within 60 s");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

struct Sample {
  int kind;  // 0 submit, 1 queue, 2 logs, 3 cancel
  double seconds;
};
const char* kKinds[4] = {"submit", "queue", "logs", "cancel"};

// One client: its share of the requests, in a random mix; it cancels and reads only its own jobs.
void client(const std::string& state_dir, int index, int count, std::vector<Sample>& out,
            std::vector<int64_t>& cancelled, std::vector<int64_t>& submitted, std::vector<std::string>& errors) {
  std::mt19937 rng(static_cast<unsigned>(index) * 7919u + 1);
  std::vector<int64_t> mine, live;
  for (int i = 0; i < count; ++i) {
    int kind = static_cast<int>(rng() % 10);
    kind = kind < 3 ? 0 : kind < 7 ? 1 : kind < 9 ? 2 : 3;
    if ((kind == 2 && mine.empty()) || (kind == 3 && live.empty())) kind = 0;
    proto::Request q;
    switch (kind) {
      case 0: {
        proto::JobSpec* s = q.mutable_submit()->mutable_spec();
        s->set_name("load-" + std::to_string(index) + "-" + std::to_string(i));
        s->set_command("/bin/sleep");
        s->add_args("600");
        s->set_workdir("/tmp");
        break;
      }
      case 1:
        q.mutable_status();
        break;
      case 2:
        q.mutable_logs()->set_job(mine[rng() % mine.size()]);
        break;
      default: {
        const size_t k = rng() % live.size();
        q.mutable_cancel()->set_job(live[k]);
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
        break;
      }
    }
    const auto t0 = Clock::now();
    try {
      proto::Response r = sched::call_daemon(state_dir, q, 10);
      out.push_back({kind, bench::seconds(Clock::now() - t0)});
      if (!r.ok()) {
        errors.push_back(std::string(kKinds[kind]) + ": " + r.error());
        continue;
      }
      if (kind == 0) {
        mine.push_back(r.job());
        live.push_back(r.job());
        submitted.push_back(r.job());
      }
      if (kind == 3) cancelled.push_back(q.cancel().job());
    } catch (const std::exception& e) {
      out.push_back({kind, bench::seconds(Clock::now() - t0)});
      errors.push_back(std::string(kKinds[kind]) + ": " + e.what());
    }
  }
}

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

// SQLite's own check, and every job where the clients left it.
std::string check_database(const std::string& db_path, int history, const std::vector<int64_t>& submitted,
                           const std::vector<int64_t>& cancelled) {
  sqlite3* db = nullptr;
  EMBER_CHECK(sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK, "cannot open ",
              db_path);
  std::string integrity;
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, nullptr);
  while (sqlite3_step(st) == SQLITE_ROW) integrity += reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  std::map<int64_t, proto::JobInfo> jobs;
  sqlite3_prepare_v2(db, "SELECT id, info FROM jobs", -1, &st, nullptr);
  while (sqlite3_step(st) == SQLITE_ROW) {
    proto::JobInfo info;
    info.ParseFromArray(sqlite3_column_blob(st, 1), sqlite3_column_bytes(st, 1));
    jobs[sqlite3_column_int64(st, 0)] = info;
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  std::string problems;
  if (integrity != "ok") problems += "integrity_check: " + integrity + "; ";
  if (jobs.size() != static_cast<size_t>(history) + submitted.size())
    problems +=
        "expected " + std::to_string(history + submitted.size()) + " jobs, found " + std::to_string(jobs.size()) + "; ";
  for (int64_t id : submitted)
    if (!jobs.count(id)) problems += "job " + std::to_string(id) + " is missing; ";
  for (int64_t id : cancelled)
    if (jobs.count(id) && jobs[id].state() != proto::CANCELLED)
      problems += "job " + std::to_string(id) + " was cancelled but is recorded as state " +
                  std::to_string(jobs[id].state()) + "; ";
  return problems.empty() ? "ok (integrity_check ok, " + std::to_string(jobs.size()) + " jobs, all accounted for)"
                          : problems;
}

// Cancels every submitted job not cancelled yet (not measured; all_cancelled grows by those the
// daemon took), waits up to a minute for the daemon to have no job left, then stops it.
void cancel_the_rest_and_stop(const std::string& state, pid_t daemon, const std::vector<int64_t>& all_submitted,
                              std::vector<int64_t>& all_cancelled) {
  for (int64_t id : all_submitted)
    if (std::find(all_cancelled.begin(), all_cancelled.end(), id) == all_cancelled.end()) {
      proto::Request q;
      q.mutable_cancel()->set_job(id);
      if (sched::call_daemon(state, q, 10).ok()) all_cancelled.push_back(id);
    }
  const auto stop_deadline = Clock::now() + std::chrono::seconds(60);
  for (;;) {  // the cancelled jobs' SIGTERM takes effect; then the daemon may go
    proto::Request q;
    q.mutable_status();
    if (sched::call_daemon(state, q, 10).jobs_size() == 0 || Clock::now() > stop_deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ::kill(daemon, SIGTERM);
  ::waitpid(daemon, nullptr, 0);
}

int run(const Options& o) {
  bench::print_cpu_line();
  std::printf(
      "daemon load: %d clients, %d requests (30%% submit, 40%% queue, 20%% logs, 10%% cancel), %d jobs "
      "of history, 4 CPU devices\n",
      o.clients, o.requests, o.history);
  char tmpl[] = "/tmp/ember-load-XXXXXX";
  EMBER_CHECK(::mkdtemp(tmpl), "mkdtemp failed");
  const std::string state = tmpl;
  const auto h0 = Clock::now();
  write_history(state, o.history);
  std::printf("history written in %.1f s\n", bench::seconds(Clock::now() - h0));
  const pid_t daemon = start_daemon(EMBER_EXE, state);

  std::vector<std::vector<Sample>> samples(static_cast<size_t>(o.clients));
  std::vector<std::vector<int64_t>> cancelled(samples.size()), submitted(samples.size());
  std::vector<std::vector<std::string>> errors(samples.size());
  std::vector<std::thread> threads;
  const auto t0 = Clock::now();
  for (int c = 0; c < o.clients; ++c) {
    const int count = o.requests / o.clients + (c < o.requests % o.clients ? 1 : 0);
    const auto i = static_cast<size_t>(c);
    threads.emplace_back(client, state, c, count, std::ref(samples[i]), std::ref(cancelled[i]), std::ref(submitted[i]),
                         std::ref(errors[i]));
  }
  for (std::thread& t : threads) t.join();
  const double wall = bench::seconds(Clock::now() - t0);

  // Everything left running or queued is cancelled (not measured), then the daemon stops.
  std::vector<int64_t> all_submitted, all_cancelled;
  for (size_t c = 0; c < samples.size(); ++c) {
    all_submitted.insert(all_submitted.end(), submitted[c].begin(), submitted[c].end());
    all_cancelled.insert(all_cancelled.end(), cancelled[c].begin(), cancelled[c].end());
  }
  cancel_the_rest_and_stop(state, daemon, all_submitted, all_cancelled);

  std::vector<double> by_kind[4], all;
  size_t nerr = 0;
  for (size_t c = 0; c < samples.size(); ++c) {
    for (const Sample& s : samples[c]) {
      by_kind[s.kind].push_back(s.seconds);
      all.push_back(s.seconds);
    }
    nerr += errors[c].size();
  }
  bench::Table t;
  t.header = {"request", "count", "median ms", "p99 ms", "max ms"};
  auto row = [&](const std::string& name, const std::vector<double>& v) {
    t.rows.push_back({name, std::to_string(v.size()), bench::fmt(quantile(v, 0.5) * 1e3),
                      bench::fmt(quantile(v, 0.99) * 1e3),
                      bench::fmt(v.empty() ? 0 : *std::max_element(v.begin(), v.end()) * 1e3)});
  };
  for (int k = 0; k < 4; ++k) row(kKinds[k], by_kind[k]);
  row("all", all);
  t.print();
  std::printf("%zu requests in %.2f s (%.0f/s), %zu error(s); over 1 s: %zu\n", all.size(), wall,
              static_cast<double>(all.size()) / wall, nerr,
              static_cast<size_t>(std::count_if(all.begin(), all.end(), [](double s) { return s > 1.0; })));
  for (size_t c = 0, shown = 0; c < errors.size() && shown < 5; ++c)
    for (const std::string& e : errors[c])
      if (shown++ < 5) std::printf("  error: %s\n", e.c_str());
  std::printf("database after the run: %s\n",
              check_database(state + "/state.db", o.history, all_submitted, all_cancelled).c_str());
  std::error_code ec;
  fs::remove_all(state, ec);
  return nerr == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (bench::help_requested(argc, argv,
                            "usage: %s [--history N] [--clients C] [--requests R]\n"
                            "  the scheduler daemon under concurrent clients (defaults: 10000 jobs of history,\n"
                            "  50 clients, 2000 requests)\n"))
    return 0;
  return bench::guarded_main("sched_load", [&] {
    Options o;
    for (int i = 1; i + 1 < argc; i += 2) {
      const std::string k = argv[i];
      const int v = std::atoi(argv[i + 1]);
      EMBER_CHECK(v > 0, k, ": expected a whole number > 0, got '", argv[i + 1], "'");
      if (k == "--history")
        o.history = v;
      else if (k == "--clients")
        o.clients = v;
      else if (k == "--requests")
        o.requests = v;
      else
        EMBER_FAIL("unknown flag ", k, " (expected --history, --clients or --requests)");
    }
    EMBER_CHECK(argc % 2 == 1, "flags take a value each: --history N --clients C --requests R");
    return run(o);
  });
}
