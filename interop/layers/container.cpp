// Sequential (layers/container.h) and a model file's GraphNet (interop/graph_net.h) in ONNX: their
// elements' nodes in order, a GraphNet's joins as Sum and Concat; and the joins of model files
// (add, concat), which a GraphNet runs.
#include "layers/container.h"

#include "interop/graph_net.h"
#include "interop/model_file_layers.h"
#include "interop/onnx_layers.h"

namespace ember {
namespace {

using train_file::Layer;

int64_t concat_dim(const model_file::Site& at, const Layer& l, const Tensor& first) {
  return at.dimension(l.concat().has_dim() ? l.concat().dim() : 1, first.dim(), "dim");
}

// Its elements one after another (the model zoo's Sequential subclasses too: the export checks that
// they give what the model's own forward gives).
onnx::Traced sequential_to_onnx(onnx::GraphBuilder& g, nn::Sequential& seq, const std::string& path,
                                const onnx::Traced& x) {
  onnx::Traced v = x;
  for (const auto& [name, child] : seq.named_children())
    v = onnx::emit_module(g, *child, onnx::child_path(path, name), v);
  return v;
}

onnx::Traced graph_net_to_onnx(onnx::GraphBuilder& g, nn::GraphNet& net, const std::string& path,
                               const onnx::Traced& x) {
  std::vector<onnx::Traced> values;
  auto value = [&](int i) -> const onnx::Traced& { return i < 0 ? x : values[static_cast<size_t>(i)]; };
  for (const auto& node : net.nodes()) {
    const std::string p = onnx::child_path(path, node.name);
    if (node.module) {
      values.push_back(onnx::emit_module(g, *node.module, p, value(node.inputs.at(0))));
      continue;
    }
    std::vector<std::string> names;
    std::vector<Tensor> examples;
    for (int k : node.inputs) names.push_back(value(k).name), examples.push_back(value(k).example);
    const Tensor out = nn::apply_join(node.join, node.dim, examples);
    if (node.join == nn::GraphNet::Join::Concat) {
      values.push_back({g.node1("Concat", names, p, {{"axis", node.dim}}), out});
    } else {  // ONNX's Sum adds any number of inputs of one shape
      values.push_back({g.node1("Sum", names, p), out});
    }
  }
  return values[static_cast<size_t>(net.output())];
}

const onnx::ExporterRegistration<nn::Sequential> sequential_onnx{"Sequential", sequential_to_onnx};
const onnx::ExporterRegistration<nn::GraphNet> graph_net_onnx{"GraphNet", graph_net_to_onnx};
const model_file::LayerRegistration add_file{Layer::kAdd, {.join = nn::GraphNet::Join::Add}};
const model_file::LayerRegistration concat_file{Layer::kConcat,
                                                {.join = nn::GraphNet::Join::Concat, .join_dim = concat_dim}};

}  // namespace
}  // namespace ember
