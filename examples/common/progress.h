// Training progress: a one-line bar redrawn in place on a terminal (step/total, loss, accuracy,
// samples/s, the epoch's ETA and the whole run's), or plain lines at a steady rate when stdout is a file or a pipe; and
// a metrics log that appends one CSV row per record so runs can be plotted afterwards.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/input_file.h"
#include "interop/summary_writer.h"

namespace ember::examples {

class ProgressBar {
 public:
  // `epochs_after`: the whole epochs still to run after this one, for the run's ETA (this
  // epoch's pace times what is left of the run), shown beside the epoch's when there are any.
  ProgressBar(std::string label, long long total, long long epochs_after = 0)
      : label_(std::move(label)), total_(total), epochs_after_(epochs_after), tty_(::isatty(::fileno(stdout)) != 0) {
    start_ = last_print_ = std::chrono::steady_clock::now();
  }

  // `samples` is the number processed so far (for samples/s); metrics print in the given order.
  void update(long long step, long long samples, const std::vector<std::pair<std::string, double>>& metrics) {
    auto now = std::chrono::steady_clock::now();
    double elapsed = std::chrono::duration<double>(now - start_).count();
    double since = std::chrono::duration<double>(now - last_print_).count();
    const bool last = step >= total_;
    if (!last && since < (tty_ ? 0.1 : 5.0)) return;
    last_print_ = now;
    double rate = elapsed > 0 ? static_cast<double>(samples) / elapsed : 0.0;
    double eta = step > 0 ? elapsed * static_cast<double>(total_ - step) / static_cast<double>(step) : 0.0;
    const double per_epoch = step > 0 ? elapsed * static_cast<double>(total_) / static_cast<double>(step) : 0.0;
    const std::string run_eta =
        epochs_after_ > 0 ? ", run " + clock(eta + per_epoch * static_cast<double>(epochs_after_)) : "";
    std::string m;
    char buf[64];
    for (const auto& [k, v] : metrics) {
      std::snprintf(buf, sizeof buf, " %s %.4f", k.c_str(), v);
      m += buf;
    }
    if (tty_) {
      const int width = 24;
      int filled = total_ > 0 ? static_cast<int>(width * step / total_) : width;
      std::string bar =
          std::string(static_cast<size_t>(filled), '#') + std::string(static_cast<size_t>(width - filled), '.');
      std::printf("\r%s [%s] %lld/%lld%s | %.0f samples/s | ETA %s%s   ", label_.c_str(), bar.c_str(), step, total_,
                  m.c_str(), rate, clock(eta).c_str(), run_eta.c_str());
      if (last) std::printf("\n");
    } else {
      std::printf("%s %lld/%lld%s | %.0f samples/s | ETA %s%s\n", label_.c_str(), step, total_, m.c_str(), rate,
                  clock(eta).c_str(), run_eta.c_str());
    }
    std::fflush(stdout);
  }

  double elapsed() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }

 private:
  static std::string clock(double s) {
    char buf[32];
    long long t = static_cast<long long>(s + 0.5);
    std::snprintf(buf, sizeof buf, "%lld:%02lld", t / 60, t % 60);
    return buf;
  }
  std::string label_;
  long long total_;
  long long epochs_after_;
  bool tty_;
  std::chrono::steady_clock::time_point start_, last_print_;
};

// Appends rows to a CSV file; the header is written when the file is new or empty (or is a pipe
// or a device). Every row is flushed, and a write that fails (a full disk, /dev/full) is an
// ember::Error naming the file: a log that silently records nothing is worse than a stopped run.
// Under the scheduler daemon (which sets EMBER_JOB_ID), the line it reads a job's progress from,
// in the job's log: "ember-progress epoch=E epochs=N step=S loss=L samples_per_s=R", at most every
// 5 s and at the end of every epoch (docs/scheduler/operators.md, Progress). Elsewhere, nothing.
class JobProgressLine {
 public:
  JobProgressLine() : on_(std::getenv("EMBER_JOB_ID") != nullptr) {}

  // `epoch` from 1; the loss is the metric named "loss", else the first whose name holds "loss".
  void report(int64_t epoch, int64_t epochs, int64_t step, const std::vector<std::pair<std::string, double>>& metrics,
              double samples_per_s, bool epoch_end) {
    if (!on_) return;
    const auto now = std::chrono::steady_clock::now();
    if (!epoch_end && printed_ && now - last_ < std::chrono::seconds(5)) return;
    printed_ = true;
    last_ = now;
    const std::pair<std::string, double>* loss = nullptr;
    for (const auto& m : metrics)
      if (m.first == "loss" || (!loss && m.first.find("loss") != std::string::npos)) loss = &m;
    std::printf("ember-progress epoch=%lld epochs=%lld step=%lld", (long long)epoch, (long long)epochs,
                (long long)step);
    if (loss && std::isfinite(loss->second)) std::printf(" loss=%.6g", loss->second);
    if (std::isfinite(samples_per_s)) std::printf(" samples_per_s=%.1f", samples_per_s);
    std::printf("\n");
    std::fflush(stdout);
  }

