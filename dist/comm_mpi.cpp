#include "dist/comm_mpi.h"

// The C API only: OpenMPI's deprecated C++ bindings would need libmpi_cxx.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <future>
#include <string>
#include <vector>

#include "core/error.h"
#include "dist/shm_allreduce.h"

namespace ember::dist {
namespace {

Clock::duration seconds_as_duration(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

std::atomic<bool> g_mpi_in_use{false};

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string mpi_error(int rc) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(buf, static_cast<size_t>(len));
}

// float16/bfloat16 have no MPI type: they travel as 16-bit words and reduce through these ops.
template <typename H, bool Max>
void half_op(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* a = static_cast<H*>(in);
  auto* b = static_cast<H*>(inout);
  for (int i = 0; i < *len; ++i) {
    float x = a[i], y = b[i];
    b[i] = H(Max ? (x > y ? x : y) : x + y);
  }
}

template <typename T>
void scale(void* p, int64_t n, double f) {
  auto* d = static_cast<T*>(p);
  for (int64_t i = 0; i < n; ++i) d[i] = T(static_cast<float>(static_cast<double>(static_cast<T>(d[i])) * f));
}

// Heartbeat: what a rank tells the others about itself.
struct Status {
  int32_t kind = 0;      // 0 alive, 1 leaving (its communicator is shutting down), 2 giving up
  int32_t waiting = 0;   // 1 when it has a collective in flight
  int64_t launched = 0;  // collectives started so far
  int64_t completed = 0;
  char what[112] = {};  // the oldest collective in flight
};

constexpr int kStatusTag = 7;

}  // namespace

struct MpiCommunicator::Op {
  enum Kind { AllReduce, Broadcast, AllGather, ReduceScatter, Send, Recv, Barrier, Call } kind;
  Tensor a, b;  // a: the in-place / output tensor, b: the input where separate
  ReduceOp op = ReduceOp::Sum;
  int peer = 0, tag = 0;
  WorkPtr work;
  MPI_Request req = MPI_REQUEST_NULL;
  std::unique_ptr<ShmAllReduce::Job> shm;  // an all_reduce through shared memory instead of MPI
  int64_t seq = -1;                        // collective sequence number of the world (p2p, groups: -1)
  int group = -1;                          // index into State::groups; -1: the world
  int group_size = 0;                      // the ranks it runs over (for Avg)
  std::vector<int> watched;                // world ranks it cannot complete without (p2p, groups)
  std::function<void()> call;              // Call: run on the communication thread
};

struct MpiCommunicator::State {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::unique_ptr<Op>> queue;
  bool stop = false;
  MPI_Comm data = MPI_COMM_NULL, ctrl = MPI_COMM_NULL, p2p = MPI_COMM_NULL, node = MPI_COMM_NULL;
  MPI_Win shm_win = MPI_WIN_NULL;
  std::unique_ptr<ShmAllReduce> shm;  // set when every rank is on this node and it is not disabled
  MPI_Op half_sum = MPI_OP_NULL, half_max = MPI_OP_NULL, bf_sum = MPI_OP_NULL, bf_max = MPI_OP_NULL;
  std::vector<std::unique_ptr<Op>> active;
  int64_t launched = 0, completed = 0;
  // Communicators split from the world (split()): their MPI communicator and members' world ranks.
  struct Group {
    MPI_Comm comm = MPI_COMM_NULL;
    std::vector<int> world_ranks;
  };
  std::deque<Group> groups;  // a deque: ops keep indices, split() appends while others run
  // peers
  struct Peer {
    Clock::time_point heard;
    Status status;
    bool left = false;
    Clock::time_point left_at{};     // when this rank heard that it left
    bool gave_up = false;            // it exits because it lost another rank
    std::string host = "(unknown)";  // its hostname, to name where a lost rank ran
  };
  std::vector<Peer> peers;
  struct Pending {
    MPI_Request req;
    std::unique_ptr<Status> buf;
  };
  std::deque<Pending> sends;
  Clock::time_point last_beat{};
  int64_t stall_reported = -1;
  std::atomic<uint64_t> loops{0};  // passes of the communication thread's loop (progress_loops())
};

namespace {

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::Float32:
      return MPI_FLOAT;
    case DType::Float64:
      return MPI_DOUBLE;
    case DType::Int32:
      return MPI_INT32_T;
    case DType::Int64:
      return MPI_INT64_T;
    case DType::UInt8:
    case DType::Bool:
      return MPI_UINT8_T;
    case DType::Float16:
    case DType::BFloat16:
      return MPI_UINT16_T;
  }
  return MPI_BYTE;
}

MPI_Op mpi_op(const MpiCommunicator::State& st, DType t, ReduceOp op) {
  bool max = op == ReduceOp::Max;
  if (t == DType::Float16) return max ? st.half_max : st.half_sum;
  if (t == DType::BFloat16) return max ? st.bf_max : st.bf_sum;
  // bool: sum is logical or (as 0/1 bytes, max is or).
  if (t == DType::Bool) return MPI_MAX;
  return max ? MPI_MAX : MPI_SUM;
}

int count_of(const Tensor& t) {
  return static_cast<int>(t.numel());
}

void divide(const Tensor& t, int n) {
  double f = 1.0 / n;
  switch (t.dtype()) {
    case DType::Float32:
      scale<float>(t.raw_data(), t.numel(), f);
      break;
    case DType::Float64: {
      auto* d = static_cast<double*>(t.raw_data());
      for (int64_t i = 0; i < t.numel(); ++i) d[i] /= n;
      break;
    }
    case DType::Float16:
      scale<Half>(t.raw_data(), t.numel(), f);
      break;
    case DType::BFloat16:
      scale<BFloat16>(t.raw_data(), t.numel(), f);
      break;
    default:
      break;  // rejected at issue time
  }
}

}  // namespace

