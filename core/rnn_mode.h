// The recurrent cell kinds and how many gates each has per hidden unit. The op's API
// (core/ops/rnn.h), its kernel interface (core/rnn_kernels.h) and the layers that size their
// weights (layers/rnn.h) all need the gate count, and must agree on it, so it is said once here.
#pragma once

#include <cstdint>

namespace ember {

enum class RnnMode { RnnTanh, RnnRelu, Lstm, Gru };

// Gates per hidden unit: 1 for the plain RNNs, 4 for LSTM (i, f, g, o), 3 for GRU (r, z, n).
inline int64_t rnn_gate_count(RnnMode mode) {
  switch (mode) {
    case RnnMode::Lstm:
      return 4;
    case RnnMode::Gru:
      return 3;
    default:
      return 1;
  }
}

}  // namespace ember
