// The kernel emulator's scheduler: runs every CUDA thread of a block as a Boost.Context fiber on
// the calling host thread, one block after another. A fiber runs until it reaches a switch point
// (__syncthreads or a _sync warp collective) or returns; the scheduler resumes the runnable fibers
// in the configured order, completes a warp collective when the last lane of its mask arrives,
// releases a barrier when every thread that has not exited waits at it, and reports (as
// ember::Error, never a hang) a barrier reached from two call sites and a collective whose lanes
// can no longer arrive. Under AddressSanitizer every switch is announced to ASan so that it
// follows the fiber stacks.
#include "core/cuda/emu/emu.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <boost/context/fiber.hpp>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/cuda/emu/profile.h"
#include "core/sanitizers.h"
#if EMBER_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

namespace ember::emu {

namespace ctx = boost::context;

const char* thread_order_name(ThreadOrder order) {
  switch (order) {
    case ThreadOrder::Forward:
      return "forward";
    case ThreadOrder::Reverse:
      return "reverse";
    case ThreadOrder::Random:
      return "random";
  }
  return "?";
}

Options& options() {
  thread_local Options o;
  return o;
}

void set_thread_order(ThreadOrder order, uint64_t seed) {
  options().order = order;
  options().seed = seed;
}

Stats& stats() {
  thread_local Stats s;
  return s;
}

namespace detail {

thread_local uint3 tls_thread_idx{0, 0, 0};
thread_local uint3 tls_block_idx{0, 0, 0};
thread_local dim3 tls_block_dim{1, 1, 1};
thread_local dim3 tls_grid_dim{1, 1, 1};

namespace {

constexpr unsigned char kPoison = 0xFF;

std::string where_str(const SourceLocation& w) {
  std::string f = w.file_name();
  return f + ":" + std::to_string(w.line());
}

// Fiber stacks: mmap'ed once per host thread and reused by every block, each with a PROT_NONE
// guard page below it so that a stack overflow faults instead of corrupting a neighbour.
class StackPool {
 public:
  explicit StackPool(size_t bytes) : page_(static_cast<size_t>(sysconf(_SC_PAGESIZE))) {
    size_ = (bytes + page_ - 1) / page_ * page_;
  }
  ~StackPool() {
    for (const ctx::stack_context& sc : free_) munmap(static_cast<char*>(sc.sp) - sc.size - page_, sc.size + page_);
  }
  StackPool(const StackPool&) = delete;
  StackPool& operator=(const StackPool&) = delete;
  size_t size() const { return size_; }

