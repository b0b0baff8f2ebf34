// The watchdog of a communicator whose operations complete on a device (NCCL). A rank whose peer
// died, hangs or was killed in the middle of a collective waits for it forever: NCCL's kernel
// spins on the peer's data, and the host sits in a stream synchronisation, where no Ember code
// runs. (MPI's communication thread sees a lost peer by its heartbeat: comm_mpi.h. A job
// bootstrapped through MPI gets that too, the NCCL operation named: dist/comm.h,
// register_device_work.) The watchdog's thread asks, every poll, for the oldest operation not yet
// complete and how long ago it was queued, and for an asynchronous error of the communicator;
// when there is an error, or that operation has waited past the timeout, it fires once: for NCCL,
// ncclCommAbort (which ends the kernels waiting on the peer), a message naming the rank and the
// operation, and exit status kPeerLostExit, as MPI's give-up.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace ember::dist {

class DeviceWatchdog {
 public:
  struct Pending {
    std::string what;    // "NCCL #12 all_reduce sum 'bucket 0 of step 3' (...)"
    double age_seconds;  // since it was queued
  };
  struct Hooks {
    std::function<std::optional<Pending>()> oldest_incomplete;
    std::function<std::string()> async_error;      // "" when none
    std::function<void(const std::string&)> fire;  // given why; need not return
  };

  // Starts the thread. timeout_seconds > 0.
  DeviceWatchdog(Hooks hooks, double timeout_seconds, double poll_seconds = 0.1);
  ~DeviceWatchdog();  // stops the thread (without firing)
  DeviceWatchdog(const DeviceWatchdog&) = delete;
  DeviceWatchdog& operator=(const DeviceWatchdog&) = delete;

  // EMBER_NCCL_TIMEOUT_SECONDS when set (a positive number, else an ember::Error naming it), else
  // `fallback`.
  static double timeout_from_env(double fallback);

 private:
  void loop();

  Hooks hooks_;
  const double timeout_, poll_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace ember::dist
