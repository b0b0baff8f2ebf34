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
};

Allocator* cpu_allocator();
// The allocator for a device; CUDA's is registered by the CUDA backend.
Allocator* get_allocator(Device d);
void register_allocator(DeviceType t, Allocator* a);

}  // namespace ember
