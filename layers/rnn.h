// Recurrent layers: RNN (tanh or relu), LSTM and GRU with num_layers, bidirectional, batch_first,
// dropout between layers (training only), optional initial states and variable-length batches.
// Each layer is one call to core's fused rnn_layer, or rnn_layer_bidirectional for both directions
// (a single autograd node with a hand-written backward through time); directions are concatenated
// along features.
//
// Shapes and names follow torch.nn.RNN/LSTM/GRU: input [T, B, I] ([B, T, I] with batch_first; an
// unbatched [T, I] is accepted too), output [T, B, D*H], h_n and c_n [L*D, B, H] (L layers, D = 2
// when bidirectional); parameters weight_ih_l{k}[_reverse] [G*H, in], weight_hh_l{k}[_reverse]
// [G*H, H], bias_ih_l{k}[_reverse], bias_hh_l{k}[_reverse] [G*H] with G = 1, 4 (i, f, g, o), 3
// (r, z, n), all initialised from U(-1/sqrt(H), 1/sqrt(H)).
//
// Variable lengths: `lengths` gives each sequence's length (any order, each in [1, T]); outputs
// past a sequence's length are zero, its final state is the state at its own length (for the
// reverse direction: after reading its whole sequence backwards from its last valid step), and
// the padding contributes no gradient — what PyTorch computes from a packed sequence.
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "core/generator.h"
#include "core/ops/rnn.h"
#include "layers/module.h"

namespace ember::nn {

struct LSTMOptions {
  int64_t num_layers = 1;
  bool bias = true;
  bool batch_first = false;
  double dropout = 0.0;  // on the outputs of every layer but the last, in training
  bool bidirectional = false;
};
using GRUOptions = LSTMOptions;

enum class RnnNonlinearity { Tanh, Relu };
struct RNNOptions {
  int64_t num_layers = 1;
  RnnNonlinearity nonlinearity = RnnNonlinearity::Tanh;
  bool bias = true;
  bool batch_first = false;
  double dropout = 0.0;
  bool bidirectional = false;
};

// Initial states; undefined = zeros. h (and c for LSTM): [L*D, B, H] ([L*D, H] for an unbatched input).
struct RnnState {
  Tensor h = {};
  Tensor c = {};
};

struct RnnOutput {
  Tensor output = {};  // [T, B, D*H] ([B, T, D*H] with batch_first)
  Tensor h_n = {};     // [L*D, B, H]
  Tensor c_n = {};     // LSTM only
};

// RNN modules return RnnOutput from forward(input, state, lengths) and deliberately hide
// Module's single-tensor forward (bringing it back would make forward(x) ambiguous).
#if defined(__clang__)
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Woverloaded-virtual"
#endif
class RNNBase : public Module {
 public:
  RnnOutput forward(const Tensor& input, const RnnState& state = {}, const std::vector<int64_t>& lengths = {});
  // forward(), then the forward hooks with the output sequence (so summary() lists the RNN).
  RnnOutput operator()(const Tensor& input, const RnnState& state = {}, const std::vector<int64_t>& lengths = {}) {
    RnnOutput out = forward(input, state, lengths);
    call_forward_hooks(input, out.output);
    return out;
  }
  void reset_parameters(Generator* gen = nullptr);
  std::string extra_repr() const override;

  // The parameters of one layer and direction (bias_* undefined without bias).
  Tensor& weight_ih(int64_t layer, bool reverse = false) { return *params_[index(layer, reverse)][0]; }
  Tensor& weight_hh(int64_t layer, bool reverse = false) { return *params_[index(layer, reverse)][1]; }
  Tensor& bias_ih(int64_t layer, bool reverse = false) { return *params_[index(layer, reverse)][2]; }
  Tensor& bias_hh(int64_t layer, bool reverse = false) { return *params_[index(layer, reverse)][3]; }

  const RnnMode mode;
  const int64_t input_size, hidden_size, num_layers;
  const bool bias, batch_first, bidirectional;
  const double dropout;

 protected:
  RNNBase(RnnMode mode, int64_t input_size, int64_t hidden_size, int64_t num_layers, bool bias, bool batch_first,
          double dropout, bool bidirectional, const char* name);

 private:
  size_t index(int64_t layer, bool reverse) const;
  const char* name_;
  std::vector<std::array<Tensor*, 4>> params_;  // per (layer, direction), into the module's owned tensors
};
#if defined(__clang__)
#pragma clang diagnostic pop
#endif

// An RNN as an element of a Sequential (so that a pipeline can cut between recurrent layers): it
// runs the RNN from a zero state and returns its output sequence. The RNN's parameters are
// registered as this module's own, under the RNN's names, so a Sequential element "lstm1" holding
// one has the parameter names an nn::LSTM member "lstm1" would have.
class RnnSequence : public Module {
 public:
  explicit RnnSequence(std::shared_ptr<RNNBase> rnn);
  Tensor forward(const Tensor& input) override { return rnn->forward(input).output; }
  void train(bool on = true) override;  // the RNN's dropout between layers follows
  std::string type_name() const override { return "RnnSequence"; }
  std::string extra_repr() const override { return rnn->type_name() + "(" + rnn->extra_repr() + ")"; }

  std::shared_ptr<RNNBase> rnn;
};

class RNN : public RNNBase {
 public:
  RNN(int64_t input_size, int64_t hidden_size, RNNOptions options = {});
  std::string type_name() const override { return "RNN"; }
};

class LSTM : public RNNBase {
 public:
  LSTM(int64_t input_size, int64_t hidden_size, LSTMOptions options = {});
  std::string type_name() const override { return "LSTM"; }
};

class GRU : public RNNBase {
 public:
  GRU(int64_t input_size, int64_t hidden_size, GRUOptions options = {});
  std::string type_name() const override { return "GRU"; }
};

}  // namespace ember::nn
