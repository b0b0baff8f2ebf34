#include "train/progress.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/input_file.h"

namespace ember::train {
namespace {

std::string clock(double s) {
  char buf[32];
  long long t = static_cast<long long>(s + 0.5);
  std::snprintf(buf, sizeof buf, "%lld:%02lld", t / 60, t % 60);
  return buf;
}

}  // namespace

JobProgressLine::JobProgressLine()
    : on_(std::getenv("EMBER_JOB_ID") != nullptr), elastic_(std::getenv("EMBER_ELASTIC_RANKS") != nullptr) {}

void JobProgressLine::report(long long epoch, long long epochs, long long step,
                             const std::vector<std::pair<std::string, double>>& metrics, double samples_per_s,
                             bool epoch_end, const JobElasticReport& elastic) {
  if (!on_) return;
  const auto now = std::chrono::steady_clock::now();
  if (!epoch_end && printed_ && now - last_ < std::chrono::seconds(5)) return;
  printed_ = true;
  last_ = now;
  const std::pair<std::string, double>* loss = nullptr;
  for (const auto& m : metrics)
    if (m.first == "loss" || (!loss && m.first.find("loss") != std::string::npos)) loss = &m;
  std::printf("ember-progress epoch=%lld epochs=%lld step=%lld", epoch, epochs, step);
  if (loss && std::isfinite(loss->second)) std::printf(" loss=%.6g", loss->second);
  if (std::isfinite(samples_per_s)) std::printf(" samples_per_s=%.1f", samples_per_s);
  if (elastic_ && elastic.batch > 0) {  // older daemons refuse a line with keys they do not know
    std::printf(" batch=%lld", elastic.batch);
    if (std::isfinite(elastic.steps_per_s) && elastic.steps_per_s > 0)
      std::printf(" steps_per_s=%.4g", elastic.steps_per_s);
    if (elastic.noise_scale && std::isfinite(*elastic.noise_scale))
      std::printf(" noise_scale=%.6g", *elastic.noise_scale);
    if (elastic.sync_s && std::isfinite(*elastic.sync_s) && *elastic.sync_s >= 0)
      std::printf(" sync_s=%.4g", *elastic.sync_s);
  }
  std::printf("\n");
  std::fflush(stdout);
}

ProgressBar::ProgressBar(std::string label, long long total, long long epochs_after)
    : label_(std::move(label)), total_(total), epochs_after_(epochs_after), tty_(::isatty(::fileno(stdout)) != 0) {
  start_ = last_print_ = std::chrono::steady_clock::now();
}

void ProgressBar::update(long long step, long long samples,
                         const std::vector<std::pair<std::string, double>>& metrics) {
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

MetricsLog::MetricsLog(const std::string& path, std::vector<std::string> columns, const Existing& existing)
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

MetricsLog::~MetricsLog() {
  if (out_) std::fclose(out_);
}

void MetricsLog::row(const std::map<std::string, double>& values) {
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

void MetricsLog::put(const std::string& text) {
  errno = 0;
  if (std::fwrite(text.data(), 1, text.size(), out_) != text.size() || std::fflush(out_) != 0)
    throw Error("--log: writing '" + path_ + "' failed (" + (errno ? std::strerror(errno) : "write error") + ")");
}

void MetricsLog::take_over(const Existing& existing, const std::string& header) {
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

void MetricsLog::keep_rows(const std::string& all, const Keep& keep) {
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

void MetricsLog::mirror(const std::map<std::string, double>& values) {
  const auto step = values.count("step") ? values.at("step") : values.count("epoch") ? values.at("epoch") : 0.0;
  for (const auto& [name, v] : values)
    if (name != "step" && name != "epoch") tensorboard_->add_scalar(name, v, static_cast<int64_t>(step));
}

}  // namespace ember::train
