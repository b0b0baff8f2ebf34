#include "dist/shm_allreduce.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstring>
#include <ctime>
#include <type_traits>

#include "core/dtype.h"
#include "core/error.h"

namespace ember::dist {

// Written by its rank only (arrived, reduced), or by everyone (bell): separate cache lines.
struct ShmAllReduce::RankLine {
  alignas(64) uint64_t arrived;
  uint64_t reduced;
  alignas(64) uint32_t bell;
  uint32_t sleeping;  // 1 while its rank is (about to be) in FUTEX_WAIT on `bell`
};

struct ShmAllReduce::Desc {
  alignas(64) uint64_t total;
  uint64_t offset, len;
  int32_t dtype, op;
};

namespace {

constexpr size_t kLine = 64;

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

size_t round_up(size_t n) {
  return (n + kLine - 1) / kLine * kLine;
}

template <typename T>
T load(const T& x) {
  return std::atomic_ref<T>(const_cast<T&>(x)).load(std::memory_order_acquire);
}
template <typename T>
void store(T& x, T v) {
  std::atomic_ref<T>(x).store(v, std::memory_order_release);
}

// out = op(in[0], in[1], ...) over `n` elements, folding the ranks in order.
template <typename T, typename Acc>
void fold(Acc* acc, const char* const* in, int ranks, int64_t begin, int64_t n, ReduceOp op) {
  const T* first = reinterpret_cast<const T*>(in[0]) + begin;
  for (int64_t i = 0; i < n; ++i) acc[i] = static_cast<Acc>(first[i]);
  for (int r = 1; r < ranks; ++r) {
    const T* x = reinterpret_cast<const T*>(in[r]) + begin;
    if (op == ReduceOp::Max)
      for (int64_t i = 0; i < n; ++i) acc[i] = static_cast<Acc>(x[i]) > acc[i] ? static_cast<Acc>(x[i]) : acc[i];
    else if constexpr (std::is_integral_v<Acc>)  // wraps on overflow, as MPI_SUM does
      for (int64_t i = 0; i < n; ++i)
        acc[i] = static_cast<Acc>(static_cast<std::make_unsigned_t<Acc>>(acc[i]) +
                                  static_cast<std::make_unsigned_t<Acc>>(x[i]));
    else
      for (int64_t i = 0; i < n; ++i) acc[i] = static_cast<Acc>(acc[i] + static_cast<Acc>(x[i]));
  }
  if (op == ReduceOp::Avg)
    for (int64_t i = 0; i < n; ++i) acc[i] = static_cast<Acc>(acc[i] / static_cast<Acc>(ranks));
}

std::string describe(uint64_t total, int32_t dtype, int32_t op) {
  std::string dt = dtype >= 0 && dtype <= static_cast<int32_t>(DType::BFloat16) ? dtype_name(static_cast<DType>(dtype))
                                                                                : "dtype #" + std::to_string(dtype);
  std::string o = op >= 0 && op <= static_cast<int32_t>(ReduceOp::Max) ? reduce_op_name(static_cast<ReduceOp>(op))
                                                                       : "op #" + std::to_string(op);
  return std::to_string(total) + " " + dt + " elements (" + o + ")";
}

}  // namespace

size_t ShmAllReduce::bytes_needed(int size, size_t slot_bytes) {
  return kLine + static_cast<size_t>(size) * sizeof(RankLine) +
         2 * static_cast<size_t>(size) * (sizeof(Desc) + round_up(std::max<size_t>(slot_bytes, kLine)));
}

ShmAllReduce::ShmAllReduce(void* base, int rank, int size, size_t slot_bytes)
    // Aligned up to a cache line (the structures ask for it; MPI's segment need not start on
    // one). The mappings share their offset within a page, so every rank lands on the same byte.
    : base_(reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(base) + kLine - 1) / kLine * kLine)),
      rank_(rank),
      size_(size),
      slot_bytes_(round_up(std::max<size_t>(slot_bytes, kLine))) {
  EMBER_CHECK(base && size >= 1 && rank >= 0 && rank < size, "ShmAllReduce: bad segment, rank ", rank, " or size ",
              size);
  static_assert(sizeof(RankLine) == 2 * kLine && sizeof(Desc) == kLine);
}

