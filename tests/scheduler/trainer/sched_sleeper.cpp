// A job that only takes time, for the scheduler's fidelity test (daemon against simulator): it
// does --seconds S of work in all, over however many starts, and keeps its progress in
// --progress FILE. SIGTERM makes it save its progress at once and exit 75 ("preempted", as Ember's
// training programs do); the next start resumes from the file. Time is the only work, so the
// simulator's model of a job (a duration, nothing lost at a checkpointed stop) is exact for it, and
// what the two disagree on is what the daemon adds: launches, signals, decisions on a real clock.
#include <signal.h>
#include <time.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace {

// Temporary and rename, so a resumed start never reads half a number. Not through Ember's writer:
// this program links nothing of Ember's, so that its start costs what a plain program's does
// (loading the libraries took 8 ms a start, which the simulator does not model).
void save_progress(const std::string& path, double seconds) {
  const std::string tmp = path + ".tmp";
  if (std::FILE* f = std::fopen(tmp.c_str(), "w")) {
    std::fprintf(f, "%.6f\n", seconds);
    if (std::fclose(f) == 0) std::rename(tmp.c_str(), path.c_str());
  }
}

double monotonic_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

int usage(const char* why) {
  std::fprintf(stderr, "sched_sleeper: %s\nusage: sched_sleeper --seconds S --progress FILE\n", why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  double total = -1;
  std::string progress;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--seconds") {
      char* end = nullptr;
      total = std::strtod(argv[i + 1], &end);
      if (end == argv[i + 1] || *end != '\0' || !std::isfinite(total) || total < 0)
        return usage("--seconds: expected a number of seconds >= 0");
    } else if (flag == "--progress") {
      progress = argv[i + 1];
    } else {
      return usage(("unknown flag " + flag).c_str());
    }
  }
  if (total < 0 || progress.empty() || argc % 2 == 0) return usage("--seconds and --progress are required");
  double done = 0;
  if (std::ifstream in(progress); in) in >> done;
  // SIGTERM stays blocked and is taken by sigtimedwait: a stop that arrives at any moment ends the
  // wait at once, with no window between checking for it and going to sleep.
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  sigprocmask(SIG_BLOCK, &term, nullptr);
  std::printf("sched_sleeper: %.3f of %.3f s done\n", done, total);
  std::fflush(stdout);
  const double start = monotonic_seconds();
  for (;;) {
    const double now_done = done + (monotonic_seconds() - start);
    const double left = total - now_done;
    if (left <= 0) {
      std::printf("sched_sleeper: finished\n");
      return 0;
    }
    timespec wait{};
    wait.tv_sec = static_cast<time_t>(left);
    wait.tv_nsec = static_cast<long>((left - static_cast<double>(wait.tv_sec)) * 1e9);
    if (sigtimedwait(&term, nullptr, &wait) == SIGTERM) {
      const double saved = done + (monotonic_seconds() - start);
      save_progress(progress, saved);
      std::printf("sched_sleeper: preempted at %.3f s\n", saved);
      return 75;
    }
    // EAGAIN (the time is up) or EINTR: look at the clock again.
  }
}