  ctx::stack_context allocate() {
    if (!free_.empty()) {
      ctx::stack_context sc = free_.back();
      free_.pop_back();
#if EMBER_ASAN
      ASAN_UNPOISON_MEMORY_REGION(static_cast<char*>(sc.sp) - sc.size, sc.size);
#endif
      return sc;
    }
    void* base = mmap(nullptr, size_ + page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EMBER_CHECK(base != MAP_FAILED, "kernel emulation: cannot map a fiber stack of ", size_, " bytes");
    EMBER_CHECK(mprotect(base, page_, PROT_NONE) == 0, "kernel emulation: cannot protect a fiber stack's guard page");
    ctx::stack_context sc;
    sc.size = size_;
    sc.sp = static_cast<char*>(base) + page_ + size_;
    return sc;
  }
  void deallocate(ctx::stack_context& sc) {
    free_.push_back(sc);
  }

 private:
  size_t page_;
  size_t size_;
  std::vector<ctx::stack_context> free_;
};

// Hands out pooled stacks and tells the thread where its stack lies (ASan needs the bounds).
template <typename T>
struct PoolAllocator {
  StackPool* pool;
  T* thread;
  ctx::stack_context allocate() {
    ctx::stack_context sc = pool->allocate();
    thread->stack_bottom = static_cast<char*>(sc.sp) - sc.size;
    thread->stack_size = sc.size;
    return sc;
  }
  void deallocate(ctx::stack_context& sc) { pool->deallocate(sc); }
};

// Unwinds a fiber that must not continue (another thread of its block found an error).
struct AbortFiber {};

enum class State { Runnable, Barrier, Collective, Exited };

struct Thread {
  uint3 idx{};
  unsigned lane = 0, warp = 0;
  State state = State::Runnable;
  ctx::fiber fiber;  // this thread's context while it is suspended
  ctx::fiber sched;  // the scheduler's context while this thread runs
  SourceLocation where;
  int predicate = 0;  // barrier
  // collective
  Collective op = Collective::Shfl;
  unsigned mask = 0;
  int arg = 0, width = 32;
  alignas(16) unsigned char value[16] = {};
  alignas(16) unsigned char result[16] = {};
  size_t size = 0;
  int barrier_result = 0;
  void* stack_bottom = nullptr;
  size_t stack_size = 0;
  bool quit = false;  // set when the pool is torn down: the fiber returns instead of waiting
#if EMBER_ASAN
  void* fake_stack = nullptr;
  const void* sched_bottom = nullptr;
  size_t sched_size = 0;
#endif
};

struct SharedVar {
  const void* tag;
  const char* file;
  unsigned line, column;
  void* ptr;
};

// The block's threads: the first n of the host thread's fiber pool (a deque: stable addresses).
struct ThreadSpan {
  std::deque<Thread>* pool = nullptr;
  size_t n = 0;
  size_t size() const { return n; }
  Thread& operator[](size_t i) const { return (*pool)[i]; }
  std::deque<Thread>::iterator begin() const { return pool->begin(); }
  std::deque<Thread>::iterator end() const { return pool->begin() + static_cast<std::ptrdiff_t>(n); }
};

struct Block {
  ThreadSpan threads;
  const std::function<void()>* body = nullptr;
  std::vector<int> order;
  Thread* current = nullptr;
  bool aborting = false;
  std::exception_ptr error;
  std::vector<SharedVar> shared;
  std::unique_ptr<unsigned char[]> dynamic;
  size_t dynamic_bytes = 0;
  ~Block() {
    for (SharedVar& v : shared) ::operator delete (v.ptr, std::align_val_t{16});
  }
};

thread_local Block* tls_block = nullptr;

Block& block() {
  EMBER_CHECK(tls_block && tls_block->current,
              "kernel emulation: a device function (barrier, shuffle, shared memory) was called outside a kernel");
  return *tls_block;
}

// Switches from the running fiber back to the scheduler and, once resumed, checks whether the
// block is being torn down.
void switch_to_scheduler(Thread& t) {
#if EMBER_ASAN
  __sanitizer_start_switch_fiber(&t.fake_stack, t.sched_bottom, t.sched_size);
#endif
  t.sched = std::move(t.sched).resume();
#if EMBER_ASAN
  __sanitizer_finish_switch_fiber(t.fake_stack, &t.sched_bottom, &t.sched_size);
#endif
}

void yield_to_scheduler(Block& b) {
  ++stats().switches;
  profile::detail::fiber_switch();
  switch_to_scheduler(*b.current);
  if (b.aborting) throw AbortFiber{};
}

std::string lane_list(unsigned m) {
  std::string s;
  for (unsigned l = 0; l < 32; ++l) {
    if (m & (1u << l)) s += (s.empty() ? "" : ",") + std::to_string(l);
  }
  return s;
}

const char* collective_name(Collective op) {
  switch (op) {
    case Collective::Shfl:
      return "__shfl_sync";
    case Collective::ShflUp:
      return "__shfl_up_sync";
    case Collective::ShflDown:
      return "__shfl_down_sync";
    case Collective::ShflXor:
      return "__shfl_xor_sync";
    case Collective::Ballot:
      return "__ballot_sync";
    case Collective::Any:
      return "__any_sync";
    case Collective::All:
      return "__all_sync";
    case Collective::SyncWarp:
      return "__syncwarp";
  }
  return "?";
}

std::string describe_thread(const Thread& t) {
  std::ostringstream os;
  os << "thread (" << t.idx.x << "," << t.idx.y << "," << t.idx.z << ") of block (" << tls_block_idx.x << ","
     << tls_block_idx.y << "," << tls_block_idx.z << ")";
  return os.str();
}

std::string describe_state(const Thread& t) {
  switch (t.state) {
    case State::Exited:
      return "has exited";
    case State::Barrier:
      return "waits at __syncthreads at " + where_str(t.where);
    case State::Collective:
      return std::string("waits at ") + collective_name(t.op) + " with mask " + lane_list(t.mask) + " at " +
             where_str(t.where);
    case State::Runnable:
      return "is running";
  }
  return "?";
}

// Completes the collective of warp `w` when every lane of the arriving thread's mask waits at it.
void try_complete_collective(Block& b, const Thread& arrived) {
  const unsigned base = arrived.warp * 32;
  const unsigned mask = arrived.mask;
  Thread* lanes[32] = {};
  for (unsigned l = 0; l < 32; ++l) {
    if (!(mask & (1u << l))) continue;
    const unsigned tid = base + l;
    if (tid >= b.threads.size()) return;  // reported when the block stalls
    Thread& t = b.threads[tid];
    if (t.state != State::Collective) return;
    lanes[l] = &t;
  }
  for (unsigned l = 0; l < 32; ++l) {
    Thread* t = lanes[l];
    if (!t) continue;
    EMBER_CHECK(t->op == arrived.op && t->mask == mask, "kernel emulation: warp ", arrived.warp, " of block (",
                tls_block_idx.x, ",", tls_block_idx.y, ",", tls_block_idx.z, "): lane ", l, " is at ",
                collective_name(t->op), " with mask ", lane_list(t->mask), " at ", where_str(t->where), " while lane ",
                arrived.lane, " is at ", collective_name(arrived.op), " with mask ", lane_list(mask), " at ",
                where_str(arrived.where));
  }
  unsigned votes = 0;  // the lanes whose predicate (deposited as a 4-byte word) is nonzero
  for (unsigned l = 0; l < 32; ++l) {
    unsigned p = 0;
    if (lanes[l]) std::memcpy(&p, lanes[l]->value, sizeof p);
    if (p) votes |= 1u << l;
  }
  for (unsigned l = 0; l < 32; ++l) {
    Thread* t = lanes[l];
    if (!t) continue;
    std::memset(t->result, 0, sizeof t->result);
    unsigned word = 0;
    switch (t->op) {
      case Collective::Ballot:
        word = votes;
        break;
      case Collective::Any:
        word = votes != 0;
        break;
      case Collective::All:
        word = votes == mask;
        break;
      case Collective::SyncWarp:
        break;
      default: {
        const int w = t->width;
        EMBER_CHECK(w >= 1 && w <= 32 && (w & (w - 1)) == 0, "kernel emulation: ", collective_name(t->op), " at ",
                    where_str(t->where), ": width ", w, " is not a power of two in [1, 32]");
        const int lane = static_cast<int>(l), seg = lane & ~(w - 1);
        int src = lane;
        if (t->op == Collective::Shfl) {
          src = seg + (t->arg & (w - 1));
        } else if (t->op == Collective::ShflUp) {
          if ((lane & (w - 1)) >= t->arg) src = lane - t->arg;
        } else if (t->op == Collective::ShflDown) {
          if ((lane & (w - 1)) + t->arg < w) src = lane + t->arg;
        } else {
          const int s = lane ^ t->arg;
          if (s < seg + w) src = s;  // later groups are out of reach: own value
        }
        EMBER_CHECK(src >= 0 && src < 32 && lanes[src], "kernel emulation: ", collective_name(t->op), " at ",
                    where_str(t->where), ": lane ", l, " of warp ", arrived.warp, " reads lane ", src,
                    ", which is not in the mask ", lane_list(mask), " (undefined on a GPU)");
        std::memcpy(t->result, lanes[src]->value, sizeof t->result);
        break;
      }
    }
    if (t->op == Collective::Ballot || t->op == Collective::Any || t->op == Collective::All)
      std::memcpy(t->result, &word, sizeof word);
  }
  for (Thread* t : lanes) {
    if (t) t->state = State::Runnable;
  }
}

// Called when no thread can run: releases the barrier or reports why the block is stuck.
void resolve_stall(Block& b) {
  const Thread* at_barrier = nullptr;
  for (const Thread& t : b.threads) {
    if (t.state == State::Collective) {
      // A collective still waiting now has a lane that will never arrive.
      for (unsigned l = 0; l < 32; ++l) {
        if (!(t.mask & (1u << l))) continue;
        const unsigned tid = t.warp * 32 + l;
        if (tid >= b.threads.size()) {
          EMBER_FAIL("kernel emulation: ", collective_name(t.op), " at ", where_str(t.where), " in ",
                     describe_thread(t), ": mask ", lane_list(t.mask), " names lane ", l,
                     ", which does not exist (the block has ", b.threads.size(), " threads)");
        }
        const Thread& other = b.threads[tid];
        if (other.state != State::Collective) {
          EMBER_FAIL("kernel emulation: ", collective_name(t.op), " at ", where_str(t.where), " in ",
                     describe_thread(t), " waits for lane ", l, " of its mask ", lane_list(t.mask),
                     ", which never arrives: it ", describe_state(other));
        }
      }
    }
    if (t.state == State::Barrier && !at_barrier) at_barrier = &t;
  }
  EMBER_CHECK(at_barrier, "kernel emulation: block stalled with no thread at a barrier");  // unreachable
  for (const Thread& t : b.threads) {
    if (t.state == State::Barrier &&
        (t.where.line() != at_barrier->where.line() || std::strcmp(t.where.file_name(), at_barrier->where.file_name())))
      EMBER_FAIL("kernel emulation: divergent __syncthreads: ", describe_thread(*at_barrier), " waits at ",
                 where_str(at_barrier->where), " while ", describe_thread(t), " waits at ", where_str(t.where),
                 " (a barrier must be reached by every thread of the block from the same call site)");
  }
  int count = 0;
  for (const Thread& t : b.threads) count += t.state == State::Barrier && t.predicate != 0;
  for (Thread& t : b.threads) {
    if (t.state == State::Barrier) {
      t.barrier_result = count;
      t.state = State::Runnable;
    }
  }
}

void resume(Block& b, Thread& t) {
  b.current = &t;
  tls_thread_idx = t.idx;
#if EMBER_ASAN
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, t.stack_bottom, t.stack_size);
#endif
  t.fiber = std::move(t.fiber).resume();
#if EMBER_ASAN
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
  b.current = nullptr;
}

void make_order(Block& b, std::mt19937_64& rng) {
  const ThreadOrder order = options().order;
  if (order == ThreadOrder::Random) {
    std::iota(b.order.begin(), b.order.end(), 0);
    std::shuffle(b.order.begin(), b.order.end(), rng);
  } else if (order == ThreadOrder::Reverse) {
    std::iota(b.order.rbegin(), b.order.rend(), 0);
  } else {
    std::iota(b.order.begin(), b.order.end(), 0);
  }
}

// Every CUDA thread of a block is a fiber from this host thread's pool. Fibers outlive blocks
// and launches: a fiber runs the kernel body once per block it is given and then waits at the
// bottom of its loop. Creating a fiber costs a stack and, under AddressSanitizer, a fake stack of
// megabytes; reusing them keeps the emulated suite fast there too.
class FiberPool {
 public:
  ~FiberPool() { clear(); }

