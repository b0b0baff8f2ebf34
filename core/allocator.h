// Memory for tensor storage. Each device type has one Allocator; the CPU one hands out 64-byte
// aligned blocks from a size-binned cache so that training loops, which free and reallocate the
// same sizes every step, stop calling malloc after the first iteration. Statistics let tests
// prove that memory does not grow over many iterations.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "core/device.h"

namespace ember {

class Stream;

struct AllocatorStats {
  int64_t in_use = 0;          // bytes handed out and not yet returned
  int64_t peak = 0;            // max of in_use since the last reset_peak()
  int64_t cached = 0;          // bytes held in the cache, free for reuse
  int64_t allocations = 0;     // number of allocate() calls
  int64_t os_allocations = 0;  // allocations that reached the system allocator
};

// Owns a block: freeing it returns the block to its allocator.
using DataPtr = std::unique_ptr<void, std::function<void(void*)>>;

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual DataPtr allocate(size_t nbytes) = 0;
  virtual AllocatorStats stats() const = 0;
  virtual void reset_peak() = 0;
  // Returns cached blocks to the system.
  virtual void empty_cache() = 0;
  // Declares that the block starting at `p` (a Storage's pointer) is also used by work queued on
  // `s`, so the allocator must not hand it out again before that work is done. Allocators whose
  // device runs everything in order (the CPU) ignore it.
  virtual void record_stream(void* /*p*/, Stream& /*s*/) {}
};

Allocator* cpu_allocator();
// The allocator for a device; CUDA's is registered by the CUDA backend.
Allocator* get_allocator(Device d);
// For the CPU, a registered allocator is put in front of cpu_allocator() (the op table's tests put a
// guarded one there); registering nullptr puts cpu_allocator() back.
void register_allocator(DeviceType t, Allocator* a);
// Backends with one allocator per device index (CUDA: one cache per GPU) register a lookup that
// returns device d's allocator or throws an ember::Error naming d when it does not exist. It takes
// precedence over register_allocator for that device type.
void register_allocator_fn(DeviceType t, Allocator* (*fn)(int index));

// Page-locked host memory for buffers that are copied to a device (the data loader's batches):
// the CUDA backend registers its pinned caching allocator; without one this is cpu_allocator().
// Memory from it holds CPU tensors.
Allocator* pinned_allocator();
void register_pinned_allocator(Allocator* a);

}  // namespace ember
