// The watchdog of device-side communicators (dist/device_watchdog.h) and the register of their
// incomplete operations (dist/comm.h), with stand-ins for NCCL's queue and errors: NCCL itself
// never runs in CI (scripts/gpu-check.sh runs the real one). The watchdog fires once when an
// operation waits past the timeout or the communicator reports an error, naming the operation,
// and never while the operations complete; the register lists what its owners still wait on.
// (It runs in every rank of the suite's mpirun job, each rank on its own.) A rank that gives up
// on MPI names the registered operations too: tests/dist/fault_test.sh, mode device_wait.
#include "dist/device_watchdog.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "core/error.h"
#include "dist/comm.h"
#include "test_helpers.h"

using namespace ember;
using namespace ember::dist;

namespace {

// A stand-in device queue: its oldest operation's name and age, an error to report, and what the
// watchdog said when it fired.
struct FakeQueue {
  std::mutex mu;
  std::optional<DeviceWatchdog::Pending> oldest;
  std::string error;
  std::string fired;
  std::atomic<int> fires{0}, polls{0};

  DeviceWatchdog::Hooks hooks() {
    DeviceWatchdog::Hooks h;
    h.oldest_incomplete = [this] {
      ++polls;
      std::lock_guard<std::mutex> lock(mu);
      return oldest;
    };
    h.async_error = [this] {
      std::lock_guard<std::mutex> lock(mu);
      return error;
    };
    h.fire = [this](const std::string& why) {
      std::lock_guard<std::mutex> lock(mu);
      fired = why;
      ++fires;
    };
    return h;
  }
  // Waits (without a time limit: ctest's is the bound) until the watchdog has polled n more times.
  void wait_polls(int n) {
    const int target = polls.load() + n;
    while (polls.load() < target) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  void wait_fired() {
    while (fires.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
};

TEST(DeviceWatchdog, FiresOnceWhenAnOperationWaitsPastTheTimeoutNamingIt) {
  FakeQueue q;
  q.oldest = DeviceWatchdog::Pending{"NCCL #7 all_reduce sum 'bucket 2 of step 3'", 0.5};
  {
    DeviceWatchdog w(q.hooks(), 30.0, 0.001);
    q.wait_polls(5);  // younger than the timeout: nothing
    EXPECT_EQ(q.fires.load(), 0);
    {
      std::lock_guard<std::mutex> lock(q.mu);
      q.oldest->age_seconds = 31.0;
    }
    q.wait_fired();
    q.wait_polls(0);
  }
  EXPECT_EQ(q.fires.load(), 1);
  EXPECT_NE(q.fired.find("has not completed in 31 s (timeout 30 s"), std::string::npos) << q.fired;
  EXPECT_NE(q.fired.find("this rank was waiting on NCCL #7 all_reduce sum 'bucket 2 of step 3'"), std::string::npos)
      << q.fired;
}

TEST(DeviceWatchdog, FiresOnTheCommunicatorsErrorEvenWithNothingPending) {
  FakeQueue q;
  q.error = "remote process exited or there was a network error";
  {
    DeviceWatchdog w(q.hooks(), 600.0, 0.001);
    q.wait_fired();
  }
  EXPECT_EQ(q.fires.load(), 1);
  EXPECT_NE(q.fired.find("the communicator reported an error (remote process exited"), std::string::npos) << q.fired;
  EXPECT_EQ(q.fired.find("waiting on"), std::string::npos) << q.fired;
}

TEST(DeviceWatchdog, StaysQuietWhileOperationsCompleteAndStopsWithItsOwner) {
  FakeQueue q;
  {
    DeviceWatchdog w(q.hooks(), 0.5, 0.001);
    q.wait_polls(20);  // nothing pending
  }
  EXPECT_EQ(q.fires.load(), 0);
}

TEST(DeviceWatchdog, ANonPositiveTimeoutOrPollIsRefused) {
  FakeQueue q;
  for (double bad : {0.0, -1.0}) {
    EXPECT_TRUE(test_util::has(test_util::error_of([&] { DeviceWatchdog w(q.hooks(), bad); }), "must be positive"));
    EXPECT_TRUE(
        test_util::has(test_util::error_of([&] { DeviceWatchdog w(q.hooks(), 10.0, bad); }), "must be positive"));
  }
  EXPECT_EQ(q.polls.load(), 0);  // no thread was started
}

TEST(DeviceWatchdog, TimeoutFromTheEnvironmentIsCheckedAndNamed) {
  const test_util::ScopedEnv unset("EMBER_NCCL_TIMEOUT_SECONDS", nullptr);
  EXPECT_EQ(DeviceWatchdog::timeout_from_env(600.0), 600.0);
  {
    const test_util::ScopedEnv set("EMBER_NCCL_TIMEOUT_SECONDS", "45.5");
    EXPECT_EQ(DeviceWatchdog::timeout_from_env(600.0), 45.5);
  }
  for (const char* bad : {"0", "-3", "ten", "5s"}) {
    const test_util::ScopedEnv set("EMBER_NCCL_TIMEOUT_SECONDS", bad);
    EXPECT_THROW(
        {
          try {
            DeviceWatchdog::timeout_from_env(600.0);
          } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("EMBER_NCCL_TIMEOUT_SECONDS must be a positive number"),
                      std::string::npos);
            throw;
          }
        },
        Error)
        << bad;
  }
}

TEST(DeviceWork, TheRegisterListsWhatItsOwnersStillWaitOn) {
  int a = 0, b = 0;
  register_device_work(&a, [] { return std::string("NCCL #3 broadcast 'x'"); });
  register_device_work(&b, [] { return std::string(); });  // nothing pending: left out
  EXPECT_EQ(incomplete_device_work(), std::vector<std::string>{"NCCL #3 broadcast 'x'"});
  unregister_device_work(&a);
  unregister_device_work(&b);
  EXPECT_TRUE(incomplete_device_work().empty());
}

}  // namespace
