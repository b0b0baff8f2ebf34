// The CUDA backend's allocators: one caching allocator per GPU (what get_allocator(cuda:N)
// returns) and the pinned host allocator (what pinned_allocator() returns in a CUDA build). The
// caching rules are core/caching_allocator.h's; see docs/cuda/runtime.md.
#pragma once

#include "core/caching_allocator.h"

namespace ember::cuda {

// cuda:index's allocator; an ember::Error naming the device when it does not exist.
CachingAllocator& device_allocator(int index);
// Page-locked host memory when a GPU is present, else the CPU allocator.
Allocator* host_pinned_allocator();
// When `base` is a block of host_pinned_allocator()'s page-locked cache: marks it used by `s`
// (it is not reused before the work queued there so far is done) and returns true. Otherwise
// (someone else's buffer, or no GPU) returns false and records nothing.
bool pinned_record_stream(void* base, Stream& s);

}  // namespace ember::cuda
