// All-reduce through memory shared by the ranks of one node, driven by the MPI communicator's
// thread (comm_mpi.cpp) in place of MPI_Iallreduce when every rank is on the same node.
//
// Why: a non-blocking MPI collective progresses only inside MPI calls, so the communication thread
// has to poll while backward runs, and on a rank with one core every poll is a context switch
// taken from the computation (bench/ddp measured about 2 ms of communication-thread CPU per LSTM
// step for a 1.9 MB all-reduce, most of it polling). Here a rank says what it is waiting for with
// a futex word in the shared segment, and the rank that supplies it wakes it: a few wake-ups per
// bucket, and no polling at all.
//
// Protocol, for one round (one slot-sized piece of a tensor; a larger tensor takes several):
//   1. each rank copies its piece into its own slot, describes it (total elements, dtype, op,
//      offset) and publishes `arrived = round`, then rings every other rank's doorbell;
//   2. when all ranks have arrived, each checks that the descriptions agree (a mismatch fails the
//      operation on every rank, with both descriptions) and reduces its own 1/N of the piece over
//      all slots, in rank order (so every rank ends with the same bits), into its tensor and back
//      into its slot; it publishes `reduced = round` and rings again;
//   3. when all have reduced, each copies the other ranks' reduced parts from their slots.
// Slots come in two sets used by alternate rounds. A rank writes set k%2 in round k only after it
// has seen every other rank arrive in round k-1, which each does only after finishing round k-2,
// the last one that read that set: no third synchronisation is needed.
//
// Operations run one at a time, in the order they were issued, which is the same on every rank.
// Waiting is the caller's: step() never blocks, wait_for_doorbell() sleeps until a ring or a
// timeout, so the communication thread can keep hearing the other ranks' heartbeats.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "dist/comm.h"

namespace ember::dist {

class ShmAllReduce {
 public:
  // Bytes of shared memory `size` ranks need with slots of `slot_bytes` (rounded up to 64),
  // including up to a cache line lost to aligning the segment's start.
  static size_t bytes_needed(int size, size_t slot_bytes);
  // `base` is the segment every rank maps (the same bytes, at any address), zero-filled by one rank
  // before any rank constructs its ShmAllReduce; `rank` is this process's place in it.
  ShmAllReduce(void* base, int rank, int size, size_t slot_bytes);

  // One all-reduce in progress. `t` is contiguous; it is reduced in place.
  struct Job {
    Tensor t;
    ReduceOp op = ReduceOp::Sum;
    std::string what;  // for error messages
    int64_t done = 0;  // elements finished
    int phase = 0;     // 0 post a piece, 1 wait for all to arrive, 2 wait for all to reduce
    bool finished = false;
    std::exception_ptr error;
  };
  // Advances `job` without waiting, by at most one round (one slot-sized piece); returns whether
  // anything moved. Jobs must be stepped one at a time, in issue order: a job is started only
  // after the previous one finished.
  bool step(Job& job);

  // The value of this rank's doorbell, read before looking for work: wait_for_doorbell(seen, ...)
  // returns at once if anything rang since.
  uint32_t doorbell() const;
  // Sleeps until this rank's doorbell differs from `seen` or `timeout_s` passes. With `spin_s`, it
  // first watches the doorbell that long without sleeping: worth it only when the core would idle
  // otherwise, since a futex wake-up costs tens of microseconds on each side.
  void wait_for_doorbell(uint32_t seen, double timeout_s, double spin_s = 0) const;
  // Rings this rank's own doorbell (new work was queued for the thread that waits on it).
  void ring_self() const { ring(rank_); }

  size_t slot_bytes() const { return slot_bytes_; }

 private:
  struct RankLine;
  struct Desc;
  RankLine& line(int r) const;
  uint32_t* bell(int r) const;
  Desc& desc(int set, int r) const;
  char* slot(int set, int r) const;
  void ring(int r) const;
  void post(Job& job);
  bool all_reached(int which) const;  // 0: arrived, 1: reduced, at round_
  void reduce_my_part(Job& job);
  void gather_parts(Job& job);
  // This rank's share [begin, end) of a piece of `len` elements.
  std::pair<int64_t, int64_t> part(int r, int64_t len) const;

  char* base_;
  int rank_, size_;
  size_t slot_bytes_;
  uint64_t round_ = 0;  // rounds begun by this rank; every rank counts the same
  int64_t piece_len_ = 0;
  std::vector<float> scratch_;  // float accumulator for 16-bit types
};

}  // namespace ember::dist
