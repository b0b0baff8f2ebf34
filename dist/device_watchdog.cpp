#include "dist/device_watchdog.h"

#include <chrono>
#include <cstdlib>
#include <string>

#include "core/error.h"

namespace ember::dist {

DeviceWatchdog::DeviceWatchdog(Hooks hooks, double timeout_seconds, double poll_seconds)
    : hooks_(std::move(hooks)), timeout_(timeout_seconds), poll_(poll_seconds) {
  EMBER_CHECK(timeout_ > 0 && poll_ > 0, "DeviceWatchdog: the timeout and the poll interval must be positive, got ",
              timeout_, " and ", poll_, " s");
  thread_ = std::thread([this] { loop(); });
}

DeviceWatchdog::~DeviceWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

double DeviceWatchdog::timeout_from_env(double fallback) {
  const char* v = std::getenv("EMBER_NCCL_TIMEOUT_SECONDS");
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const double s = std::strtod(v, &end);
  EMBER_CHECK(end && *end == '\0' && s > 0, "EMBER_NCCL_TIMEOUT_SECONDS must be a positive number of seconds, got '", v,
              "'");
  return s;
}

void DeviceWatchdog::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  const auto poll = std::chrono::duration<double>(poll_);
  while (!cv_.wait_for(lock, poll, [this] { return stop_; })) {
    lock.unlock();
    std::string why;
    const std::optional<Pending> p = hooks_.oldest_incomplete();
    if (std::string err = hooks_.async_error(); !err.empty()) {
      why = "the communicator reported an error (" + err + ")";
    } else if (p && p->age_seconds > timeout_) {
      why = detail::concat("an operation has not completed in ", static_cast<int>(p->age_seconds), " s (timeout ",
                           timeout_, " s: a peer rank died, hangs or was killed, or is far behind)");
    }
    if (!why.empty()) {
      if (p) why += "\n  this rank was waiting on " + p->what;
      hooks_.fire(why);
      return;
    }
    lock.lock();
  }
}

}  // namespace ember::dist