bool MpiCommunicator::launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"})
    if (std::getenv(v)) return true;
  return false;
}

// ---------------------------------------------------------------- the communication thread
namespace {

class Engine {
 public:
  Engine(MpiCommunicator::State& st, const MpiOptions& o, int rank, int size)
      : st_(st), o_(o), rank_(rank), size_(size) {}

  void start(MpiCommunicator::Op& op) {
    op.work->mark_started();
    int rc = MPI_SUCCESS;
    const MPI_Comm data = op.group >= 0 ? st_.groups[op.group].comm : st_.data;
    const MPI_Comm p2p = op.group >= 0 ? st_.groups[op.group].comm : st_.p2p;
    void* a = op.a.defined() ? op.a.raw_data() : nullptr;
    void* b = op.b.defined() ? op.b.raw_data() : nullptr;
    switch (op.kind) {
      case MpiCommunicator::Op::AllReduce:
        if (st_.shm && op.group < 0) {
          op.shm = std::make_unique<ShmAllReduce::Job>();
          op.shm->t = op.a;
          op.shm->op = op.op;
          op.shm->what = op.work->what();
          break;
        }
        rc = MPI_Iallreduce(MPI_IN_PLACE, a, count_of(op.a), mpi_type(op.a.dtype()), mpi_op(st_, op.a.dtype(), op.op),
                            data, &op.req);
        break;
      case MpiCommunicator::Op::Broadcast:
        rc = MPI_Ibcast(a, count_of(op.a), mpi_type(op.a.dtype()), op.peer, data, &op.req);
        break;
      case MpiCommunicator::Op::AllGather:
        rc = MPI_Iallgather(b, count_of(op.b), mpi_type(op.b.dtype()), a, count_of(op.b), mpi_type(op.a.dtype()), data,
                            &op.req);
        break;
      case MpiCommunicator::Op::ReduceScatter:
        rc = MPI_Ireduce_scatter_block(b, a, count_of(op.a), mpi_type(op.a.dtype()), mpi_op(st_, op.a.dtype(), op.op),
                                       data, &op.req);
        break;
      case MpiCommunicator::Op::Send:
        rc = MPI_Isend(a, static_cast<int>(op.a.numel() * op.a.itemsize()), MPI_BYTE, op.peer, op.tag, p2p, &op.req);
        break;
      case MpiCommunicator::Op::Recv:
        rc = MPI_Irecv(a, static_cast<int>(op.a.numel() * op.a.itemsize()), MPI_BYTE, op.peer, op.tag, p2p, &op.req);
        break;
      case MpiCommunicator::Op::Barrier:
        rc = MPI_Ibarrier(data, &op.req);
        break;
      case MpiCommunicator::Op::Call:  // blocking, on this thread (setup only: split())
        try {
          op.call();
          op.work->finish();
        } catch (...) {
          op.work->finish(std::current_exception());
        }
        return;
    }
    if (rc != MPI_SUCCESS) {
      op.work->finish(std::make_exception_ptr(Error(op.work->what() + ": MPI failed to start it: " + mpi_error(rc))));
      op.req = MPI_REQUEST_NULL;
    }
  }

  // Tests every active operation once; returns whether any completed.
  bool progress() {
    bool any = false;
    auto& act = st_.active;
    bool shm_turn = true;  // shared-memory all-reduces run one at a time, oldest first
    for (size_t i = 0; i < act.size();) {
      auto& op = *act[i];
      if (op.shm) {
        if (!shm_turn) {
          ++i;
          continue;
        }
        any |= st_.shm->step(*op.shm);
        if (!op.shm->finished) {
          shm_turn = false;
          ++i;
          continue;
        }
        op.work->finish(op.shm->error);
        ++st_.completed;
        act.erase(act.begin() + static_cast<std::ptrdiff_t>(i));
        any = true;
        continue;
      }
      int flag = 1, rc = MPI_SUCCESS;
      MPI_Status status;
      if (op.req != MPI_REQUEST_NULL) rc = MPI_Test(&op.req, &flag, &status);
      if (rc != MPI_SUCCESS) {
        op.work->finish(std::make_exception_ptr(Error(op.work->what() + ": MPI failed: " + mpi_error(rc))));
      } else if (!flag) {
        ++i;
        continue;
      } else if (!op.work->completed()) {
        std::exception_ptr err;
        const int n = op.group >= 0 ? op.group_size : size_;
        if (op.kind == MpiCommunicator::Op::AllReduce && op.op == ReduceOp::Avg) divide(op.a, n);
        if (op.kind == MpiCommunicator::Op::ReduceScatter && op.op == ReduceOp::Avg) divide(op.a, n);
        if (op.kind == MpiCommunicator::Op::Recv) {
          int got = 0;
          MPI_Get_count(&status, MPI_BYTE, &got);
          int64_t want = op.a.numel() * static_cast<int64_t>(op.a.itemsize());
          if (got != want)
            err = std::make_exception_ptr(Error(detail::concat(op.work->what(), ": expected ", want,
                                                               " bytes from rank ", op.peer, ", received ", got)));
        }
        op.work->finish(err);
      }
      if (op.seq >= 0) ++st_.completed;
      act.erase(act.begin() + static_cast<std::ptrdiff_t>(i));
      any = true;
    }
    return any;
  }