ShmAllReduce::RankLine& ShmAllReduce::line(int r) const {
  return reinterpret_cast<RankLine*>(base_)[r];
}
uint32_t* ShmAllReduce::bell(int r) const {
  return &line(r).bell;
}
ShmAllReduce::Desc& ShmAllReduce::desc(int set, int r) const {
  char* p = base_ + static_cast<size_t>(size_) * sizeof(RankLine) +
            static_cast<size_t>(set * size_ + r) * (sizeof(Desc) + slot_bytes_);
  return *reinterpret_cast<Desc*>(p);
}
char* ShmAllReduce::slot(int set, int r) const {
  return reinterpret_cast<char*>(&desc(set, r)) + sizeof(Desc);
}

uint32_t ShmAllReduce::doorbell() const {
  return load(*bell(rank_));
}

// The wake-up is a system call, made only when the rank says it sleeps: the ringer writes the bell
// then reads `sleeping`, the sleeper writes `sleeping` then reads the bell (both sequentially
// consistent), so at least one of them sees the other's write, and FUTEX_WAIT itself re-checks the
// bell in the kernel.
void ShmAllReduce::ring(int r) const {
  std::atomic_ref<uint32_t>(*bell(r)).fetch_add(1, std::memory_order_seq_cst);
  if (std::atomic_ref<uint32_t>(line(r).sleeping).load(std::memory_order_seq_cst))
    // Not FUTEX_PRIVATE: the waiter is another process mapping the same page.
    syscall(SYS_futex, bell(r), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void ShmAllReduce::wait_for_doorbell(uint32_t seen, double timeout_s, double spin_s) const {
  if (timeout_s <= 0) return;
  if (spin_s > 0) {
    // No system call on either side while the answer comes within the spin (the ringer skips
    // FUTEX_WAKE for a rank that does not sleep).
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(std::min(spin_s, timeout_s));
    for (int i = 0;; ++i) {
      if (doorbell() != seen) return;
      if ((i & 63) == 63 && std::chrono::steady_clock::now() >= until) break;
      cpu_relax();
    }
  }
  timeout_s = std::min(timeout_s, 3600.0);
  timespec ts;
  ts.tv_sec = static_cast<time_t>(timeout_s);
  ts.tv_nsec = static_cast<long>((timeout_s - static_cast<double>(ts.tv_sec)) * 1e9);
  std::atomic_ref<uint32_t> sleeping(line(rank_).sleeping);
  sleeping.store(1, std::memory_order_seq_cst);
  if (std::atomic_ref<uint32_t>(*bell(rank_)).load(std::memory_order_seq_cst) == seen)
    // Returns at once when the word no longer holds `seen` (EAGAIN), on a ring, a signal or the
    // timeout; the caller looks for work again in every case.
    syscall(SYS_futex, bell(rank_), FUTEX_WAIT, seen, &ts, nullptr, 0);
  sleeping.store(0, std::memory_order_relaxed);
}

std::pair<int64_t, int64_t> ShmAllReduce::part(int r, int64_t len) const {
  return {len * r / size_, len * (r + 1) / size_};
}

void ShmAllReduce::post(Job& job) {
  const int64_t total = job.t.numel();
  const auto item = static_cast<int64_t>(job.t.itemsize());
  piece_len_ = std::min<int64_t>(total - job.done, static_cast<int64_t>(slot_bytes_) / item);
  ++round_;
  const int set = static_cast<int>(round_ % 2);
  if (piece_len_ > 0)
    std::memcpy(slot(set, rank_), static_cast<const char*>(job.t.raw_data()) + job.done * item,
                static_cast<size_t>(piece_len_ * item));
  Desc& d = desc(set, rank_);
  d.total = static_cast<uint64_t>(total);
  d.offset = static_cast<uint64_t>(job.done);
  d.len = static_cast<uint64_t>(piece_len_);
  d.dtype = static_cast<int32_t>(job.t.dtype());
  d.op = static_cast<int32_t>(job.op);
  store(line(rank_).arrived, round_);  // release: the slot and its description are in place
  for (int r = 0; r < size_; ++r)
    if (r != rank_) ring(r);
}

bool ShmAllReduce::all_reached(int which) const {
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    const RankLine& l = line(r);
    if ((which == 0 ? load(l.arrived) : load(l.reduced)) < round_) return false;
  }
  return true;
}

void ShmAllReduce::reduce_my_part(Job& job) {
  const int set = static_cast<int>(round_ % 2);
  const auto item = static_cast<int64_t>(job.t.itemsize());
  // Plain variables, not a structured binding: the lambda below uses them, and clang before 16
  // cannot capture a binding.
  const std::pair<int64_t, int64_t> mine = part(rank_, piece_len_);
  const int64_t b = mine.first, n = mine.second - mine.first;
  if (n == 0) return;
  std::vector<const char*> in(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) in[static_cast<size_t>(r)] = slot(set, r);
  char* out = static_cast<char*>(job.t.raw_data()) + (job.done + b) * item;
  const char* const* src = in.data();
  EMBER_DISPATCH_ALL(job.t.dtype(), "all_reduce", [&] {
    using T = scalar_t;
    if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      // Accumulate in float and round once, rather than once per rank.
      scratch_.resize(static_cast<size_t>(n));
      fold<T, float>(scratch_.data(), src, size_, b, n, job.op);
      auto* o = reinterpret_cast<T*>(out);
      for (int64_t i = 0; i < n; ++i) o[i] = T(scratch_[static_cast<size_t>(i)]);
    } else if constexpr (std::is_same_v<T, bool>) {
      // A sum of booleans is their logical or, as on the MPI path: the max of 0/1 bytes.
      fold<uint8_t, uint8_t>(reinterpret_cast<uint8_t*>(out), src, size_, b, n, ReduceOp::Max);
    } else {
      fold<T, T>(reinterpret_cast<T*>(out), src, size_, b, n, job.op);
    }
  });
  // The other ranks copy this rank's part from its slot; nobody else reads that range of it.
  std::memcpy(slot(set, rank_) + b * item, out, static_cast<size_t>(n * item));
}

