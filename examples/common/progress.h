// Training progress: a one-line bar redrawn in place on a terminal (step/total, loss, accuracy,
// samples/s, ETA), or plain lines at a steady rate when stdout is a file or a pipe; and a metrics
// log that appends one CSV row per record so runs can be plotted afterwards.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace ember::examples {

class ProgressBar {
 public:
  ProgressBar(std::string label, long long total)
      : label_(std::move(label)), total_(total), tty_(::isatty(::fileno(stdout)) != 0) {
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
      std::printf("\r%s [%s] %lld/%lld%s | %.0f samples/s | ETA %s   ", label_.c_str(), bar.c_str(), step, total_,
                  m.c_str(), rate, clock(eta).c_str());
      if (last) std::printf("\n");
    } else {
      std::printf("%s %lld/%lld%s | %.0f samples/s | ETA %s\n", label_.c_str(), step, total_, m.c_str(), rate,
                  clock(eta).c_str());
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
  bool tty_;
  std::chrono::steady_clock::time_point start_, last_print_;
};

// Appends rows to a CSV file; the header is written when the file is new or empty.
class MetricsLog {
 public:
  MetricsLog(const std::string& path, std::vector<std::string> columns) : columns_(std::move(columns)) {
    if (path.empty()) return;
    std::ifstream probe(path);
    bool fresh = !probe.good() || probe.peek() == std::ifstream::traits_type::eof();
    out_.open(path, std::ios::app);
    // A log that cannot be written is an error at start, not a run that silently records nothing.
    if (!out_) throw std::runtime_error("--log: cannot write '" + path + "' (" + std::strerror(errno) + ")");
    if (fresh) {
      for (size_t i = 0; i < columns_.size(); ++i) out_ << (i ? "," : "") << columns_[i];
      out_ << "\n";
    }
  }
  void row(const std::map<std::string, double>& values) {
    if (!out_) return;
    for (size_t i = 0; i < columns_.size(); ++i) {
      auto it = values.find(columns_[i]);
      out_ << (i ? "," : "");
      if (it != values.end()) out_ << it->second;
    }
    out_ << "\n";
    out_.flush();
  }

 private:
  std::vector<std::string> columns_;
  std::ofstream out_;
};

}  // namespace ember::examples
