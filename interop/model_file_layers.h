// The layers of model files, one registration per kind of layer: each case of the oneof `kind` of
// proto/train_file.proto's Layer registers how a file's layer is built, beside the layer's ONNX
// exporter, in interop/layers/<the layer's file in layers/>.cpp:
//
//   const model_file::LayerRegistration conv2d_file{Layer::kConv2D, {.build = conv2d_from_file}};
//
// A builder makes the module for its input's example value (batch 1), reading its fields through a
// Site, which places every message at the file's line and names the network, the layer and the
// field. The joins (add, concat) register the GraphNet join they make instead of a builder.
// build_network (model_file.h) looks each layer's kind up here; a kind with no registration is an
// ember::Error, and tests/interop/layer_registry_test.cpp fails on one.
//
// Registrations are static objects of ember_interop, a shared library, so the linker keeps every
// one of them (the build makes every Ember library shared: BUILD_SHARED_LIBS).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "interop/graph_net.h"
#include "interop/model_file.h"
#include "layers/size2.h"
#include "train_file.pb.h"

namespace ember::model_file {

// The layer being built, for messages.
struct Site {
  const LoadedFile& file;
  int network, layer;
  std::string net, name, kind;
  int64_t vocabulary = 0;
  int64_t sized_by_vocabulary(const std::string& field) const {
    check(vocabulary > 0, field, "sized by the vocabulary, which only a text data source has");
    return vocabulary;
  }
  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    EMBER_FAIL(file.at(network, layer, field), ": network '", net, "', layer '", name, "' (", kind, "): ", what);
  }
  void check(bool ok, const std::string& field, const std::string& what) const {
    if (!ok) fail(field, what);
  }
  // A value the file gives for the layer's `field`, refused unless `ok`: "invalid", never
  // "missing", for a field the file gives is never taken for one it leaves out.
  template <typename T>
  void valid(bool ok, const std::string& field, T value, const std::string& expected) const {
    if (!ok) fail(kind, detail::concat(field, " is ", value, " (invalid: expected ", expected, ")"));
  }
  // A size the layer needs: one left out is missing, one below 1 invalid.
  int64_t required_size(bool given, int64_t v, const std::string& field) const {
    check(given, kind, field + " is missing (expected a positive number)");
    return size_or(given, v, 0, field);
  }
  // A size the file may leave out (`def`); one it gives must be positive.
  int64_t size_or(bool given, int64_t v, int64_t def, const std::string& field) const {
    if (!given) return def;
    valid(v > 0, field, v, "a positive number");
    return v;
  }
  // A real the file may leave out (`def`); one it gives must be finite and `ok`.
  double real_or(bool given, double v, double def, const std::string& field, bool ok = true,
                 const std::string& expected = "a finite number") const;
  // A dimension of an input of `rank` dimensions (batch included), from the end when negative;
  // never 0, the batch: a layer that mixes the batch's examples makes each one's output depend on
  // the others (a softmax over the batch, a concatenation that changes the batch's size).
  int64_t dimension(int64_t dim, int64_t rank, const std::string& field) const;
  // A pair given as [], [n] or [h, w] (`def` when empty), each value at least `min`.
  nn::Size2 size2(const google::protobuf::RepeatedField<int64_t>& v, const std::string& what, nn::Size2 def,
                  int64_t min) const;
  // The channels (dimension 1) of an input that must have `rank` dimensions, batch included.
  int64_t channels(const Tensor& x, int64_t rank) const;
};

// How a file's layer of one kind is made: a module (`build`), or a join of several inputs.
struct FileLayer {
  using Build = std::shared_ptr<nn::Module> (*)(const Site& at, const train_file::Layer& layer, const Tensor& x);
  using JoinDim = int64_t (*)(const Site& at, const train_file::Layer& layer, const Tensor& first);
  Build build = nullptr;                               // a module for input `x` (one example, batch 1)
  nn::GraphNet::Join join = nn::GraphNet::Join::None;  // a join instead: Add or Concat
  JoinDim join_dim = nullptr;                          // the join's dimension (Concat), from its first input
  bool token_input = false;                            // as a network's first layer, it reads token ids (int64)
};

// Registers `layer` for `kind` (a static object in interop/layers/).
struct LayerRegistration {
  LayerRegistration(train_file::Layer::KindCase kind, FileLayer layer);
};

// The registration of `kind`, or null.
const FileLayer* find_layer(train_file::Layer::KindCase kind);
// Kinds registered more than once (each a mistake; the first registration is kept).
std::vector<std::string> duplicate_layers();

}  // namespace ember::model_file