  // The first n threads, fibers created as needed, all with stacks of `stack_bytes`.
  ThreadSpan get(size_t n, size_t stack_bytes) {
    if (stacks_ && stacks_->size() != StackPool(stack_bytes).size()) clear();
    if (!stacks_) stacks_ = std::make_unique<StackPool>(stack_bytes);
    while (threads_.size() < n) {
      threads_.emplace_back();
      Thread* tp = &threads_.back();
      tp->fiber = ctx::fiber(std::allocator_arg, PoolAllocator<Thread>{stacks_.get(), tp}, [tp](ctx::fiber&& sched) {
#if EMBER_ASAN
        __sanitizer_finish_switch_fiber(nullptr, &tp->sched_bottom, &tp->sched_size);
#endif
        tp->sched = std::move(sched);
        while (!tp->quit) {
          Block* b = tls_block;
          try {
            if (!b->aborting) (*b->body)();
          } catch (const AbortFiber&) {
          } catch (...) {
            if (!b->error) b->error = std::current_exception();
            b->aborting = true;
          }
          profile::detail::fiber_switch();
          tp->state = State::Exited;
          switch_to_scheduler(*tp);  // wait for the next block (or quit)
        }
        return std::move(tp->sched);  // only without ASan: see clear()
      });
    }
    return {&threads_, n};
  }

