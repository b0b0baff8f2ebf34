#include "interop/graph_net.h"

#include "core/error.h"
#include "core/ops.h"

namespace ember::nn {

GraphNet::GraphNet(std::string type_name, std::vector<Node> nodes, int output)
    : type_name_(std::move(type_name)), nodes_(std::move(nodes)), output_(output) {
  EMBER_CHECK(output_ >= 0 && output_ < static_cast<int>(nodes_.size()), type_name_, ": output node ", output_,
              " is not one of its ", nodes_.size(), " nodes");
  for (size_t i = 0; i < nodes_.size(); ++i) {
    for (int in : nodes_[i].inputs)
      EMBER_CHECK(in >= -1 && in < static_cast<int>(i), type_name_, ": node '", nodes_[i].name, "' reads node ", in,
                  ", which does not come before it");
    if (nodes_[i].module) register_module(nodes_[i].name, nodes_[i].module);
  }
}

Tensor apply_join(GraphNet::Join join, int64_t dim, const std::vector<Tensor>& values) {
  EMBER_CHECK(values.size() >= 2, "a join takes at least 2 inputs, got ", values.size());
  if (join == GraphNet::Join::Concat) return cat(values, dim);
  Tensor sum = values[0];
  for (size_t i = 1; i < values.size(); ++i) {
    EMBER_CHECK(values[i].shape() == values[0].shape(), "add: inputs ", shape_str(values[0].shape()), " and ",
                shape_str(values[i].shape()), " differ (an add joins values of one shape)");
    sum = sum + values[i];
  }
  return sum;
}

Tensor GraphNet::forward(const Tensor& input) {
  std::vector<Tensor> values(nodes_.size());
  auto value = [&](int i) -> const Tensor& { return i < 0 ? input : values[static_cast<size_t>(i)]; };
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    if (n.module) {
      values[i] = (*n.module)(value(n.inputs.at(0)));
    } else {
      std::vector<Tensor> in;
      for (int k : n.inputs) in.push_back(value(k));
      values[i] = apply_join(n.join, n.dim, in);
    }
  }
  return values[static_cast<size_t>(output_)];
}

}  // namespace ember::nn
