// The CPU recurrent kernels' loop over time steps (core/cpu/rnn_kernel.cpp) on several threads: a
// sequence of phases, each split into items, run by a team of threads with a wait between phases
// instead of a parallel region per step.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/cpu/capability.h"

namespace ember::cpu {
inline namespace EMBER_CPU_NS {  // compiled once per CPU level, like every header here

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// The recurrent loop's work as a sequence of phases (a step, or half a step in backward), each
// split into items; an item of phase p starts once every item of the earlier phases has finished.
// Each thread owns the same items of every phase (the same hidden units, so the same slices of
// the packed W_hh stay in its core's caches; items claimed by whoever came first moved them
// between cores at every step: 1.7x the CPU time for the same products at two threads). A thread
// descheduled in the middle of a step stalls it until it runs again, for a scheduler time slice
// (a busy machine, data-loader threads on the same cores); a thread that has waited that long
// takes the rest of the loop on alone, items the others have not started included, so a busy
// machine costs one such stall per call instead of one per few steps.
class PhasedQueue {
 public:
  PhasedQueue(int64_t phases, int64_t items)
      : phases_(phases), items_(items), claimed_(new std::atomic<bool>[phases * items]()) {}

  // Called by every thread of a team of `team` (tid in [0, team)); f(phase, item) runs each item
  // exactly once.
  template <typename F>
  void run(int tid, int team, const F& f) {
    const int64_t i0 = items_ * tid / team, i1 = items_ * (tid + 1) / team;
    for (int64_t p = 0; p < phases_; ++p)
      for (int64_t i = i0; i < i1; ++i) switch (wait_for(tid, p * items_)) {
          case Wait::kReady:
            run_item(p, i, f);
            break;
          case Wait::kTookOver:  // every phase before p - 1 is done: this thread ran its items of p - 1
            return finish_alone(std::max<int64_t>(0, p - 1), f);
          case Wait::kOtherTookOver:
            return;
        }
  }

 private:
  // Items in a step are sized (UnitGroups) to take well under this on a core of their own.
  static constexpr auto kStall = std::chrono::milliseconds(2);
  enum class Wait { kReady, kTookOver, kOtherTookOver };

  template <typename F>
  void run_item(int64_t p, int64_t i, const F& f) {
    if (claimed_[p * items_ + i].exchange(true, std::memory_order_relaxed)) return;  // the solo thread's now
    f(p, i);
    done_.fetch_add(1, std::memory_order_release);
  }

  // Every item not yet claimed, from phase `from` on, in order (this thread is solo_).
  template <typename F>
  void finish_alone(int64_t from, const F& f) {
    for (int64_t p = from; p < phases_; ++p)
      for (int64_t i = 0; i < items_; ++i) {
        for (int spins = 1; done_.load(std::memory_order_acquire) < p * items_; ++spins)  // an item still running
          if (spins % 256 == 0) std::this_thread::yield();
        run_item(p, i, f);
      }
  }

  // Waits until `finished` items are done, unless a thread has taken the loop over: this one, when
  // it has waited past kStall.
  Wait wait_for(int tid, int64_t finished) {
    std::chrono::steady_clock::time_point start;  // read at the first yield: most waits end before
    for (int spins = 1;; ++spins) {
      const int owner = solo_.load(std::memory_order_relaxed);
      if (owner >= 0) return owner == tid ? Wait::kTookOver : Wait::kOtherTookOver;
      if (done_.load(std::memory_order_acquire) >= finished) return Wait::kReady;
      if (spins % 256 != 0) {
        cpu_relax();
        continue;
      }
      std::this_thread::yield();  // let the thread that holds the missing item run
      const auto now = std::chrono::steady_clock::now();
      if (spins == 256) start = now;
      int none = -1;
      if (now - start > kStall) solo_.compare_exchange_strong(none, tid, std::memory_order_relaxed);
    }
  }

  const int64_t phases_, items_;
  std::unique_ptr<std::atomic<bool>[]> claimed_;
  alignas(64) std::atomic<int64_t> done_{0};
  alignas(64) std::atomic<int> solo_{-1};
};

// Runs queue.run on nthreads OpenMP threads (inline when 1).
template <typename F>
void run_queue(int nthreads, PhasedQueue& queue, const F& f) {
#ifdef _OPENMP
  if (nthreads > 1) {
#pragma omp parallel num_threads(nthreads)
    queue.run(omp_get_thread_num(), omp_get_num_threads(), f);
    return;
  }
#endif
  (void)nthreads;
  queue.run(0, 1, f);
}

}  // namespace EMBER_CPU_NS
}  // namespace ember::cpu
