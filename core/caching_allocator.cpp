#include "core/caching_allocator.h"

#include <bit>

#include "core/error.h"
#include "core/stream.h"

namespace ember {

namespace {
constexpr size_t kMinBlock = 512;  // cudaMalloc aligns to 256 B; 512 B keeps small classes few
}

CachingAllocator::CachingAllocator(std::string name, std::unique_ptr<MemoryBackend> backend,
                                   std::function<StreamHandle()> current_stream)
    : name_(std::move(name)), backend_(std::move(backend)), current_stream_(std::move(current_stream)) {}

CachingAllocator::~CachingAllocator() {
  // Blocks still in use belong to tensors that outlive the allocator (statics freed after main):
  // their deleters would call into a destroyed object, so process-lifetime allocators are leaked
  // on purpose by their owners and this destructor only runs for test instances.
  try {
    // The allocator's private pools end with it: their free blocks go back to the device too.
    capturing_.clear();
    const std::set<PoolId> pools = live_pools_;
    for (PoolId pool : pools) release_pool(pool);
    empty_cache();
  } catch (...) {  // a destructor must not throw; the driver may already be shutting down
  }
}

size_t CachingAllocator::size_class(size_t bytes) {
  if (bytes <= kMinBlock) return kMinBlock;
  // Four classes per power of two: [2^k, 2^k * 5/4, 2^k * 6/4, 2^k * 7/4, 2^(k+1)].
  const size_t pow = std::bit_floor(bytes);
  const size_t step = pow / 4;
  return (bytes + step - 1) / step * step;
}

DataPtr CachingAllocator::allocate(size_t nbytes) {
  return allocate(nbytes, current_stream_ ? current_stream_() : 0);
}

DataPtr CachingAllocator::allocate(size_t nbytes, StreamHandle stream) {
  const size_t size = size_class(nbytes);
  std::unique_lock<std::mutex> lock(mu_);
  ++stats_.allocations;
  poll_pending();
  const auto cap = capturing_.find(stream);
  const PoolId pool = cap == capturing_.end() ? 0 : cap->second;
  void* p = allocate_block(nbytes, size, stream, pool);
  Block& b = blocks_.at(p);
  b.requested = nbytes;
  b.stream = stream;
  b.used_on.clear();
  stats_.in_use += static_cast<int64_t>(size);
  stats_.requested_bytes += static_cast<int64_t>(nbytes);
  if (stats_.in_use > stats_.peak) stats_.peak = stats_.in_use;
  return DataPtr(p, [this](void* q) { free_block(q); });
}

void* CachingAllocator::allocate_block(size_t nbytes, size_t size, StreamHandle stream, PoolId pool) {
  void* p = take_cached(size, stream, pool);
  if (p) return p;
  p = backend_->raw_alloc(size);
  if (!p) {
    // Cached blocks of other classes or streams may be what the device is missing (a live pool's
    // blocks are not: its graph still addresses them).
    ++stats_.oom_flushes;
    const int64_t cached_before = stats_.cached;
    for (Pending& pb : pending_)
      for (void* e : pb.events) backend_->wait_event(e);
    poll_pending();
    release_cached();
    p = backend_->raw_alloc(size);
    if (!p) throw_oom(nbytes, size, cached_before);
  }
  ++stats_.os_allocations;
  blocks_[p] = Block{size, 0, stream, pool, {}};
  return p;
}

void* CachingAllocator::take_cached(size_t size, StreamHandle stream, PoolId pool) {
  auto it = free_.find({pool, stream, size});
  if (it == free_.end() || it->second.empty()) return nullptr;
  void* p = it->second.back();
  it->second.pop_back();
  stats_.cached -= static_cast<int64_t>(size);
  return p;
}

void CachingAllocator::free_block(void* p) {
  std::lock_guard<std::mutex> lock(mu_);
  Block& b = blocks_.at(p);
  stats_.in_use -= static_cast<int64_t>(b.size);
  stats_.requested_bytes -= static_cast<int64_t>(b.requested);
  if (b.pool != 0 && !live_pools_.count(b.pool)) b.pool = 0;  // its graph is gone
  if (b.used_on.empty()) {
    free_[{b.pool, b.stream, b.size}].push_back(p);
    stats_.cached += static_cast<int64_t>(b.size);
    return;
  }
  // Another stream may still have work queued that reads or writes the block.
  Pending pb{p, {}};
  for (StreamHandle s : b.used_on) pb.events.push_back(backend_->record_event(s));
  pending_.push_back(std::move(pb));
  ++stats_.pending_blocks;
  stats_.cached += static_cast<int64_t>(b.size);
}

void CachingAllocator::poll_pending() {
  for (size_t i = 0; i < pending_.size();) {
    Pending& pb = pending_[i];
    bool done = true;
    for (void* e : pb.events) done = done && backend_->event_done(e);
    if (!done) {
      ++i;
      continue;
    }
    for (void* e : pb.events) backend_->destroy_event(e);
    const Block& b = blocks_.at(pb.ptr);
    free_[{b.pool, b.stream, b.size}].push_back(pb.ptr);
    --stats_.pending_blocks;
    pending_[i] = std::move(pending_.back());
    pending_.pop_back();
  }
}

void CachingAllocator::release_cached() {
  for (auto it = free_.begin(); it != free_.end();) {
    const auto& [pool, stream, size] = it->first;
    if (pool != 0) {  // a live pool's: its graph still addresses them
      ++it;
      continue;
    }
    for (void* p : it->second) {
      backend_->raw_free(p);
      blocks_.erase(p);
      stats_.cached -= static_cast<int64_t>(size);
      ++stats_.os_frees;
    }
    it = free_.erase(it);
  }
}

void CachingAllocator::record_stream(void* p, StreamHandle stream) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = blocks_.find(p);
  EMBER_CHECK(it != blocks_.end(), name_, ": record_stream: ", p, " is not the start of a block from this allocator");
  // The events it would need cannot be polled while a capture records the stream, and a replay
  // would not record them again.
  EMBER_CHECK(it->second.pool == 0, name_, ": record_stream: ", p,
              " belongs to a CUDA graph's private pool; a captured step must keep its work on the capturing stream");
  if (stream != it->second.stream) it->second.used_on.insert(stream);
}