  const MpiCommunicator::Op* oldest_collective() const {
    for (const auto& op : st_.active)
      if (op->seq >= 0) return op.get();
    return nullptr;
  }

  void beat(int kind) {
    Status s;
    s.kind = kind;
    s.launched = st_.launched;
    s.completed = st_.completed;
    if (const auto* op = oldest_collective()) {
      s.waiting = 1;
      std::string w = "#" + std::to_string(op->seq) + " " + op->work->what();
      std::strncpy(s.what, w.c_str(), sizeof(s.what) - 1);
    }
    for (int p = 0; p < size_; ++p) {
      if (p == rank_ || (st_.peers[p].left && kind != 2)) continue;  // a leaving rank still hears "gave up"
      MpiCommunicator::State::Pending pend{MPI_REQUEST_NULL, std::make_unique<Status>(s)};
      if (MPI_Isend(pend.buf.get(), sizeof(Status), MPI_BYTE, p, kStatusTag, st_.ctrl, &pend.req) == MPI_SUCCESS)
        st_.sends.push_back(std::move(pend));
    }
    st_.last_beat = Clock::now();
  }

  void drain() {
    for (;;) {
      int flag = 0;
      MPI_Status status;
      if (MPI_Iprobe(MPI_ANY_SOURCE, kStatusTag, st_.ctrl, &flag, &status) != MPI_SUCCESS || !flag) break;
      Status s;
      MPI_Recv(&s, sizeof(Status), MPI_BYTE, status.MPI_SOURCE, kStatusTag, st_.ctrl, MPI_STATUS_IGNORE);
      auto& peer = st_.peers[status.MPI_SOURCE];
      peer.heard = Clock::now();
      peer.status = s;
      if (s.kind >= 1 && !peer.left) {
        peer.left = true;
        peer.left_at = peer.heard;
      }
      if (s.kind == 2) peer.gave_up = true;
    }
    while (!st_.sends.empty()) {
      int flag = 0;
      MPI_Test(&st_.sends.front().req, &flag, MPI_STATUS_IGNORE);
      if (!flag) break;
      st_.sends.pop_front();
    }
  }

  std::string describe_peer(int p) const {
    const auto& peer = st_.peers[p];
    std::string s = "rank " + std::to_string(p) + ": ";
    if (peer.left) s += "has shut its communicator down; ";
    s += "launched " + std::to_string(peer.status.launched) + " collectives, ";
    if (peer.status.waiting)
      s += "waiting on " + std::string(peer.status.what);
    else
      s += "waiting on none (computing, or stopped before launching the next)";
    s += " (heard " + detail::concat(static_cast<int>(seconds_since(peer.heard) * 10) / 10.0) + " s ago)";
    return s;
  }

  [[noreturn]] void give_up(const std::string& why) {
    std::string msg = "ember dist: rank " + std::to_string(rank_) + " of " + std::to_string(size_) + ": " + why;
    if (const auto* op = oldest_collective())
      msg += "\n  this rank was waiting on #" + std::to_string(op->seq) + " " + op->work->what();
    for (const std::string& d : incomplete_device_work()) msg += "\n  this rank was waiting on " + d;
    msg += "\n  exiting with status " + std::to_string(kPeerLostExit) + " instead of hanging\n";
    std::fputs(msg.c_str(), stderr);
    // Tell the others at once (best effort, briefly), so they need not wait for a missed heartbeat.
    beat(2);
    for (auto t0 = Clock::now(); !st_.sends.empty() && seconds_since(t0) < 0.2;) {
      int flag = 0;
      MPI_Test(&st_.sends.front().req, &flag, MPI_STATUS_IGNORE);
      if (flag) st_.sends.pop_front();
    }
    std::fflush(stderr);
    std::fflush(stdout);
    std::_Exit(kPeerLostExit);
  }

  void serve();
  void leave();

  // Stall and dead-peer checks.
  void watch() {
    const auto* op = oldest_collective();
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      const auto& peer = st_.peers[p];
      if (!peer.left && seconds_since(peer.heard) > o_.dead_seconds)
        give_up(detail::concat("rank ", p, " stopped responding: no heartbeat for ",
                               static_cast<int>(seconds_since(peer.heard)), " s from host ", peer.host,
                               " (it crashed, was killed or hangs, or its host is down or unreachable)"));
      if (peer.gave_up && op)
        give_up(detail::concat("rank ", p, " gave up (it lost contact with another rank), so collective #", op->seq,
                               " ", op->work->what(), " cannot complete"));
      if (peer.left && op && peer.status.launched <= op->seq)
        give_up(detail::concat("rank ", p, " shut its communicator down (its program ended or failed) without joining ",
                               "collective #", op->seq, " ", op->work->what()));
    }
    // A transfer with one peer (a pipeline's activations) or a collective of a group cannot
    // complete once one of the ranks it needs has gone. A leaving rank has finished its own sends
    // before it says so, but their data may still be on the way on another communicator than the
    // heartbeat: give it a heartbeat's time to land.
    for (const auto& a : st_.active) {
      for (int p : a->watched) {
        const auto& peer = st_.peers[p];
        if (peer.gave_up)
          give_up(detail::concat("rank ", p, " gave up (it lost contact with another rank), so ", a->work->what(),
                                 " cannot complete"));
        if (peer.left && seconds_since(peer.left_at) > o_.heartbeat_seconds)
          give_up(detail::concat("rank ", p, " shut its communicator down (its program ended or failed) while ",
                                 "this rank waits on ", a->work->what()));
      }
    }
    if (op && op->seq != st_.stall_reported && seconds_since(op->work->started()) > o_.stall_seconds) {
      bool someone_behind = false;
      for (int p = 0; p < size_; ++p)
        if (p != rank_ && st_.peers[p].status.launched <= op->seq) someone_behind = true;
      if (!someone_behind) return;
      std::string msg = detail::concat("ember dist: stall: rank ", rank_, " has waited ",
                                       static_cast<int>(seconds_since(op->work->started())), " s on collective #",
                                       op->seq, " ", op->work->what(), ", which not every rank has launched:");
      for (int p = 0; p < size_; ++p)
        if (p != rank_) msg += "\n  " + describe_peer(p);
      msg += "\n";
      std::fputs(msg.c_str(), stderr);
      st_.stall_reported = op->seq;
    }
  }

