// GraphBuilder: the small vocabulary the ONNX exporter writes graphs in — unique value names,
// initialisers from Ember tensors, constant shape vectors and nodes with attributes — over the
// Protobuf messages of proto/onnx_model.proto. It knows nothing of modules: interop/onnx_layers.h
// turns layers into its calls.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "core/tensor.h"
#include "onnx_model.pb.h"

namespace ember::onnx {

// One node attribute: an int, a float, a string, or a list of ints or floats or strings.
struct Attribute {
  using Value =
      std::variant<int64_t, float, std::string, std::vector<int64_t>, std::vector<float>, std::vector<std::string>>;
  std::string name;
  Value value;
};

class GraphBuilder {
 public:
  explicit GraphBuilder(onnx_schema::GraphProto* graph) : graph_(graph) {}

  // A value name not used before, made from `hint` ("c1.weight", "relu1").
  std::string fresh(const std::string& hint);
  // An initialiser holding `t` (float32, float64, int32 or int64; copied to the host, C order).
  std::string initializer(const std::string& hint, const Tensor& t);
  // A constant int64 vector (Reshape's shape, Transpose-free constants).
  std::string int64s(const std::string& hint, const std::vector<int64_t>& values);
  // Appends a node and returns its `outputs` output names (made from `hint`). An empty input name
  // stands for an omitted optional input, as ONNX spells it.
  std::vector<std::string> node(const std::string& op_type, const std::vector<std::string>& inputs, int outputs,
                                const std::string& hint, const std::vector<Attribute>& attributes = {});
  // A node with one output.
  std::string node1(const std::string& op_type, const std::vector<std::string>& inputs, const std::string& hint,
                    const std::vector<Attribute>& attributes = {}) {
    return node(op_type, inputs, 1, hint, attributes)[0];
  }

  // Graph inputs and outputs: element type from `dtype`, dimensions from `shape`, where a
  // dimension named in `symbolic` ({index, "batch"}) is left free under that name.
  void input(const std::string& name, DType dtype, const Shape& shape, const std::map<int64_t, std::string>& symbolic);
  void output(const std::string& name, DType dtype, const Shape& shape, const std::map<int64_t, std::string>& symbolic);

 private:
  onnx_schema::GraphProto* graph_;
  std::map<std::string, int> used_;
};

// The ONNX element type of an Ember dtype (float32, float64, int32, int64, uint8, bool); an
// ember::Error for the others.
int32_t onnx_element_type(DType dtype);

}  // namespace ember::onnx
