#include "scheduler/daemon/store.h"

#include <sqlite3.h>

#include <ctime>

#include "core/error.h"

namespace ember::sched {
namespace {

double now_s() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// A prepared statement that finalizes itself.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql, const std::string& path) {
    EMBER_CHECK(sqlite3_prepare_v2(db, sql, -1, &st_, nullptr) == SQLITE_OK, "scheduler state ", path, ": ",
                sqlite3_errmsg(db));
  }
  ~Stmt() { sqlite3_finalize(st_); }
  sqlite3_stmt* get() { return st_; }
  void blob(int i, const std::string& b) {
    sqlite3_bind_blob(st_, i, b.data(), static_cast<int>(b.size()), SQLITE_TRANSIENT);
  }
  void text(int i, const std::string& t) { sqlite3_bind_text(st_, i, t.c_str(), -1, SQLITE_TRANSIENT); }
  void i64(int i, int64_t v) { sqlite3_bind_int64(st_, i, v); }
  void real(int i, double v) { sqlite3_bind_double(st_, i, v); }
  int step() { return sqlite3_step(st_); }

 private:
  sqlite3_stmt* st_ = nullptr;
};

}  // namespace

const char* state_name(proto::JobState s) {
  switch (s) {
    case proto::QUEUED:
      return "queued";
    case proto::RUNNING:
      return "running";
    case proto::STOPPING:
      return "stopping";
    case proto::DONE:
      return "done";
    case proto::FAILED:
      return "failed";
    case proto::CANCELLED:
      return "cancelled";
    default:
      return "unknown";
  }
}

Store::Store(const std::string& path) : path_(path) {
  EMBER_CHECK(sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) == SQLITE_OK,
              "scheduler state ", path, ": cannot open the database: ", db_ ? sqlite3_errmsg(db_) : "out of memory");
  sqlite3_busy_timeout(db_, 5000);
  exec("PRAGMA journal_mode=WAL");
  exec("PRAGMA synchronous=FULL");
  // The record is a serialized JobInfo plus the columns re-adoption and the policies need; one
  // blob keeps the schema stable as JobInfo grows.
  exec(
      "CREATE TABLE IF NOT EXISTS jobs (id INTEGER PRIMARY KEY, info BLOB NOT NULL, executed REAL NOT NULL,"
      " queued_since REAL NOT NULL, pid_start INTEGER NOT NULL, stop INTEGER NOT NULL, stop_time REAL NOT NULL,"
      " killed INTEGER NOT NULL)");
  exec(
      "CREATE TABLE IF NOT EXISTS events (seq INTEGER PRIMARY KEY, job INTEGER NOT NULL, time REAL NOT NULL,"
      " state TEXT NOT NULL, what TEXT NOT NULL)");
}

Store::~Store() {
  sqlite3_close(db_);
}

void Store::exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    EMBER_FAIL("scheduler state ", path_, ": ", msg, " (in: ", sql, ")");
  }
}

void Store::begin() {
  if (!batch_) exec("BEGIN IMMEDIATE");
}

void Store::commit() {
  if (!batch_) exec("COMMIT");
}

void Store::rollback() {
  // Inside a batch a failed statement leaves the batch's other changes standing: they belong to
  // requests that succeeded.
  if (!batch_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
}

void Store::begin_batch() {
  if (batch_) return;
  exec("BEGIN IMMEDIATE");
  batch_ = true;
}

void Store::end_batch() {
  if (!batch_) return;
  batch_ = false;
  exec("COMMIT");
}

void Store::flush() {
  if (!batch_) return;
  end_batch();
  begin_batch();
}

void Store::insert(JobRecord& r, const std::string& what) {
  begin();
  try {
    Stmt s(db_,
           "INSERT INTO jobs (info, executed, queued_since, pid_start, stop, stop_time, killed)"
           " VALUES (x'', 0, 0, 0, 0, 0, 0)",
           path_);
    EMBER_CHECK(s.step() == SQLITE_DONE, "scheduler state ", path_, ": ", sqlite3_errmsg(db_));
    r.info.set_id(sqlite3_last_insert_rowid(db_));
    r.job.id = r.info.id();
    commit();
  } catch (...) {
    rollback();
    throw;
  }
  save(r, what);
}

void Store::save(const JobRecord& r, const std::string& what) {
  begin();
  try {
    std::string blob;
    EMBER_CHECK(r.info.SerializeToString(&blob), "scheduler state: cannot serialize job ", r.info.id());
    Stmt s(db_,
           "UPDATE jobs SET info=?1, executed=?2, queued_since=?3, pid_start=?4, stop=?5, stop_time=?6,"
           " killed=?7 WHERE id=?8",
           path_);
    s.blob(1, blob);
    s.real(2, r.job.executed);
    s.real(3, r.job.queued_since);
    s.i64(4, static_cast<int64_t>(r.pid_start));
    s.i64(5, static_cast<int>(r.stop));
    s.real(6, r.stop_time);
    s.i64(7, r.killed ? 1 : 0);
    s.i64(8, r.info.id());
    EMBER_CHECK(s.step() == SQLITE_DONE, "scheduler state ", path_, ": ", sqlite3_errmsg(db_));
    if (!what.empty()) {
      Stmt e(db_, "INSERT INTO events (job, time, state, what) VALUES (?1, ?2, ?3, ?4)", path_);
      e.i64(1, r.info.id());
      e.real(2, now_s());
      e.text(3, state_name(r.info.state()));
      e.text(4, what);
      EMBER_CHECK(e.step() == SQLITE_DONE, "scheduler state ", path_, ": ", sqlite3_errmsg(db_));
    }
    commit();
  } catch (...) {
    rollback();
    throw;
  }
}

std::vector<JobRecord> Store::load_all() {
  std::vector<JobRecord> out;
  Stmt s(db_, "SELECT id, info, executed, queued_since, pid_start, stop, stop_time, killed FROM jobs ORDER BY id",
         path_);
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) {
    sqlite3_stmt* st = s.get();
    JobRecord r;
    const void* b = sqlite3_column_blob(st, 1);
    int n = sqlite3_column_bytes(st, 1);
    int64_t id = sqlite3_column_int64(st, 0);
    EMBER_CHECK(r.info.ParseFromArray(b, n), "scheduler state ", path_, ": job ", id, "'s record does not parse");
    if (r.info.id() != id) continue;  // inserted, but the daemon died before its first save
    r.job.executed = sqlite3_column_double(st, 2);
    r.job.queued_since = sqlite3_column_double(st, 3);
    r.pid_start = static_cast<uint64_t>(sqlite3_column_int64(st, 4));
    r.stop = static_cast<StopKind>(sqlite3_column_int(st, 5));
    r.stop_time = sqlite3_column_double(st, 6);
    r.killed = sqlite3_column_int(st, 7) != 0;
    out.push_back(std::move(r));
  }
  EMBER_CHECK(rc == SQLITE_DONE, "scheduler state ", path_, ": ", sqlite3_errmsg(db_));
  return out;
}

std::vector<std::string> Store::events(int64_t job) {
  std::vector<std::string> out;
  Stmt s(db_, "SELECT time, state, what FROM events WHERE job=?1 ORDER BY seq", path_);
  s.i64(1, job);
  while (s.step() == SQLITE_ROW) {
    sqlite3_stmt* st = s.get();
    out.push_back(detail::concat(std::fixed, sqlite3_column_double(st, 0), " ",
                                 reinterpret_cast<const char*>(sqlite3_column_text(st, 1)), " ",
                                 reinterpret_cast<const char*>(sqlite3_column_text(st, 2))));
  }
  return out;
}

}  // namespace ember::sched