 private:
  // Lets every fiber return normally (no forced unwinding through a foreign stack). Under
  // AddressSanitizer fibers are parked instead, suspended for good in a list that is never freed
  // (reachable, so no leak report): Boost's entry frames of a fiber are laid out before the fiber
  // can announce its stack to ASan, so ASan places them on the scheduler's fake stack, and a
  // fiber that returns would write to them after they are gone.
  void clear() {
#if EMBER_ASAN
    static auto* parked = new std::vector<ctx::fiber>();
    for (Thread& t : threads_)
      if (t.fiber) parked->push_back(std::move(t.fiber));
#else
    for (Thread& t : threads_) {
      if (!t.fiber) continue;
      t.quit = true;
      t.fiber = std::move(t.fiber).resume();
    }
#endif
    threads_.clear();
    stacks_.reset();
  }

  std::unique_ptr<StackPool> stacks_;
  std::deque<Thread> threads_;
};

FiberPool& fiber_pool() {
  thread_local FiberPool pool;
  return pool;
}

void run_block(Block& b, std::mt19937_64& rng) {
  const dim3 bd = tls_block_dim;
  const unsigned n = bd.x * bd.y * bd.z;
  b.order.assign(n, 0);
  for (unsigned i = 0; i < n; ++i) {
    Thread& t = b.threads[i];
    t.idx = {i % bd.x, (i / bd.x) % bd.y, i / (bd.x * bd.y)};
    t.lane = i % 32;
    t.warp = i / 32;
    t.state = State::Runnable;
    t.barrier_result = 0;
  }
  for (;;) {
    make_order(b, rng);
    bool ran = false;
    for (int i : b.order) {
      Thread& t = b.threads[i];
      if (t.state != State::Runnable) continue;
      ran = true;
      resume(b, t);
      if (b.aborting) break;
    }
    if (b.aborting) break;
    bool all_exited = true;
    for (const Thread& t : b.threads) all_exited &= t.state == State::Exited;
    if (all_exited) break;
    if (!ran) {
      try {
        resolve_stall(b);
      } catch (...) {
        b.error = std::current_exception();
        b.aborting = true;
        break;
      }
    }
  }
  if (b.aborting) {
    // Unwind every suspended fiber through its own stack (destructors run, ASan stays informed).
    for (Thread& t : b.threads) {
      if (t.state != State::Exited) resume(b, t);
    }
    std::rethrow_exception(b.error);
  }
}

}  // namespace

void warp_collective(Collective op, unsigned mask, int arg, int width, void* value, size_t size,
                     const SourceLocation& where) {
  Block& b = block();
  Thread& t = *b.current;
  EMBER_CHECK(mask & (1u << t.lane), "kernel emulation: ", collective_name(op), " at ", where_str(where), " in ",
              describe_thread(t), ": the mask ", lane_list(mask), " does not name the calling lane ", t.lane);
  t.state = State::Collective;
  t.op = op;
  t.mask = mask;
  t.arg = arg;
  t.width = width;
  t.where = where;
  t.size = size;
  std::memcpy(t.value, value, 16);
  try_complete_collective(b, t);
  // Even when this lane completed the collective it yields, so that the others may run first.
  yield_to_scheduler(b);
  std::memcpy(value, t.result, 16);
}

int block_barrier(int predicate, const SourceLocation& where) {
  Block& b = block();
  Thread& t = *b.current;
  t.state = State::Barrier;
  t.where = where;
  t.predicate = predicate;
  yield_to_scheduler(b);
  return t.barrier_result;
}

void* static_shared(const void* type_tag, size_t bytes, size_t align, const SourceLocation& where) {
  Block& b = block();
  for (const SharedVar& v : b.shared) {
    if (v.tag == type_tag && v.line == where.line() && v.column == where.column() &&
        std::strcmp(v.file, where.file_name()) == 0)
      return v.ptr;
  }
  void* p = ::operator new (bytes, std::align_val_t{std::max<size_t>(align, 16)});
  std::memset(p, kPoison, bytes);
  profile::detail::shared_allocated(p, bytes, true);
  b.shared.push_back({type_tag, where.file_name(), where.line(), where.column(), p});
  return p;
}

void* dynamic_shared() {
  Block& b = block();
  return b.dynamic.get();
}

}  // namespace detail

void run_grid(dim3 grid, dim3 block_dim, size_t dynamic_shared_bytes, const std::function<void()>& body,
              const void* kernel) {
  using namespace detail;
  const uint64_t threads = uint64_t{block_dim.x} * block_dim.y * block_dim.z;
  EMBER_CHECK(threads >= 1 && threads <= 1024 && block_dim.z <= 64,
              "kernel launch: a block must have 1 to 1024 threads (z at most 64), got (", block_dim.x, ",", block_dim.y,
              ",", block_dim.z, ")");
  EMBER_CHECK(grid.x >= 1 && grid.y >= 1 && grid.z >= 1 && grid.y <= 65535 && grid.z <= 65535,
              "kernel launch: invalid grid (", grid.x, ",", grid.y, ",", grid.z, ")");
  EMBER_CHECK(dynamic_shared_bytes <= 227 * 1024, "kernel launch: ", dynamic_shared_bytes,
              " bytes of dynamic shared memory exceed the 227 KiB a block may have");
  EMBER_CHECK(tls_block == nullptr, "kernel emulation: a kernel may not launch another kernel");
  Stats& s = stats();
  ++s.launches;
  std::mt19937_64 rng(options().seed);
  const dim3 saved_bd = tls_block_dim, saved_gd = tls_grid_dim;
  const uint3 saved_bi = tls_block_idx;
  tls_block_dim = block_dim;
  tls_grid_dim = grid;
  const unsigned g3[3] = {grid.x, grid.y, grid.z}, b3[3] = {block_dim.x, block_dim.y, block_dim.z};
  profile::detail::launch_begin(kernel, g3, b3, dynamic_shared_bytes);
  struct Restore {
    dim3 bd, gd;
    uint3 bi;
    ~Restore() {
      profile::detail::launch_end();
      tls_block_dim = bd;
      tls_grid_dim = gd;
      tls_block_idx = bi;
      tls_block = nullptr;
    }
  } restore{saved_bd, saved_gd, saved_bi};
  if (options().dry_run) return;
  for (unsigned z = 0; z < grid.z; ++z) {
    for (unsigned y = 0; y < grid.y; ++y) {
      for (unsigned x = 0; x < grid.x; ++x) {
        Block b;
        // Exactly the bytes asked for (ASan sees an overrun), poisoned like static shared memory.
        b.dynamic_bytes = dynamic_shared_bytes;
        b.dynamic.reset(new unsigned char[dynamic_shared_bytes]);
        std::memset(b.dynamic.get(), kPoison, dynamic_shared_bytes);
        tls_block_idx = {x, y, z};
        b.threads = fiber_pool().get(threads, options().stack_bytes);
        b.body = &body;
        tls_block = &b;
        ++s.blocks;
        s.threads += threads;
        profile::detail::block_begin(static_cast<unsigned>(threads), b.dynamic.get(), dynamic_shared_bytes);
        run_block(b, rng);
        profile::detail::block_end();
        tls_block = nullptr;
      }
    }
  }
}

}  // namespace ember::emu
