// Dropout (layers/dropout.h) in model files (dropout { p }) and in ONNX (Identity: in evaluation,
// dropout passes its input through).
#include "layers/dropout.h"

#include "interop/model_file_layers.h"
#include "interop/onnx_layers.h"

namespace ember {
namespace {

using train_file::Layer;

std::shared_ptr<nn::Module> dropout_from_file(const model_file::Site& at, const Layer& l, const Tensor&) {
  const double p = l.dropout().p();
  return std::make_shared<nn::Dropout>(
      at.real_or(l.dropout().has_p(), p, 0.5, "p", p >= 0 && p < 1, "a probability in [0, 1)"));
}

onnx::Traced dropout_to_onnx(onnx::GraphBuilder& g, nn::Dropout& m, const std::string& path, const onnx::Traced& x) {
  return {g.node1("Identity", {x.name}, path), m.forward(x.example)};
}

const model_file::LayerRegistration dropout_file{Layer::kDropout, {.build = dropout_from_file}};
const onnx::ExporterRegistration<nn::Dropout> dropout_onnx{"Dropout", dropout_to_onnx};

}  // namespace
}  // namespace ember
