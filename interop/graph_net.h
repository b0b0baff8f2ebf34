// GraphNet: a network of named layers where a layer may read any earlier layer's output, and joins
// (a sum, a concatenation) combine several: what a model file (interop/model_file.h) describes when
// its network is more than a chain — a residual block, say. A chain is built as an nn::Sequential
// instead, which pipelines and ONNX export take.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "layers/module.h"

namespace ember::nn {

class GraphNet : public Module {
 public:
  enum class Join { None, Add, Concat };
  struct Node {
    std::string name;
    std::shared_ptr<Module> module = nullptr;  // null for a join
    Join join = Join::None;
    int64_t dim = 0;               // Concat's
    std::vector<int> inputs = {};  // node indices; -1 is the network's input
  };
  // `output`: the node whose value forward() returns.
  GraphNet(std::string type_name, std::vector<Node> nodes, int output);
  Tensor forward(const Tensor& input) override;
  std::string type_name() const override { return type_name_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  int output() const { return output_; }

 private:
  std::string type_name_;
  std::vector<Node> nodes_;
  int output_;
};

// What a join gives for its inputs (the checks a join's values must pass, in one place).
Tensor apply_join(GraphNet::Join join, int64_t dim, const std::vector<Tensor>& values);

}  // namespace ember::nn
