// The daemon's durable memory: every job and every state transition in a SQLite database (WAL
// journal, synchronous=FULL) inside the state folder. Each transition is one transaction that
// rewrites the job's row and appends an event, so a daemon killed at any instant restarts with
// each job exactly as of its last transition: queued jobs stay queued, running ones carry the pid
// and start time of their supervisor for re-adoption.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "scheduler/daemon/record.h"

struct sqlite3;

namespace ember::sched {

class Store {
 public:
  explicit Store(const std::string& path);  // creates the schema when new
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Inserts a new job (info.id is assigned) with event `what`.
  void insert(JobRecord& r, const std::string& what);
  // Persists `r` as it is now, with event `what` (empty: no event, e.g. a pid update).
  void save(const JobRecord& r, const std::string& what);
  std::vector<JobRecord> load_all();

  // Group commit: between begin_batch() and end_batch() every insert and save joins one
  // transaction, made durable by end_batch() with one sync rather than one per transition. The
  // daemon answers the requests of a batch only after end_batch() returned, so nobody is told of a
  // change that a crash could still undo. flush() makes what is pending durable now and goes on
  // batching (before anything that must not precede its record, such as forking a job).
  // end_batch() and flush() throw ember::Error when the commit fails.
  void begin_batch();
  void end_batch();
  void flush();
  // (time, job, event) rows for one job, oldest first.
  std::vector<std::string> events(int64_t job);

 private:
  void exec(const char* sql);
  void begin();  // a transaction of its own, unless a batch is open
  void commit();
  void rollback();
  sqlite3* db_ = nullptr;
  bool batch_ = false;
  std::string path_;
};

}  // namespace ember::sched
