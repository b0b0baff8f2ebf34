// The bookkeeping of a device memory cache, separate from the device: the CUDA backend plugs in
// cudaMalloc/cudaFree and CUDA events (core/cuda/cuda_allocator.cpp), pinned host memory plugs in
// cudaHostAlloc, and the tests plug in a fake backend, so every rule below runs in CPU-only CI.
//
// The rules, which are those a training loop needs from a GPU allocator:
// - Requests are rounded up to a size class (512 B, then four classes per power of two, so at most
//   25% is wasted) and a freed block goes to the free list of its class, where the next request of
//   that class on the same stream takes it without calling the driver.
// - A block belongs to the stream it was allocated on: work on that stream is ordered, so the
//   block can be reused as soon as it is freed. A block that another stream also used
//   (record_stream) is held back when freed until an event recorded on each of those streams has
//   completed, so that the other stream cannot still be reading it when it is handed out again.
// - When the backend cannot allocate, every cached block is returned to it (waiting first for
//   pending events) and the allocation is tried once more; if it fails again, the ember::Error
//   names the bytes asked for, in use and cached.
// - empty_cache() returns every free block on request; statistics count what is in use, its peak,
//   what is cached and how often the backend was called.
// - Private pools, for CUDA graphs (core/cuda/cuda_graph.h): while a pool captures on a stream,
//   that stream's allocations come only from the pool (its own free blocks, else new ones from the
//   backend) and blocks freed into it return to it. A replay writes to the addresses the capture
//   saw without calling the allocator, so no block of a live pool is handed to anyone outside it
//   or returned to the backend (empty_cache and the out-of-memory flush skip them); inside the
//   pool, reuse follows the capture's order, which the replay repeats. release_pool(), when the
//   graph is destroyed, hands the pool's blocks back to the general cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "core/allocator.h"

namespace ember {

// A stream as the cache sees it: an opaque handle (a cudaStream_t on CUDA). 0 is a valid stream.
using StreamHandle = uintptr_t;
// A private pool (create_pool); 0 is the general cache.
using PoolId = uint64_t;

// What the cache needs from a device. Implementations need not be thread-safe: the cache calls
// them under its own lock.
class MemoryBackend {
 public:
  virtual ~MemoryBackend() = default;
  // Raw memory of exactly `bytes`, or nullptr when the device is out of memory (other failures
  // throw ember::Error).
  virtual void* raw_alloc(size_t bytes) = 0;
  virtual void raw_free(void* p) = 0;
  // An event recorded now on stream `s`, polled by event_done and released by destroy_event.
  virtual void* record_event(StreamHandle s) = 0;
  virtual bool event_done(void* event) = 0;
  virtual void wait_event(void* event) = 0;  // blocks the host until the event has completed
  virtual void destroy_event(void* event) = 0;
  // Appended to the out-of-memory message (e.g. the driver's free/total memory); may be empty.
  virtual std::string describe() { return {}; }
};

struct CachingAllocatorStats : AllocatorStats {
  int64_t os_frees = 0;         // blocks returned to the backend
  int64_t oom_flushes = 0;      // times a failed allocation emptied the cache and retried
  int64_t pending_blocks = 0;   // freed blocks waiting for another stream's event
  int64_t requested_bytes = 0;  // sum of the unrounded sizes of the blocks in use
};

class CachingAllocator final : public Allocator {
 public:
  // `name` starts every error message ("cuda:0", "pinned host"). `current_stream` says which
  // stream allocate(bytes) without a stream belongs to; null means stream 0.
  CachingAllocator(std::string name, std::unique_ptr<MemoryBackend> backend,
                   std::function<StreamHandle()> current_stream = nullptr);
  ~CachingAllocator() override;

  // Rounds a request up to its size class (exposed for tests and for docs/cuda/runtime.md's table).
  static size_t size_class(size_t bytes);

  DataPtr allocate(size_t nbytes) override;
  DataPtr allocate(size_t nbytes, StreamHandle stream);
  // Marks the block that contains `p` as used by `stream` too: when freed, it is not reused before
  // the work queued on `stream` up to the free has completed. `p` must come from this allocator.
  void record_stream(void* p, StreamHandle stream);
  void record_stream(void* p, Stream& s) override;
  // Whether `p` is the start of a block this allocator handed out (and has not returned).
  bool owns(void* p) const;

  // A new, empty private pool.
  PoolId create_pool();
  // Routes `stream`'s allocations to `pool` until end_pool(stream). ember::Error when the pool is
  // unknown or released, or the stream already captures into a pool.
  void begin_pool(PoolId pool, StreamHandle stream);
  void end_pool(StreamHandle stream);
  // The pool's graph is gone: its free blocks join the general cache now, its blocks in use when
  // they are freed. The id is not valid afterwards.
  void release_pool(PoolId pool);
  // Bytes of the pool's blocks (in use and free), what a graph holds on to.
  int64_t pool_bytes(PoolId pool) const;

  AllocatorStats stats() const override;
  CachingAllocatorStats detailed_stats() const;
  void reset_peak() override;
  // Waits for pending blocks' events and returns every free block to the backend.
  void empty_cache() override;

 private:
  struct Block {
    size_t size = 0;       // the size class, what the backend allocated
    size_t requested = 0;  // what the caller asked for
    StreamHandle stream = 0;
    PoolId pool = 0;                 // 0: the general cache
    std::set<StreamHandle> used_on;  // other streams, from record_stream
  };
  // Free lists are keyed by (pool, stream, size class).
  using FreeKey = std::tuple<PoolId, StreamHandle, size_t>;
  struct Pending {
    void* ptr;
    std::vector<void*> events;
  };

  void free_block(void* p);
  void* take_cached(size_t size, StreamHandle stream, PoolId pool);
  void* allocate_block(size_t nbytes, size_t size, StreamHandle stream, PoolId pool);  // under mu_
  void check_live_pool(PoolId pool, const char* what) const;
  void poll_pending();
  void release_cached();  // under mu_
  [[noreturn]] void throw_oom(size_t nbytes, size_t size, int64_t cached_before);

  const std::string name_;
  std::unique_ptr<MemoryBackend> backend_;
  std::function<StreamHandle()> current_stream_;
  mutable std::mutex mu_;
  std::unordered_map<void*, Block> blocks_;  // every block the backend gave us, in use or not
  std::map<FreeKey, std::vector<void*>> free_;
  std::set<PoolId> live_pools_;
  PoolId next_pool_ = 1;
  std::map<StreamHandle, PoolId> capturing_;  // streams whose allocations go to a pool
  std::vector<Pending> pending_;
  CachingAllocatorStats stats_;
};

}  // namespace ember