 private:
  bool take_work(std::vector<std::unique_ptr<MpiCommunicator::Op>>& fresh);
  void pause(uint32_t seen);

  MpiCommunicator::State& st_;
  const MpiOptions& o_;
  int rank_, size_;
};

}  // namespace

// ---------------------------------------------------------------- the public side
namespace {
constexpr size_t kMaxShmSlot = size_t{1} << 30;
constexpr double kShmSpinSeconds = 200e-6;

// Backs every page of [p, p + n) with memory, or says that it cannot.
bool populate(void* p, size_t n) {
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older kernels answer EINVAL
#endif
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + n + page - 1) / page * page;
  if (madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE) == 0) return true;
  // A kernel without it: touch the pages as before (a full /dev/shm would then end the job).
  return errno == EINVAL;
}
}  // namespace

// A collective over the node's ranks (all of them: the caller checked that the world is one node).
void MpiCommunicator::open_shared_memory() {
  State& st = *st_;
  // Every rank must take the same decision, and slots of the same size. The segment is kept to
  // about 32 MiB however many ranks share it (a container's /dev/shm is often 64 MiB): smaller
  // slots only mean more rounds per tensor.
  unsigned long long slot =
      std::min<unsigned long long>(opts_.shm_slot_bytes, std::max<size_t>(64 << 10, (size_t{32} << 20) / (2 * size_)));
  if (MPI_Allreduce(MPI_IN_PLACE, &slot, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, st.node) != MPI_SUCCESS || slot == 0)
    return;
  const size_t bytes = ShmAllReduce::bytes_needed(size_, slot);
  // Rank 0 allocates the whole segment; the others map it.
  void* mine = nullptr;
  int created = MPI_Win_allocate_shared(static_cast<MPI_Aint>(local_rank_ == 0 ? bytes : 0), 1, MPI_INFO_NULL, st.node,
                                        &mine, &st.shm_win) == MPI_SUCCESS;
  int all_created = created;
  MPI_Allreduce(&created, &all_created, 1, MPI_INT, MPI_MIN, st.node);
  if (!all_created) {
    // Freeing is collective over the window's ranks, and some have none: leave it (MPI errors
    // at this point are rarely survivable anyway).
    st.shm_win = MPI_WIN_NULL;
    return;
  }
  void* base = nullptr;
  MPI_Aint got = 0;
  int disp = 0;
  int ok = MPI_Win_shared_query(st.shm_win, 0, &got, &disp, &base) == MPI_SUCCESS &&
           static_cast<size_t>(got) >= bytes && base != nullptr;
  // The segment may be a file sized without reserving its pages: a full /dev/shm then shows as
  // SIGBUS on first touch. Rank 0 asks the kernel to back every page now, which fails with an
  // error instead, and the ranks go back to MPI.
  if (ok && local_rank_ == 0) ok = populate(base, bytes);
  int all_ok = ok;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, st.node);
  if (!all_ok) {
    MPI_Win_free(&st.shm_win);
    return;
  }
  if (local_rank_ == 0) std::memset(base, 0, bytes);
  MPI_Barrier(st.node);  // zeroed before anyone reads it
  st.shm = std::make_unique<ShmAllReduce>(base, rank_, size_, slot);
}

