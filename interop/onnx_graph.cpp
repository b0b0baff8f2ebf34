#include "interop/onnx_graph.h"

#include <type_traits>

#include "core/error.h"

namespace ember::onnx {

using onnx_schema::AttributeProto;
using onnx_schema::TensorProto;

int32_t onnx_element_type(DType dtype) {
  switch (dtype) {
    case DType::Float32:
      return TensorProto::FLOAT;
    case DType::Float64:
      return TensorProto::DOUBLE;
    case DType::Int32:
      return TensorProto::INT32;
    case DType::Int64:
      return TensorProto::INT64;
    case DType::UInt8:
      return TensorProto::UINT8;
    case DType::Bool:
      return TensorProto::BOOL;
    default:
      break;
  }
  EMBER_FAIL("ONNX export: tensors of dtype ", dtype_name(dtype),
             " are not exported (expected float32, float64, int32, int64, uint8 or bool)");
}

std::string GraphBuilder::fresh(const std::string& hint) {
  const std::string base = hint.empty() ? std::string("v") : hint;
  const int n = used_[base]++;
  return n == 0 ? base : base + "_" + std::to_string(n);
}

std::string GraphBuilder::initializer(const std::string& hint, const Tensor& t) {
  const Tensor host = t.detach().cpu().contiguous();
  TensorProto* p = graph_->add_initializer();
  const std::string name = fresh(hint);
  p->set_name(name);
  p->set_data_type(onnx_element_type(host.dtype()));
  for (int64_t d : host.shape()) p->add_dims(d);
  // raw_data is little-endian: so is every machine Ember builds for (x86-64 and AArch64 Linux).
  const size_t bytes = static_cast<size_t>(host.numel()) * itemsize(host.dtype());
  p->mutable_raw_data()->assign(static_cast<const char*>(host.raw_data()), bytes);
  return name;
}

std::string GraphBuilder::int64s(const std::string& hint, const std::vector<int64_t>& values) {
  TensorProto* p = graph_->add_initializer();
  const std::string name = fresh(hint);
  p->set_name(name);
  p->set_data_type(TensorProto::INT64);
  p->add_dims(static_cast<int64_t>(values.size()));
  for (int64_t v : values) p->add_int64_data(v);
  return name;
}

namespace {
void set_attribute(AttributeProto* a, const Attribute& attr) {
  a->set_name(attr.name);
  std::visit(
      [a](const auto& v) {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, int64_t>) {
          a->set_type(AttributeProto::INT);
          a->set_i(v);
        } else if constexpr (std::is_same_v<V, float>) {
          a->set_type(AttributeProto::FLOAT);
          a->set_f(v);
        } else if constexpr (std::is_same_v<V, std::string>) {
          a->set_type(AttributeProto::STRING);
          a->set_s(v);
        } else if constexpr (std::is_same_v<V, std::vector<int64_t>>) {
          a->set_type(AttributeProto::INTS);
          for (int64_t x : v) a->add_ints(x);
        } else if constexpr (std::is_same_v<V, std::vector<float>>) {
          a->set_type(AttributeProto::FLOATS);
          for (float x : v) a->add_floats(x);
        } else {
          a->set_type(AttributeProto::STRINGS);
          for (const std::string& x : v) a->add_strings(x);
        }
      },
      attr.value);
}

void set_value_info(onnx_schema::ValueInfoProto* v, const std::string& name, DType dtype, const Shape& shape,
                    const std::map<int64_t, std::string>& symbolic) {
  v->set_name(name);
  auto* tensor = v->mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(onnx_element_type(dtype));
  auto* dims = tensor->mutable_shape();
  for (size_t i = 0; i < shape.size(); ++i) {
    auto* d = dims->add_dim();
    if (auto it = symbolic.find(static_cast<int64_t>(i)); it != symbolic.end())
      d->set_dim_param(it->second);
    else
      d->set_dim_value(shape[i]);
  }
}
}  // namespace

std::vector<std::string> GraphBuilder::node(const std::string& op_type, const std::vector<std::string>& inputs,
                                            int outputs, const std::string& hint,
                                            const std::vector<Attribute>& attributes) {
  onnx_schema::NodeProto* n = graph_->add_node();
  n->set_op_type(op_type);
  n->set_name(fresh(hint + "/" + op_type));
  for (const std::string& in : inputs) n->add_input(in);
  std::vector<std::string> names;
  for (int i = 0; i < outputs; ++i) {
    names.push_back(fresh(outputs == 1 ? hint : hint + "." + std::to_string(i)));
    n->add_output(names.back());
  }
  for (const Attribute& a : attributes) set_attribute(n->add_attribute(), a);
  return names;
}

void GraphBuilder::input(const std::string& name, DType dtype, const Shape& shape,
                         const std::map<int64_t, std::string>& symbolic) {
  set_value_info(graph_->add_input(), name, dtype, shape, symbolic);
}

void GraphBuilder::output(const std::string& name, DType dtype, const Shape& shape,
                          const std::map<int64_t, std::string>& symbolic) {
  set_value_info(graph_->add_output(), name, dtype, shape, symbolic);
}

}  // namespace ember::onnx
