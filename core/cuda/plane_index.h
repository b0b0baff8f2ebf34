// 64-bit index arithmetic for kernels that walk planes of rows x cols elements (pooling, conv).
// One row or column coordinate fits 32 bits (the host checks each size is below 2^30), but a
// plane of 2^31 elements or more fits on one GPU (an H200 holds 35 billion floats), so every
// product of two in-plane sizes, and every flat offset inside a plane, is formed in int64.
// Host-device functions, so the emulated tests check them with sizes no test could allocate.
#pragma once

#include <cstdint>

#include "core/cuda/device_api.h"

namespace ember::cuda {

// Elements in a rows x cols plane.
EMBER_HOST_DEVICE int64_t plane_area(int rows, int cols) {
  return static_cast<int64_t>(rows) * cols;
}

// Flat offset of (row, col) in a plane of `cols` columns.
EMBER_HOST_DEVICE int64_t plane_offset(int row, int col, int cols) {
  return static_cast<int64_t>(row) * cols + col;
}

// Element e of a stack of rows x cols planes: its plane, its flat offset in the plane, and its
// coordinates.
struct PlanePos {
  int64_t plane;
  int64_t offset;
  int row, col;
};

EMBER_HOST_DEVICE PlanePos split_plane_index(int64_t e, int rows, int cols) {
  const int64_t area = plane_area(rows, cols);
  const int64_t p = e / area, r = e - p * area;
  const int row = static_cast<int>(r / cols);
  return PlanePos{p, r, row, static_cast<int>(r - static_cast<int64_t>(row) * cols)};
}

}  // namespace ember::cuda
