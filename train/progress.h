// Training progress: a one-line bar redrawn in place on a terminal (step/total, loss, accuracy,
// samples/s, the epoch's ETA and the whole run's), or plain lines at a steady rate when stdout is a file or a pipe; and
// a metrics log that appends one CSV row per record so runs can be plotted afterwards.
#pragma once

#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "interop/summary_writer.h"

namespace ember::train {

class ProgressBar {
 public:
  // `epochs_after`: the whole epochs still to run after this one, for the run's ETA (this
  // epoch's pace times what is left of the run), shown beside the epoch's when there are any.
  ProgressBar(std::string label, long long total, long long epochs_after = 0);

  // `samples` is the number processed so far (for samples/s); metrics print in the given order.
  void update(long long step, long long samples, const std::vector<std::pair<std::string, double>>& metrics);

  double elapsed() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }

 private:
  std::string label_;
  long long total_;
  long long epochs_after_;
  bool tty_;
  std::chrono::steady_clock::time_point start_, last_print_;
};

// What an elastic job adds for the daemon's goodput policy (docs/scheduler/elastic.md): its
// global batch, optimizer steps per second (the job's throughput is their product), its gradient
// noise scale and the seconds per step it waited for the gradients after its backward (on two
// ranks or more). Printed as batch=, steps_per_s=, noise_scale= and sync_s= in an elastic job.
struct JobElasticReport {
  long long batch = 0;
  double steps_per_s = 0;
  std::optional<double> noise_scale;
  std::optional<double> sync_s;
};

// Under the scheduler daemon (which sets EMBER_JOB_ID), the line it reads a job's progress from,
// in the job's log: "ember-progress epoch=E epochs=N step=S loss=L samples_per_s=R", at most every
// 5 s and at the end of every epoch (docs/scheduler/operators.md, Progress). Elsewhere, nothing.
class JobProgressLine {
 public:
  JobProgressLine();
  // `epoch` from 1; the loss is the metric named "loss", else the first whose name holds "loss".
  void report(long long epoch, long long epochs, long long step,
              const std::vector<std::pair<std::string, double>>& metrics, double samples_per_s, bool epoch_end,
              const JobElasticReport& elastic = {});

 private:
  bool on_;
  bool elastic_;  // the daemon runs it as an elastic job (EMBER_ELASTIC_RANKS)
  bool printed_ = false;
  std::chrono::steady_clock::time_point last_;
};

// Appends rows to a CSV file; the header is written when the file is new or empty (or is a pipe
// or a device). Every row is flushed, and a write that fails (a full disk, /dev/full) is an
// ember::Error naming the file: a log that silently records nothing is worse than a stopped run.
class MetricsLog {
 public:
  // Decides, from a row's values by column name, whether an existing row stays (see below).
  using Keep = std::function<bool(const std::map<std::string, double>&)>;
  // What becomes of an existing log (a regular file with content). A new run's rows once went
  // under an old run's, or under the text of a file that was no log at all, without a word.
  struct Existing {
    enum Kind {
      kRefuse,   // it holds another run's rows: an ember::Error
      kRestart,  // the run starts it anew (--overwrite, or the checkpoint folder's own log)
      kKeep,     // a resumed run keeps the rows for which keep(row) is true and appends
    } kind = kRefuse;
    Keep keep;
  };

  // An existing log must be a metrics log: with kKeep its header must be exactly this one
  // (rows appended under other columns would be misread), else at least a header whose first
  // column is "epoch" (--overwrite must not replace a file that is no log).
  // Rewrites are atomic.
  MetricsLog(const std::string& path, std::vector<std::string> columns, const Existing& existing);
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;
  ~MetricsLog();

  // Every row also goes to `tensorboard` (when not null), one scalar per column at the row's step
  // (its epoch when it has none), tagged with the column's name.
  void mirror_to(SummaryWriter* tensorboard) { tensorboard_ = tensorboard; }

  void row(const std::map<std::string, double>& values);

 private:
  void put(const std::string& text);
  // An existing log's content: refused, emptied or cut to the rows it keeps (see the constructor).
  void take_over(const Existing& existing, const std::string& header);
  // Rewrites the file with its header and the complete rows that `keep` keeps (a last line
  // without its newline, from a run killed while writing it, goes too).
  void keep_rows(const std::string& all, const Keep& keep);
  void mirror(const std::map<std::string, double>& values);

  std::string path_;
  std::vector<std::string> columns_;
  std::FILE* out_ = nullptr;
  SummaryWriter* tensorboard_ = nullptr;
};

}  // namespace ember::train