namespace {

// The communication thread's loop: takes queued operations, starts them, tests the active ones,
// beats and listens to the peers' heartbeats, until the communicator stops and nothing is left.
void Engine::serve() {
  beat(0);
  for (;;) {
    // Read before looking for work: a ring after this makes the doorbell wait below return.
    const uint32_t seen = st_.shm ? st_.shm->doorbell() : 0;
    std::vector<std::unique_ptr<MpiCommunicator::Op>> fresh;
    const bool stop = take_work(fresh);
    for (auto& op : fresh) {
      using Op = MpiCommunicator::Op;
      if (op->kind != Op::Send && op->kind != Op::Recv && op->kind != Op::Call && op->group < 0)
        op->seq = st_.launched++;
      start(*op);
      st_.active.push_back(std::move(op));
    }
    bool moved = progress();
    if (seconds_since(st_.last_beat) >= o_.heartbeat_seconds) {
      drain();
      beat(0);
    }
    drain();
    watch();
    if (stop && st_.active.empty()) {
      std::lock_guard<std::mutex> lk(st_.mu);
      if (st_.queue.empty()) break;
    }
    if (!st_.active.empty() && !moved) pause(seen);
  }
}

// Moves the queued operations to `fresh`, first sleeping while there is nothing to do; returns
// whether the communicator is stopping.
bool Engine::take_work(std::vector<std::unique_ptr<MpiCommunicator::Op>>& fresh) {
  std::unique_lock<std::mutex> lk(st_.mu);
  if (st_.queue.empty() && st_.active.empty() && !st_.stop) {
    // Idle: sleep until work arrives, the next heartbeat is due, or half a heartbeat has
    // passed (to hear the peers). Counting the half heartbeat from the last beat instead, as
    // this once did, made every wait of a period's second half return at once: the idle
    // thread spun, taking up to half of its rank's core from the computation.
    const auto now = Clock::now();
    const auto wake = std::min(now + seconds_as_duration(o_.heartbeat_seconds / 2),
                               st_.last_beat + seconds_as_duration(o_.heartbeat_seconds));
    if (wake > now) st_.cv.wait_until(lk, wake, [&] { return !st_.queue.empty() || st_.stop; });
  }
  st_.loops.fetch_add(1, std::memory_order_relaxed);
  while (!st_.queue.empty()) {
    fresh.push_back(std::move(st_.queue.front()));
    st_.queue.pop_front();
  }
  return st_.stop;
}

// Waits a little while operations are in flight and none moved; `seen` is the doorbell as read
// before this pass looked for work.
void Engine::pause(uint32_t seen) {
  // Non-blocking MPI progresses only inside MPI calls: poll often while work is in flight.
  // While a caller is blocked in wait() its core is idle, so poll back to back (each sleep
  // would add its wake-up latency to every message of the collective); otherwise sleep
  // between polls so that two ranks on two cores leave the cores to backward.
  const bool mpi_in_flight =
      std::any_of(st_.active.begin(), st_.active.end(), [](const auto& op) { return op->req != MPI_REQUEST_NULL; });
  if (!mpi_in_flight && st_.shm) {
    // Only shared-memory work waits: the ranks it waits for ring this rank's doorbell, as
    // does a caller queueing more. Sleep until then, or until the next heartbeat is due.
    // While a caller is blocked in wait() its core is idle: watch the doorbell for a while
    // first, as the MPI path polls back to back then.
    const bool caller_waits = Work::blocked_waiters().load(std::memory_order_relaxed) > 0;
    st_.shm->wait_for_doorbell(seen,
                               std::min(o_.heartbeat_seconds / 2, o_.heartbeat_seconds - seconds_since(st_.last_beat)),
                               caller_waits ? kShmSpinSeconds : 0.0);
  } else if (Work::blocked_waiters().load(std::memory_order_relaxed) > 0) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(40));
  }
}

// Leaving: tell the others, then wait until every rank has left (or is found dead) before
// MPI_Finalize, which would otherwise block on a rank that is still computing.
void Engine::leave() {
  beat(1);
  MPI_Request bar;
  MPI_Ibarrier(st_.ctrl, &bar);
  for (int done = 0; !done;) {
    MPI_Test(&bar, &done, MPI_STATUS_IGNORE);
    drain();
    if (seconds_since(st_.last_beat) >= o_.heartbeat_seconds) beat(1);
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      if (!st_.peers[p].left && seconds_since(st_.peers[p].heard) > o_.dead_seconds)
        give_up(detail::concat("rank ", p, " stopped responding while the job was shutting down (host ",
                               st_.peers[p].host, ")"));
      // It will never join the barrier, and MPI_Finalize could wait for it forever.
      if (st_.peers[p].gave_up)
        give_up(detail::concat("rank ", p, " gave up while this rank was shutting down; leaving without MPI_Finalize"));
    }
    if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  while (!st_.sends.empty()) {
    MPI_Wait(&st_.sends.front().req, MPI_STATUS_IGNORE);
    st_.sends.pop_front();
  }
  // Heartbeats sent after a peer's last drain are still unmatched: receive them.
  drain();
  for (MPI_Op* o : {&st_.half_sum, &st_.half_max, &st_.bf_sum, &st_.bf_max}) MPI_Op_free(o);
  st_.shm.reset();
  if (st_.shm_win != MPI_WIN_NULL) MPI_Win_free(&st_.shm_win);  // every rank is here: it is collective
  for (auto& g : st_.groups) MPI_Comm_free(&g.comm);
  for (MPI_Comm* c : {&st_.data, &st_.ctrl, &st_.p2p, &st_.node}) MPI_Comm_free(c);
  MPI_Finalize();
}

}  // namespace

// Starts MPI on the communication thread: its communicators, this rank's place, the shared-memory
// all-reduce where every rank is on this node, the 16-bit reductions and the peers' table. Returns
// Every rank's hostname, so that a lost rank's report says where it ran (on one machine they are
// all the same; across hosts it tells which host went).
void MpiCommunicator::gather_hosts() {
  constexpr int kLen = 64;
  char mine[kLen] = {};
  if (gethostname(mine, kLen - 1) != 0) std::snprintf(mine, kLen, "(unknown)");
  std::vector<char> all(static_cast<size_t>(kLen) * static_cast<size_t>(size_));
  if (MPI_Allgather(mine, kLen, MPI_CHAR, all.data(), kLen, MPI_CHAR, st_->ctrl) != MPI_SUCCESS) return;
  for (int p = 0; p < size_; ++p)
    st_->peers[p].host.assign(&all[static_cast<size_t>(p) * kLen], strnlen(&all[static_cast<size_t>(p) * kLen], kLen));
}