void CachingAllocator::record_stream(void* p, Stream& s) {
  record_stream(p, reinterpret_cast<StreamHandle>(s.native_handle()));
}

bool CachingAllocator::owns(void* p) const {
  std::lock_guard<std::mutex> lock(mu_);
  return blocks_.count(p) != 0;
}

PoolId CachingAllocator::create_pool() {
  std::lock_guard<std::mutex> lock(mu_);
  live_pools_.insert(next_pool_);
  return next_pool_++;
}

void CachingAllocator::check_live_pool(PoolId pool, const char* what) const {
  EMBER_CHECK(live_pools_.count(pool), name_, ": ", what, ": pool ", pool,
              " is not a live private pool (create_pool() gives one; release_pool() ends it)");
}

void CachingAllocator::begin_pool(PoolId pool, StreamHandle stream) {
  std::lock_guard<std::mutex> lock(mu_);
  check_live_pool(pool, "begin_pool");
  auto it = capturing_.find(stream);
  EMBER_CHECK(it == capturing_.end(), name_, ": begin_pool: stream ", stream, " already allocates from pool ",
              it == capturing_.end() ? 0 : it->second, " (one capture per stream at a time)");
  capturing_[stream] = pool;
}

void CachingAllocator::end_pool(StreamHandle stream) {
  std::lock_guard<std::mutex> lock(mu_);
  EMBER_CHECK(capturing_.erase(stream) == 1, name_, ": end_pool: stream ", stream, " allocates from no pool");
}

void CachingAllocator::release_pool(PoolId pool) {
  std::lock_guard<std::mutex> lock(mu_);
  check_live_pool(pool, "release_pool");
  for (const auto& [stream, p] : capturing_)
    EMBER_CHECK(p != pool, name_, ": release_pool: pool ", pool, " still captures on stream ", stream);
  live_pools_.erase(pool);
  // Its free blocks join the general cache under the same (stream, size class).
  for (auto it = free_.begin(); it != free_.end();) {
    const auto [p, stream, size] = it->first;
    if (p != pool) {
      ++it;
      continue;
    }
    std::vector<void*>& general = free_[{0, stream, size}];
    for (void* b : it->second) {
      blocks_.at(b).pool = 0;
      general.push_back(b);
    }
    it = free_.erase(it);
  }
}

int64_t CachingAllocator::pool_bytes(PoolId pool) const {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t bytes = 0;
  for (const auto& [p, b] : blocks_)
    if (b.pool == pool) bytes += static_cast<int64_t>(b.size);
  return bytes;
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

CachingAllocatorStats CachingAllocator::detailed_stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void CachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak = stats_.in_use;
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mu_);
  for (Pending& pb : pending_)
    for (void* e : pb.events) backend_->wait_event(e);
  poll_pending();
  release_cached();
}

void CachingAllocator::throw_oom(size_t nbytes, size_t size, int64_t cached_before) {
  std::string extra = backend_->describe();
  EMBER_FAIL(name_, ": out of memory allocating ", nbytes, " bytes (", size, " with rounding); ", stats_.in_use,
             " bytes in use by tensors, ", cached_before,
             " bytes were cached (returned to the device before one retry)", extra.empty() ? "" : "; ", extra);
}

}  // namespace ember
