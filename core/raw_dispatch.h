// Kernels that only move elements (index_select, gather, scatter without accumulation, tril/triu)
// treat an element as raw bits: one instantiation per element size (an unsigned integer of that
// size) serves every dtype of that size, float16 and bool included. Plain C++, so the CPU kernels,
// the CUDA kernels and their emulation build share it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/error.h"

namespace ember {

// Runs body(tag) with tag an unsigned integer of `itemsize` bytes (body takes `auto`).
template <typename F>
void dispatch_raw(size_t itemsize, const char* op, const F& body) {
  switch (itemsize) {
    case 1:
      body(uint8_t{});
      break;
    case 2:
      body(uint16_t{});
      break;
    case 4:
      body(uint32_t{});
      break;
    case 8:
      body(uint64_t{});
      break;
    default:
      EMBER_FAIL(op, ": unsupported element size ", itemsize);
  }
}

}  // namespace ember
