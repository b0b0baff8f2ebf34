// Deterministic grouping of positions by an integer key on a CUDA device, for the kernels that
// must combine several values landing on one destination in a fixed order without float atomics
// (index_add, scatter with accumulation or with repeated indices). Thread timing decides only
// which slot of its group a position is first put in; each group is then sorted by position, so
// the result is the same on every run and equals a sequential walk in position order (the CPU
// kernels' order). Host API; the kernels are in group_by_key.cu.
#pragma once

#include <cstdint>

#include "core/device.h"
#include "core/tensor.h"

namespace ember::cuda {

// The positions 0..m-1 grouped by key: the members of key t are perm[start[t] .. start[t + 1]),
// in increasing order. Both arrays live in `scratch` (device memory, freed with it; the kernels
// that read them must be queued before it goes).
struct KeyGroups {
  Tensor scratch;
  const int64_t* start = nullptr;  // nkeys + 1 entries, start[nkeys] == m
  const int64_t* perm = nullptr;   // m entries
};

// keys: m >= 1 device int64 values, each in [0, nkeys). Queued on kernel_stream() of the current
// device (the caller holds a DeviceGuard for `device`).
KeyGroups group_by_key(const int64_t* keys, int64_t m, int64_t nkeys, Device device);

}  // namespace ember::cuda