 private:
  bool on_;
  bool printed_ = false;
  std::chrono::steady_clock::time_point last_;
};

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
  MetricsLog(const std::string& path, std::vector<std::string> columns, const Existing& existing)
      : path_(path), columns_(std::move(columns)) {
    if (path.empty()) return;
    namespace fs = std::filesystem;
    std::error_code ec;
    std::string header;
    for (size_t i = 0; i < columns_.size(); ++i) header += (i ? "," : "") + columns_[i];
    const bool regular = fs::is_regular_file(path, ec);
    if (regular && fs::file_size(path, ec) > 0) take_over(existing, header);
    const bool fresh = !regular || fs::file_size(path, ec) == 0;
    out_ = std::fopen(path.c_str(), "a");
    // A log that cannot be written is an error at start, not a run that silently records nothing.
    if (!out_) throw Error("--log: cannot write '" + path + "' (" + std::strerror(errno) + ")");
    if (fresh) put(header + "\n");
  }
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;
  ~MetricsLog() {
    if (out_) std::fclose(out_);
  }

  // Every row also goes to `tensorboard` (when not null), one scalar per column at the row's step
  // (its epoch when it has none), tagged with the column's name.
  void mirror_to(SummaryWriter* tensorboard) { tensorboard_ = tensorboard; }

  void row(const std::map<std::string, double>& values) {
    if (tensorboard_) mirror(values);
    if (!out_) return;
    std::string line;
    char buf[32];
    for (size_t i = 0; i < columns_.size(); ++i) {
      auto it = values.find(columns_[i]);
      line += i ? "," : "";
      if (it != values.end()) {
        std::snprintf(buf, sizeof buf, "%g", it->second);
        line += buf;
      }
    }
    put(line + "\n");
  }

 private:
  void put(const std::string& text) {
    errno = 0;
    if (std::fwrite(text.data(), 1, text.size(), out_) != text.size() || std::fflush(out_) != 0)
      throw Error("--log: writing '" + path_ + "' failed (" + (errno ? std::strerror(errno) : "write error") + ")");
  }
  // An existing log's content: refused, emptied or cut to the rows it keeps (see the constructor).
  void take_over(const Existing& existing, const std::string& header) {
    const std::string all = read_input_file(path_, "a metrics log (CSV)");
    const size_t nl = all.find('\n');
    const std::string first = all.substr(0, nl);
    const bool is_log = first.rfind("epoch,", 0) == 0;  // every program's first column
    if (!is_log || (existing.kind == Existing::kKeep && first != header))
      throw Error("--log '" + path_ + "' is not a metrics log with these columns: its first line is '" +
                  first.substr(0, 80) + "' (expected '" + header + "'); name another file");
    const bool rows = nl != std::string::npos && nl + 1 < all.size();
    if (existing.kind == Existing::kRefuse && rows)
      throw Error("--log '" + path_ +
                  "' already holds another run's rows: pass --overwrite to start it afresh, --resume to continue "
                  "that run, or name another file");
    if (existing.kind != Existing::kKeep) return write_file_atomic(path_, "");  // a header alone is no run's
    keep_rows(all, existing.keep);
  }

  // Rewrites the file with its header and the complete rows that `keep` keeps (a last line
  // without its newline, from a run killed while writing it, goes too).
  void keep_rows(const std::string& all, const Keep& keep) {
    std::vector<std::string> names;
    std::string kept;
    size_t at = 0;
    for (bool header = true; at < all.size(); header = false) {
      const size_t nl = all.find('\n', at);
      if (nl == std::string::npos) break;
      const std::string line = all.substr(at, nl - at);
      at = nl + 1;
      std::vector<std::string> fields;
      std::stringstream ss(line);
      for (std::string f; std::getline(ss, f, ',');) fields.push_back(f);
      if (header) {
        names = fields;
        kept += line + "\n";
        continue;
      }
      std::map<std::string, double> values;
      for (size_t i = 0; i < fields.size() && i < names.size(); ++i) {
        char* end = nullptr;
        const double v = std::strtod(fields[i].c_str(), &end);
        if (!fields[i].empty() && end && *end == '\0') values[names[i]] = v;
      }
      if (keep(values)) kept += line + "\n";
    }
    if (kept == all) return;
    write_file_atomic(path_, kept);
  }

  void mirror(const std::map<std::string, double>& values) {
    const auto step = values.count("step") ? values.at("step") : values.count("epoch") ? values.at("epoch") : 0.0;
    for (const auto& [name, v] : values)
      if (name != "step" && name != "epoch") tensorboard_->add_scalar(name, v, static_cast<int64_t>(step));
  }

  std::string path_;
  std::vector<std::string> columns_;
  std::FILE* out_ = nullptr;
  SummaryWriter* tensorboard_ = nullptr;
};

}  // namespace ember::examples
