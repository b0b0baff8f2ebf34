// Kernel interface for the fused recurrent layers of core/ops/rnn.h. The op layer checks the
// arguments, makes the operands contiguous and allocates; a device's kernels run a whole sequence
// forward (keeping what backward needs in a workspace) and the whole backward through time. The
// workspace is laid out in time order so that the weight and input gradients are single GEMMs
// over all steps.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/dispatch.h"
#include "core/rnn_mode.h"
#include "core/tensor.h"

namespace ember {

struct RnnConfig {
  RnnMode mode = RnnMode::Lstm;
  bool reverse = false;
  int64_t T = 0, B = 0, I = 0, H = 0;
  std::vector<int64_t> lengths;  // B values in [1, T]; empty = every sequence has length T
  // The layer's tensors were bfloat16: the input projection and the weight and input gradients'
  // GEMMs (not the per-step recurrent ones) run in bfloat16, as ConvGeometry::bf16_gemms.
  bool bf16_gemms = false;
};

// Workspace written by forward and read by backward (all contiguous, dtype of the input):
//   gates [T, B, G*H]  the activated gates of each step (LSTM i, f, g, o; GRU r, z, n; the plain
//                      RNNs the new hidden state); rows of inactive (padding) steps are unspecified
//   hs    [T+1, B, H]  hidden states: a step at time t reads slot t and writes slot t+1 (forward)
//                      or reads slot t+1 and writes slot t (reverse), so the states before each
//                      step are slots [0, T) or [1, T+1) in time order; padding steps carry the
//                      state over unchanged
//   cs    [T+1, B, H]  LSTM cell states, slots as hs; undefined otherwise
//   ghn   [T, B, H]    GRU: W_hn h_{t-1} + b_hn of each step; undefined otherwise
struct RnnWorkspace {
  Tensor gates, hs, cs, ghn;
};

// The workspaces of a layer's `directions` directions, each part one block [directions, ...] whose
// index d is direction d's, so that a device can run the directions' per-step products as one
// batched GEMM (their operands at fixed offsets from the first direction's; core/cuda/rnn.cu).
std::vector<RnnWorkspace> rnn_workspaces(const RnnConfig& cfg, size_t directions, const TensorOptions& opts);

// The order in which a direction visits the steps, and the hs/cs slots each step reads and
// writes (the layout above), for every backend's kernels.
struct RnnSteps {
  int64_t T;
  bool reverse;
  // Time of the s-th processed step, and the hs/cs slots it reads and writes.
  int64_t time(int64_t s) const { return reverse ? T - 1 - s : s; }
  int64_t prev_slot(int64_t t) const { return reverse ? t + 1 : t; }
  int64_t next_slot(int64_t t) const { return reverse ? t : t + 1; }
  int64_t first_slot() const { return reverse ? T : 0; }
  int64_t last_slot() const { return reverse ? 0 : T; }
};

struct RnnForwardArgs {
  RnnConfig cfg;
  Tensor input;                   // [T, B, I]
  Tensor w_ih, w_hh, b_ih, b_hh;  // biases may be undefined (zero)
  Tensor h0, c0;                  // [B, H] or undefined (zeros)
  Tensor output;                  // [T, B, H], written (zeros at padding steps)
  Tensor h_n, c_n;                // [B, H], written (c_n only for LSTM)
  RnnWorkspace ws;                // allocated by the caller, written
};

struct RnnBackwardArgs {
  RnnConfig cfg;
  Tensor input, w_ih, w_hh;   // as given to forward
  Tensor b_ih, b_hh;          // as given to forward (may be undefined); the cuDNN path re-runs forward
  RnnWorkspace ws;            // as forward left it
  Tensor grad_output;         // [T, B, H]
  Tensor grad_h_n, grad_c_n;  // [B, H] (grad_c_n only for LSTM)
  // Written when defined; undefined ones are not needed.
  Tensor grad_input, grad_w_ih, grad_w_hh, grad_b_ih, grad_b_hh, grad_h0, grad_c0;
};

// A float16/bfloat16 layer's arguments as float32 tensors on their device (operands widened, results
// and workspace fresh float32 tensors of their shapes, the workspaces laid out as rnn_workspaces'),
// for kernels that run such a layer in float32 (core/rnn_lowp.cpp); rnn_round_results rounds the
// float32 results back into the layer's.
std::vector<RnnForwardArgs> rnn_float32_args(std::span<const RnnForwardArgs> dirs);
void rnn_round_results(const RnnForwardArgs& a, const RnnForwardArgs& wide);
RnnBackwardArgs rnn_float32_args(const RnnBackwardArgs& a);
void rnn_round_results(const RnnBackwardArgs& a, const RnnBackwardArgs& wide);

// A call runs every direction of one layer: one, or two for a bidirectional layer (the same input,
// configuration and lengths but `reverse`; forward's workspaces from rnn_workspaces), so that a
// device may run the directions' steps together: CUDA runs each step of both as one batched GEMM and
// one cell launch, a CPU at two threads gives each direction a thread.
using RnnForwardFn = void(std::span<const RnnForwardArgs> dirs);
using RnnBackwardFn = void(std::span<const RnnBackwardArgs> dirs);
EMBER_DECLARE_STUB(rnn_forward_stub, RnnForwardFn);
EMBER_DECLARE_STUB(rnn_backward_stub, RnnBackwardFn);

}  // namespace ember
