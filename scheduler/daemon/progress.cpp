#include "scheduler/daemon/progress.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <cmath>
#include <string>

namespace ember::sched {

namespace {

bool to_double(std::string_view s, double& v) {
  // std::from_chars for double is in GCC 11+ and clang 14's libstdc++ alike.
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && p == s.data() + s.size() && std::isfinite(v);
}

bool to_count(std::string_view s, int64_t& v) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && p == s.data() + s.size() && v >= 0;
}

// One key=value of a report into `p`; false for an unknown key or a bad value.
bool set_field(std::string_view key, std::string_view value, proto::JobProgress& p, bool& epoch, bool& step) {
  int64_t n = 0;
  double d = 0;
  if (key == "epoch" || key == "epochs" || key == "step") {
    if (!to_count(value, n)) return false;
    if (key == "epoch") p.set_epoch(n);
    if (key == "epochs") p.set_epochs(n);
    if (key == "step") p.set_step(n);
    epoch = epoch || key == "epoch";
    step = step || key == "step";
    return true;
  }
  if (key == "batch") {
    if (!to_count(value, n) || n < 1) return false;
    p.set_batch(n);
    return true;
  }
  if (key != "loss" && key != "samples_per_s" && key != "steps_per_s" && key != "noise_scale" && key != "sync_s")
    return false;
  if (!to_double(value, d)) return false;
  if (key == "loss") p.set_loss(d);
  if (key == "samples_per_s") p.set_samples_per_s(d);
  if (key == "steps_per_s") p.set_steps_per_s(d);
  if (key == "noise_scale") p.set_noise_scale(d);
  if (key == "sync_s") p.set_sync_s(d);
  return key == "loss" || d >= 0;
}

}  // namespace

std::optional<proto::JobProgress> parse_progress_line(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  // Rank 0 of a job under `ember launch` speaks for it, its lines prefixed with its rank.
  if (line.starts_with(kRankZeroPrefix)) line.remove_prefix(kRankZeroPrefix.size());
  if (!line.starts_with(kProgressPrefix)) return std::nullopt;
  line.remove_prefix(kProgressPrefix.size());
  proto::JobProgress p;
  bool epoch = false, step = false;
  while (!line.empty()) {
    const size_t sp = line.find(' ');
    const std::string_view field = line.substr(0, sp);
    line = sp == std::string_view::npos ? std::string_view() : line.substr(sp + 1);
    if (field.empty()) continue;
    const size_t eq = field.find('=');
    if (eq == std::string_view::npos || !set_field(field.substr(0, eq), field.substr(eq + 1), p, epoch, step))
      return std::nullopt;
  }
  if (!epoch || !step) return std::nullopt;
  return p;
}

std::optional<proto::JobProgress> latest_progress(std::string_view text) {
  if (text.size() > kProgressTailBytes) text = text.substr(text.size() - kProgressTailBytes);
  // Backwards, line by line: the last complete report wins (a half-written last line is skipped).
  size_t end = text.size();
  if (end > 0 && text[end - 1] != '\n') {
    const size_t last_nl = text.rfind('\n');
    end = last_nl == std::string_view::npos ? 0 : last_nl;
  }
  while (end > 0) {
    const size_t nl = text.rfind('\n', end - 1);
    const size_t start = nl == std::string_view::npos ? 0 : nl + 1;
    if (auto p = parse_progress_line(text.substr(start, end - start))) return p;
    if (nl == std::string_view::npos) break;
    end = nl;
  }
  return std::nullopt;
}

std::optional<proto::JobProgress> ProgressReader::read(const std::string& log_path) {
  if (log_path.empty()) return std::nullopt;
  const int fd = ::open(log_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return std::nullopt;
  }
  const long long mtime = static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
  Entry& e = cache_[log_path];
  if (e.size == st.st_size && e.mtime_ns == mtime) {
    ::close(fd);
    return e.progress;
  }
  const off_t from = st.st_size > static_cast<off_t>(kProgressTailBytes) ? st.st_size - kProgressTailBytes : 0;
  std::string buf(static_cast<size_t>(st.st_size - from), '\0');
  const ssize_t n = ::pread(fd, buf.data(), buf.size(), from);
  ::close(fd);
  buf.resize(n > 0 ? static_cast<size_t>(n) : 0);
  // A bounded cache: the logs of a long-lived daemon's history are not all kept.
  if (cache_.size() > 4096) cache_.clear();
  Entry& fresh = cache_[log_path];
  fresh = {st.st_size, mtime, latest_progress(buf)};
  return fresh.progress;
}

}  // namespace ember::sched