void ShmAllReduce::gather_parts(Job& job) {
  const int set = static_cast<int>(round_ % 2);
  const auto item = static_cast<int64_t>(job.t.itemsize());
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    auto [b, e] = part(r, piece_len_);
    if (e > b)
      std::memcpy(static_cast<char*>(job.t.raw_data()) + (job.done + b) * item, slot(set, r) + b * item,
                  static_cast<size_t>((e - b) * item));
  }
}

bool ShmAllReduce::step(Job& job) {
  bool moved = false;
  while (!job.finished) {
    if (job.phase == 0) {
      post(job);
      job.phase = 1;
      moved = true;
    }
    if (job.phase == 1) {
      if (!all_reached(0)) return moved;
      const int set = static_cast<int>(round_ % 2);
      const Desc& mine = desc(set, rank_);
      for (int r = 0; r < size_; ++r) {
        const Desc& d = desc(set, r);
        if (r == rank_ ||
            (d.total == mine.total && d.offset == mine.offset && d.dtype == mine.dtype && d.op == mine.op))
          continue;
        // Every rank sees a mismatch (with the odd one out, or the odd one with everyone) and
        // leaves the operation in this same round, so the ranks stay in step for the next one.
        job.error = std::make_exception_ptr(Error(job.what + ": the ranks disagree on this all-reduce: rank " +
                                                  std::to_string(r) + " has " + describe(d.total, d.dtype, d.op) +
                                                  ", this rank (" + std::to_string(rank_) + ") has " +
                                                  describe(mine.total, mine.dtype, mine.op)));
        job.finished = true;
        return true;
      }
      reduce_my_part(job);
      store(line(rank_).reduced, round_);
      for (int r = 0; r < size_; ++r)
        if (r != rank_) ring(r);
      job.phase = 2;
      moved = true;
    }
    if (!all_reached(1)) return moved;
    gather_parts(job);
    job.done += piece_len_;
    job.phase = 0;
    if (job.done >= job.t.numel()) job.finished = true;
    // One round per call: between rounds the caller's loop gets to send heartbeats and test its
    // other operations, however large the tensor.
    return true;
  }
  return moved;
}

}  // namespace ember::dist
