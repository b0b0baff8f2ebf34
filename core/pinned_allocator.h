// Page-locked ("pinned") host memory, from which host-to-device copies run asynchronously and at
// full bus speed. The CUDA backend registers an Allocator for it when a GPU is usable; until then
// (and in CPU-only builds) pinned_host_allocator() is null and callers such as the DataLoader
// fall back to ordinary CPU memory, so asking for pinned memory never fails.
#pragma once

#include "core/allocator.h"

namespace ember {

Allocator* pinned_host_allocator();
// Registers (or, with null, unregisters) the pinned host allocator. The allocator must outlive
// every block it hands out.
void register_pinned_host_allocator(Allocator* a);

}  // namespace ember