// the error that stops the communicator, or null.
std::exception_ptr MpiCommunicator::start_mpi() {
  State& st = *st_;
  int provided = 0;
  int inited = 0;
  MPI_Initialized(&inited);
  if (inited) return std::make_exception_ptr(Error("MpiCommunicator: MPI is already initialised in this process"));
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
    return std::make_exception_ptr(Error("MpiCommunicator: MPI_Init_thread failed"));
  // All calls come from this one thread, so FUNNELED would do; SERIALIZED is asked for so that a
  // future second caller (a GPU backend's bootstrap) stays legal.
  thread_level_ = provided;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  // The first collectives: where MPI's transports cannot reach some rank (OpenMPI across hosts
  // with only shared-memory transports, --mca btl self,vader) they fail on some ranks while the
  // others wait for them, before any heartbeat runs. A rank that fails says why and aborts the
  // job, so that the others do not wait forever (a failed communicator would crash the next call).
  for (MPI_Comm* c : {&st.data, &st.ctrl, &st.p2p})
    if (int rc = MPI_Comm_dup(MPI_COMM_WORLD, c); rc != MPI_SUCCESS) {
      std::fprintf(stderr,
                   "ember dist: MPI cannot connect the ranks (MPI_Comm_dup: %s); check that an MPI transport reaches "
                   "every host (OpenMPI: --mca btl); aborting the job\n",
                   mpi_error(rc).c_str());
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 1);
      return std::make_exception_ptr(Error("MpiCommunicator: MPI cannot connect the ranks"));  // if MPI_Abort returns
    }
  for (MPI_Comm c : {st.data, st.ctrl, st.p2p}) MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &st.node);
  MPI_Comm_set_errhandler(st.node, MPI_ERRORS_RETURN);
  MPI_Comm_rank(st.node, &local_rank_);
  MPI_Comm_size(st.node, &local_size_);
  if (size_ > 1 && local_size_ == size_) open_shared_memory();
  if (const char* lr = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK")) local_rank_ = std::atoi(lr);
  MPI_Op_create(&half_op<Half, false>, 1, &st.half_sum);
  MPI_Op_create(&half_op<Half, true>, 1, &st.half_max);
  MPI_Op_create(&half_op<BFloat16, false>, 1, &st.bf_sum);
  MPI_Op_create(&half_op<BFloat16, true>, 1, &st.bf_max);
  st.peers.resize(static_cast<size_t>(size_));
  gather_hosts();
  for (auto& p : st.peers) p.heard = Clock::now();
  return nullptr;
}

MpiCommunicator::MpiCommunicator(MpiOptions opts) : opts_(opts), st_(std::make_unique<State>()) {
  EMBER_CHECK(opts.heartbeat_seconds > 0 && opts.stall_seconds > 0 && opts.dead_seconds > opts.heartbeat_seconds,
              "MpiOptions: expected positive heartbeat and stall times and dead_seconds > heartbeat_seconds");
  if (const char* v = std::getenv("EMBER_MPI_SHM_SLOT_BYTES")) {
    std::string s = v;
    unsigned long long n = s.empty() || s.find_first_not_of("0123456789") != std::string::npos
                               ? kMaxShmSlot + 1
                               : std::strtoull(s.c_str(), nullptr, 10);  // saturates: too many digits is too big
    EMBER_CHECK(n <= kMaxShmSlot, "EMBER_MPI_SHM_SLOT_BYTES: expected a number of bytes in [0, ", kMaxShmSlot,
                "] (0 keeps all_reduce on MPI), got '", s, "'");
    opts_.shm_slot_bytes = n;
  }
  EMBER_CHECK(opts_.shm_slot_bytes <= kMaxShmSlot, "MpiOptions: shm_slot_bytes must be at most ", kMaxShmSlot, ", got ",
              opts_.shm_slot_bytes);
  bool expected = false;
  EMBER_CHECK(g_mpi_in_use.compare_exchange_strong(expected, true),
              "MpiCommunicator: one per process (MPI can be initialised only once); share the first one");
  std::promise<void> ready;
  auto ready_future = ready.get_future();
  thread_ = std::thread([this, &ready] {
    if (std::exception_ptr failed = start_mpi()) {
      ready.set_exception(failed);
      return;
    }
    ready.set_value();
    Engine eng(*st_, opts_, rank_, size_);
    eng.serve();
    eng.leave();
  });
  try {
    ready_future.get();
  } catch (...) {
    thread_.join();
    g_mpi_in_use = false;
    throw;
  }
}

bool MpiCommunicator::shared_memory_all_reduce() const {
  return st_->shm != nullptr;
}

uint64_t MpiCommunicator::progress_loops() const {
  return st_->loops.load(std::memory_order_relaxed);
}

