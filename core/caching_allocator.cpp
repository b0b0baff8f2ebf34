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
  void* p = take_cached(size, stream);
  if (!p) {
    p = backend_->raw_alloc(size);
    if (!p) {
      // Cached blocks of other classes or streams may be what the device is missing.
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
    blocks_[p] = Block{size, 0, stream, {}};
  }
  Block& b = blocks_.at(p);
  b.requested = nbytes;
  b.stream = stream;
  b.used_on.clear();
  stats_.in_use += static_cast<int64_t>(size);
  stats_.requested_bytes += static_cast<int64_t>(nbytes);
  if (stats_.in_use > stats_.peak) stats_.peak = stats_.in_use;
  return DataPtr(p, [this](void* q) { free_block(q); });
}

void* CachingAllocator::take_cached(size_t size, StreamHandle stream) {
  auto it = free_.find({stream, size});
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
  if (b.used_on.empty()) {
    free_[{b.stream, b.size}].push_back(p);
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
    free_[{b.stream, b.size}].push_back(pb.ptr);
    --stats_.pending_blocks;
    pending_[i] = std::move(pending_.back());
    pending_.pop_back();
  }
}

void CachingAllocator::release_cached() {
  for (auto& [key, ptrs] : free_) {
    for (void* p : ptrs) {
      backend_->raw_free(p);
      blocks_.erase(p);
      stats_.cached -= static_cast<int64_t>(key.second);
      ++stats_.os_frees;
    }
  }
  free_.clear();
}

void CachingAllocator::record_stream(void* p, StreamHandle stream) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = blocks_.find(p);
  EMBER_CHECK(it != blocks_.end(), name_, ": record_stream: ", p, " is not the start of a block from this allocator");
  if (stream != it->second.stream) it->second.used_on.insert(stream);
}

void CachingAllocator::record_stream(void* p, Stream& s) {
  record_stream(p, reinterpret_cast<StreamHandle>(s.native_handle()));
}

bool CachingAllocator::owns(void* p) const {
  std::lock_guard<std::mutex> lock(mu_);
  return blocks_.count(p) != 0;
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
