// The recurrent kernels' phased work queue (core/cpu/phased_queue.h): every item runs exactly once
// and only after every item of the earlier phases has finished, with one thread or several, and a
// thread that never turns up, or stops in the middle of an item, has its work taken over instead of
// holding the loop. Compiled once per CPU level, as every user of a cpu/ header is.
#include "core/cpu/phased_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "cpu_level_test.h"

namespace {

using ember::cpu::PhasedQueue;

EMBER_CPU_LEVEL_FIXTURE(PhasedQueue);

// What a queue's items did: which thread ran each (-1: none yet), how often, and whether one
// started before the earlier phases were done.
struct Log {
  int64_t phases, items;
  std::unique_ptr<std::atomic<int>[]> runs, by;
  std::atomic<int64_t> finished{0};
  std::atomic<int> early{0};
  Log(int64_t p, int64_t i)
      : phases(p), items(i), runs(new std::atomic<int>[p * i]()), by(new std::atomic<int>[p * i]) {
    for (int64_t k = 0; k < p * i; ++k) by[k] = -1;
  }
  void record(int tid, int64_t p, int64_t i) {
    if (finished.load() < p * items) ++early;
    runs[p * items + i]++;
    by[p * items + i] = tid;
  }
  void done() { ++finished; }
  void expect_each_item_once_in_phase_order() const {
    EXPECT_EQ(early.load(), 0);
    for (int64_t k = 0; k < phases * items; ++k) EXPECT_EQ(runs[k].load(), 1) << "item " << k;
  }
};

EMBER_CPU_LEVEL_TEST(PhasedQueue, EachThreadRunsItsOwnItemsOncePhaseByPhase) {
  for (int team : {1, 2, 3}) {
    SCOPED_TRACE(team);
    const int64_t phases = 50, items = 7;
    PhasedQueue q(phases, items);
    Log log(phases, items);
    std::vector<std::thread> threads;
    for (int tid = 0; tid < team; ++tid)
      threads.emplace_back([&, tid] {
        q.run(tid, team, [&](int64_t p, int64_t i) {
          log.record(tid, p, i);
          log.done();
        });
      });
    for (std::thread& t : threads) t.join();
    log.expect_each_item_once_in_phase_order();
    // (Which thread ran an item is not checked: a thread descheduled past the queue's wait on a
    // busy machine has its items taken over, which the tests below check.)
  }
}

// Thread 1 turns up only once thread 0 has run one of its items: thread 0 waited, took the loop
// over and ran everything; thread 1 then finds nothing left to do.
EMBER_CPU_LEVEL_TEST(PhasedQueue, AThreadThatNeverTurnsUpHasItsItemsTakenOver) {
  const int64_t phases = 6, items = 4;
  PhasedQueue q(phases, items);
  Log log(phases, items);
  std::atomic<bool> taken{false};
  auto f = [&](int tid) {
    return [&, tid](int64_t p, int64_t i) {
      log.record(tid, p, i);
      if (tid == 0 && i >= items / 2) taken = true;  // one of thread 1's items
      log.done();
    };
  };
  std::thread t0([&] { q.run(0, 2, f(0)); });
  std::thread t1([&] {
    while (!taken.load()) std::this_thread::yield();
    q.run(1, 2, f(1));
  });
  t0.join();
  t1.join();
  log.expect_each_item_once_in_phase_order();
  for (int64_t k = 0; k < phases * items; ++k) EXPECT_EQ(log.by[k].load(), 0) << "item " << k;
}

// Thread 1 stops in the middle of an item for far longer than the queue waits: the loop still
// ends with every item run once, in phase order.
EMBER_CPU_LEVEL_TEST(PhasedQueue, AThreadStoppedInTheMiddleOfAnItemDelaysButDoesNotBreakTheLoop) {
  const int64_t phases = 8, items = 4;
  PhasedQueue q(phases, items);
  Log log(phases, items);
  std::vector<std::thread> threads;
  for (int tid = 0; tid < 2; ++tid)
    threads.emplace_back([&, tid] {
      q.run(tid, 2, [&](int64_t p, int64_t i) {
        log.record(tid, p, i);
        if (tid == 1 && p == 3) std::this_thread::sleep_for(std::chrono::milliseconds(20));
        log.done();
      });
    });
  for (std::thread& t : threads) t.join();
  log.expect_each_item_once_in_phase_order();
}

}  // namespace