double MpiCommunicator::thread_cpu_seconds() const {
  clockid_t id;
  timespec ts{};
  if (pthread_getcpuclockid(const_cast<std::thread&>(thread_).native_handle(), &id) != 0 || clock_gettime(id, &ts) != 0)
    return 0;
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

MpiCommunicator::~MpiCommunicator() {
  {
    std::lock_guard<std::mutex> lk(st_->mu);
    st_->stop = true;
  }
  st_->cv.notify_all();
  if (thread_.joinable()) thread_.join();
}

WorkPtr MpiCommunicator::enqueue(std::unique_ptr<Op> op) {
  WorkPtr w = op->work;
  {
    std::lock_guard<std::mutex> lk(st_->mu);
    EMBER_CHECK(!st_->stop, "MpiCommunicator: ", w->what(), " issued after shutdown began");
    st_->queue.push_back(std::move(op));
  }
  st_->cv.notify_all();
  if (st_->shm) st_->shm->ring_self();
  return w;
}

namespace {
void check_count(const Tensor& t, const char* what) {
  EMBER_CHECK(t.numel() <= INT_MAX / 8, what, ": ", t.numel(), " elements is more than one MPI call moves (",
              INT_MAX / 8, "); split the tensor");
}
std::unique_ptr<MpiCommunicator::Op> make_op(MpiCommunicator::Op::Kind k, std::string what) {
  auto op = std::make_unique<MpiCommunicator::Op>();
  op->kind = k;
  op->work = std::make_shared<Work>(std::move(what));
  return op;
}
}  // namespace

// The world and the groups split from it issue operations through the same builders: `v` says
// which ranks an operation runs over (and, for a group, which world ranks it cannot do without).
struct MpiView {
  int rank, size;
  int group;                            // -1: the world
  const std::vector<int>* world_ranks;  // a group's members, by group rank
};

namespace {

std::unique_ptr<MpiCommunicator::Op> in_view(std::unique_ptr<MpiCommunicator::Op> o, const MpiView& v) {
  if (v.group >= 0) {
    o->group = v.group;
    o->group_size = v.size;
    if (o->kind == MpiCommunicator::Op::Send || o->kind == MpiCommunicator::Op::Recv) {
      o->watched = {(*v.world_ranks)[o->peer]};
    } else {
      for (int r = 0; r < v.size; ++r)
        if (r != v.rank) o->watched.push_back((*v.world_ranks)[r]);
    }
  } else if (o->kind == MpiCommunicator::Op::Send || o->kind == MpiCommunicator::Op::Recv) {
    o->watched = {o->peer};
  }
  return o;
}

void check_peer_in(const MpiView& v, int peer, const char* what) {
  EMBER_CHECK(peer >= 0 && peer < v.size && peer != v.rank, what, ": expected another rank in [0, ", v.size,
              ") (not this rank, ", v.rank, "), got ", peer);
}

std::unique_ptr<MpiCommunicator::Op> all_reduce_op(const MpiView& v, Tensor t, ReduceOp op, const std::string& label) {
  check_tensor(t, "all_reduce", Device::cpu());
  check_reducible(t, op, "all_reduce");
  check_count(t, "all_reduce");
  auto o = make_op(MpiCommunicator::Op::AllReduce, describe("all_reduce", t, label, reduce_op_name(op)));
  o->a = t;
  o->op = op;
  return in_view(std::move(o), v);
}

std::unique_ptr<MpiCommunicator::Op> broadcast_op(const MpiView& v, Tensor t, int root, const std::string& label) {
  check_tensor(t, "broadcast", Device::cpu());
  check_count(t, "broadcast");
  EMBER_CHECK(root >= 0 && root < v.size, "broadcast: root must be a rank in [0, ", v.size, "), got ", root);
  auto o = make_op(MpiCommunicator::Op::Broadcast,
                   describe("broadcast", t, label, ("from " + std::to_string(root)).c_str()));
  o->a = t;
  o->peer = root;
  return in_view(std::move(o), v);
}

std::unique_ptr<MpiCommunicator::Op> all_gather_op(const MpiView& v, Tensor out, Tensor in, const std::string& label) {
  check_tensor(out, "all_gather output", Device::cpu());
  check_tensor(in, "all_gather input", Device::cpu());
  check_count(out, "all_gather");
  EMBER_CHECK(out.dtype() == in.dtype(), "all_gather: output dtype ", dtype_name(out.dtype()),
              " differs from input dtype ", dtype_name(in.dtype()));
  EMBER_CHECK(out.numel() == in.numel() * v.size,
              "all_gather: the output needs size() * input elements = ", in.numel() * v.size, ", got ", out.numel());
  auto o = make_op(MpiCommunicator::Op::AllGather, describe("all_gather", in, label));
  o->a = out;
  o->b = in;
  return in_view(std::move(o), v);
}

std::unique_ptr<MpiCommunicator::Op> reduce_scatter_op(const MpiView& v, Tensor out, Tensor in, ReduceOp op,
                                                       const std::string& label) {
  check_tensor(out, "reduce_scatter output", Device::cpu());
  check_tensor(in, "reduce_scatter input", Device::cpu());
  check_reducible(in, op, "reduce_scatter");
  check_count(in, "reduce_scatter");
  EMBER_CHECK(out.dtype() == in.dtype(), "reduce_scatter: output dtype ", dtype_name(out.dtype()),
              " differs from input dtype ", dtype_name(in.dtype()));
  EMBER_CHECK(in.numel() == out.numel() * v.size,
              "reduce_scatter: the input needs size() * output elements = ", out.numel() * v.size, ", got ",
              in.numel());
  EMBER_CHECK(!out.storage() || !in.storage() || out.storage() != in.storage(),
              "reduce_scatter: input and output must not share memory");
  auto o = make_op(MpiCommunicator::Op::ReduceScatter, describe("reduce_scatter", in, label, reduce_op_name(op)));
  o->a = out;
  o->b = in;
  o->op = op;
  return in_view(std::move(o), v);
}

std::unique_ptr<MpiCommunicator::Op> p2p_op(const MpiView& v, MpiCommunicator::Op::Kind kind, Tensor t, int peer,
                                            int tag) {
  const char* what = kind == MpiCommunicator::Op::Send ? "send" : "recv";
  check_tensor(t, what, Device::cpu());
  check_count(t, what);
  check_peer_in(v, peer, what);
  EMBER_CHECK(tag >= 0 && tag < 32767, what, ": tag must be in [0, 32767), got ", tag);
  auto o = make_op(
      kind,
      describe(what, t, "", ((kind == MpiCommunicator::Op::Send ? "to " : "from ") + std::to_string(peer)).c_str()));
  o->a = t;
  o->peer = peer;
  o->tag = tag;
  return in_view(std::move(o), v);
}

}  // namespace

MpiView MpiCommunicator::world_view() const {
  return {rank_, size_, -1, nullptr};
}

WorkPtr MpiCommunicator::all_reduce(Tensor t, ReduceOp op, std::string label) {
  return enqueue(all_reduce_op(world_view(), std::move(t), op, label));
}
WorkPtr MpiCommunicator::broadcast(Tensor t, int root, std::string label) {
  return enqueue(broadcast_op(world_view(), std::move(t), root, label));
}
WorkPtr MpiCommunicator::all_gather(Tensor out, Tensor in, std::string label) {
  return enqueue(all_gather_op(world_view(), std::move(out), std::move(in), label));
}
WorkPtr MpiCommunicator::reduce_scatter(Tensor out, Tensor in, ReduceOp op, std::string label) {
  return enqueue(reduce_scatter_op(world_view(), std::move(out), std::move(in), op, label));
}
WorkPtr MpiCommunicator::send(Tensor t, int dst, int tag) {
  return enqueue(p2p_op(world_view(), Op::Send, std::move(t), dst, tag));
}
WorkPtr MpiCommunicator::recv(Tensor t, int src, int tag) {
  return enqueue(p2p_op(world_view(), Op::Recv, std::move(t), src, tag));
}
WorkPtr MpiCommunicator::barrier(std::string label) {
  return enqueue(make_op(Op::Barrier, describe("barrier", Tensor(), label)));
}

// A communicator over some of the world's ranks. Its operations go through the world's
// communication thread on their own MPI communicator; its collectives are not part of the world's
// collective sequence (the other groups do not see them), so stall reports do not cover them, but
// a member that dies or leaves still ends the wait.
class MpiGroupCommunicator final : public Communicator {
 public:
  MpiGroupCommunicator(MpiCommunicator& world, int group, int rank, std::vector<int> world_ranks)
      : world_(world), group_(group), rank_(rank), world_ranks_(std::move(world_ranks)) {}

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(world_ranks_.size()); }
  int local_rank() const override { return world_.local_rank(); }
  int local_size() const override { return world_.local_size(); }
  std::string backend() const override { return "mpi"; }

  WorkPtr all_reduce(Tensor t, ReduceOp op, std::string label) override {
    return world_.enqueue(all_reduce_op(view(), std::move(t), op, label));
  }
  WorkPtr broadcast(Tensor t, int root, std::string label) override {
    return world_.enqueue(broadcast_op(view(), std::move(t), root, label));
  }
  WorkPtr all_gather(Tensor out, Tensor in, std::string label) override {
    return world_.enqueue(all_gather_op(view(), std::move(out), std::move(in), label));
  }
  WorkPtr reduce_scatter(Tensor out, Tensor in, ReduceOp op, std::string label) override {
    return world_.enqueue(reduce_scatter_op(view(), std::move(out), std::move(in), op, label));
  }
  WorkPtr send(Tensor t, int dst, int tag) override {
    return world_.enqueue(p2p_op(view(), MpiCommunicator::Op::Send, std::move(t), dst, tag));
  }
  WorkPtr recv(Tensor t, int src, int tag) override {
    return world_.enqueue(p2p_op(view(), MpiCommunicator::Op::Recv, std::move(t), src, tag));
  }
  WorkPtr barrier(std::string label) override {
    return world_.enqueue(in_view(make_op(MpiCommunicator::Op::Barrier, describe("barrier", Tensor(), label)), view()));
  }
  std::unique_ptr<Communicator> split(int, int) override {
    EMBER_FAIL("split: split the world communicator, not a group split from it");
  }

 private:
  MpiView view() const { return {rank_, size(), group_, &world_ranks_}; }
  MpiCommunicator& world_;
  int group_, rank_;
  std::vector<int> world_ranks_;
};

