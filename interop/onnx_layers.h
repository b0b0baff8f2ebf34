// Layers as ONNX operators. Each exporter appends the nodes of one Ember layer to a GraphBuilder
// and, to learn the shapes that Reshape and the RNNs need, runs the layer itself on the example
// value flowing in: the export is a trace at the granularity of layers. Every layer type registers
// its exporter beside its model-file builder, in interop/layers/<the layer's file in layers/>.cpp:
//
//   const onnx::ExporterRegistration<nn::Conv2d> conv2d_onnx{"Conv2d", conv2d_to_onnx};
//
// emit_module looks a module's exact type up, then the registered types it derives from (so the
// model zoo's Sequential subclasses export as the chain of their elements); a module with none is
// an ember::Error that names it. Registrations are static objects of ember_interop, a shared
// library, so the linker keeps every one of them; tests/interop/layer_registry_test.cpp checks that
// every layer of the model zoo has one.
#pragma once

#include <functional>
#include <string>
#include <typeindex>
#include <vector>

#include "interop/onnx_graph.h"
#include "layers/module.h"
#include "layers/rnn.h"
#include "layers/size2.h"

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

// ---- the registry of exporters
struct Exporter {
  using Emit = std::function<Traced(GraphBuilder& g, nn::Module& m, const std::string& path, const Traced& x)>;
  std::string name;                // for messages: "Conv2d", "BatchNorm1d/2d"
  std::type_index type;            // the registered type
  bool (*matches)(nn::Module& m);  // whether `m` is of that type or derives from it
  Emit emit;
};
void register_exporter(Exporter exporter);
// The exporter of `m`'s exact type, else of the first registered type (by name) it derives from;
// null when there is none.
const Exporter* find_exporter(nn::Module& m);
// The registered exporters' names, sorted; types registered more than once (mistakes: the first
// registration is kept).
std::vector<std::string> exporter_names();
std::vector<std::string> duplicate_exporters();

// Registers `emit` for modules of type M (a static object in interop/layers/).
template <class M>
struct ExporterRegistration {
  ExporterRegistration(std::string name, Traced (*emit)(GraphBuilder&, M&, const std::string&, const Traced&)) {
    register_exporter({std::move(name), typeid(M), [](nn::Module& m) { return dynamic_cast<M*>(&m) != nullptr; },
                       [emit](GraphBuilder& g, nn::Module& m, const std::string& path, const Traced& x) {
                         return emit(g, dynamic_cast<M&>(m), path, x);
                       }});
  }
};

// ---- small pieces the exporters share
inline std::vector<int64_t> pair(const nn::Size2& s) {
  return {s.h, s.w};
}
// ONNX's pads: every dimension's start, then every dimension's end.
inline std::vector<int64_t> pads4(int64_t top, int64_t left, int64_t bottom, int64_t right) {
  return {top, left, bottom, right};
}
inline std::string child_path(const std::string& path, const std::string& name) {
  return path.empty() ? name : path + "." + name;
}

}  // namespace ember::onnx
