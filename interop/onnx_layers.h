// Layers as ONNX operators. Each emitter appends the nodes of one Ember layer to a GraphBuilder
// and, to learn the shapes that Reshape and the RNNs need, runs the layer itself on the example
// value flowing in: the export is a trace at the granularity of layers. Sequential chains its
// elements; a module with no ONNX form is an ember::Error that names it.
#pragma once

#include <string>
#include <vector>

#include "interop/onnx_graph.h"
#include "layers/module.h"
#include "layers/rnn.h"

namespace ember::onnx {

// A value of the graph under construction: its name there, and what Ember computed for it on the
// example input (emitters read its shape, never its batch size, which stays free).
struct Traced {
  std::string name;
  Tensor example;
};

// `module` (named `path` in the model, for node names and errors) applied to `x`.
Traced emit_module(GraphBuilder& g, nn::Module& module, const std::string& path, const Traced& x);

// What an RNN gives: its output sequence and each layer's final hidden state [D, B, H].
struct TracedRnn {
  Traced output;                 // [T, B, D*H], or [B, T, D*H] with batch_first
  std::vector<std::string> h_n;  // one ONNX value per layer, in layer order
  Tensor h_n_example;            // [L*D, B, H], Ember's
};

// An RNN, LSTM or GRU (every layer, either direction) from a zero state; `lengths` (an int32 [B]
// graph value, or empty) and `example_lengths` give each sequence's length.
TracedRnn emit_rnn(GraphBuilder& g, nn::RNNBase& rnn, const std::string& path, const Traced& x,
                   const std::string& lengths = {}, const std::vector<int64_t>& example_lengths = {});

}  // namespace ember::onnx