std::unique_ptr<Communicator> MpiCommunicator::split(int color, int key) {
  EMBER_CHECK(color >= 0, "split: expected a colour >= 0, got ", color);
  struct Result {
    int group = -1, rank = 0;
    std::vector<int> world_ranks;
  };
  auto res = std::make_shared<Result>();
  State* st = st_.get();
  auto o = make_op(Op::Call, detail::concat("split (colour ", color, ", key ", key, ")"));
  o->call = [st, res, color, key] {
    MPI_Comm c = MPI_COMM_NULL;
    EMBER_CHECK(MPI_Comm_split(MPI_COMM_WORLD, color, key, &c) == MPI_SUCCESS, "split: MPI_Comm_split failed");
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    int n = 0;
    MPI_Comm_rank(c, &res->rank);
    MPI_Comm_size(c, &n);
    MPI_Group world_group, group;
    MPI_Comm_group(MPI_COMM_WORLD, &world_group);
    MPI_Comm_group(c, &group);
    std::vector<int> in(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) in[static_cast<size_t>(i)] = i;
    res->world_ranks.resize(static_cast<size_t>(n));
    MPI_Group_translate_ranks(group, n, in.data(), world_group, res->world_ranks.data());
    MPI_Group_free(&group);
    MPI_Group_free(&world_group);
    st->groups.push_back({c, res->world_ranks});
    res->group = static_cast<int>(st->groups.size()) - 1;
  };
  enqueue(std::move(o))->wait();
  return std::make_unique<MpiGroupCommunicator>(*this, res->group, res->rank, std::move(res->world_ranks));
}

}  // namespace ember::dist
