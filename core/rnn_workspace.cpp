// The recurrent layers' workspaces, one block per part for all of a layer's directions
// (core/rnn_kernels.h).
#include "core/rnn_kernels.h"

namespace ember {

std::vector<RnnWorkspace> rnn_workspaces(const RnnConfig& cfg, size_t directions, const TensorOptions& opts) {
  const auto D = static_cast<int64_t>(directions);
  const int64_t T = cfg.T, B = cfg.B, H = cfg.H, GH = rnn_gate_count(cfg.mode) * H;
  const bool lstm = cfg.mode == RnnMode::Lstm, gru = cfg.mode == RnnMode::Gru;
  const Tensor gates = empty({D, T, B, GH}, opts), hs = empty({D, T + 1, B, H}, opts);
  const Tensor cs = lstm ? empty({D, T + 1, B, H}, opts) : Tensor();
  const Tensor ghn = gru ? empty({D, T, B, H}, opts) : Tensor();
  std::vector<RnnWorkspace> ws(directions);
  for (int64_t d = 0; d < D; ++d) {
    RnnWorkspace& w = ws[static_cast<size_t>(d)];
    w.gates = gates[d];
    w.hs = hs[d];
    if (lstm) w.cs = cs[d];
    if (gru) w.ghn = ghn[d];
  }
  return ws;
}

}  // namespace ember
