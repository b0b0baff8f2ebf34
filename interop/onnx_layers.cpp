#include "interop/onnx_layers.h"

#include "core/autograd/grad_mode.h"
#include "core/ops.h"
#include "core/shape.h"
#include "interop/graph_net.h"
#include "layers/nn.h"

namespace ember::onnx {
namespace {

std::vector<int64_t> pair(const nn::Size2& s) {
  return {s.h, s.w};
}
// ONNX's pads: every dimension's start, then every dimension's end.
std::vector<int64_t> pads4(int64_t top, int64_t left, int64_t bottom, int64_t right) {
  return {top, left, bottom, right};
}

std::string child_path(const std::string& path, const std::string& name) {
  return path.empty() ? name : path + "." + name;
}

Traced conv2d(GraphBuilder& g, nn::Conv2d& m, const std::string& path, const Traced& x) {
  const auto& o = m.options;
  std::vector<int64_t> pads;
  if (o.padding.same) {
    // PyTorch's split, which Ember's conv2d follows: the odd pixel goes to the bottom/right.
    const int64_t th = o.dilation.h * (m.kernel_size.h - 1), tw = o.dilation.w * (m.kernel_size.w - 1);
    pads = pads4(th / 2, tw / 2, th - th / 2, tw - tw / 2);
  } else {
    pads = pads4(o.padding.size.h, o.padding.size.w, o.padding.size.h, o.padding.size.w);
  }
  std::vector<std::string> in{x.name, g.initializer(path + ".weight", m.weight)};
  if (m.bias.defined()) in.push_back(g.initializer(path + ".bias", m.bias));
  return {g.node1("Conv", in, path,
                  {{"kernel_shape", pair(m.kernel_size)},
                   {"strides", pair(o.stride)},
                   {"pads", pads},
                   {"dilations", pair(o.dilation)},
                   {"group", o.groups}}),
          m(x.example)};
}

Traced conv_transpose2d(GraphBuilder& g, nn::ConvTranspose2d& m, const std::string& path, const Traced& x) {
  const auto& o = m.options;
  std::vector<std::string> in{x.name, g.initializer(path + ".weight", m.weight)};
  if (m.bias.defined()) in.push_back(g.initializer(path + ".bias", m.bias));
  return {g.node1("ConvTranspose", in, path,
                  {{"kernel_shape", pair(m.kernel_size)},
                   {"strides", pair(o.stride)},
                   {"pads", pads4(o.padding.h, o.padding.w, o.padding.h, o.padding.w)},
                   {"output_padding", pair(o.output_padding)},
                   {"dilations", pair(o.dilation)},
                   {"group", o.groups}}),
          m(x.example)};
}

Traced linear(GraphBuilder& g, nn::Linear& m, const std::string& path, const Traced& x) {
  const Tensor y = m(x.example);
  if (x.example.dim() == 2) {
    std::vector<std::string> in{x.name, g.initializer(path + ".weight", m.weight)};
    if (m.bias.defined()) in.push_back(g.initializer(path + ".bias", m.bias));
    return {g.node1("Gemm", in, path, {{"transB", int64_t{1}}}), y};
  }
  // Any other rank ([B, T, F] from an RNN): MatMul broadcasts over the leading dimensions.
  const std::string w = g.initializer(path + ".weight_t", m.weight.t().contiguous());
  std::string out = g.node1("MatMul", {x.name, w}, m.bias.defined() ? path + ".matmul" : path);
  if (m.bias.defined()) out = g.node1("Add", {out, g.initializer(path + ".bias", m.bias)}, path);
  return {out, y};
}

Traced batch_norm(GraphBuilder& g, nn::BatchNormBase& m, const std::string& path, const Traced& x) {
  EMBER_CHECK(m.options.track_running_stats, "ONNX export: ", m.type_name(), " '", path,
              "' keeps no running statistics, so in evaluation it normalises with each batch's own: "
              "ONNX's BatchNormalization needs the running mean and variance");
  const TensorOptions f32{m.running_mean.dtype(), Device::cpu()};
  const Tensor scale = m.weight.defined() ? m.weight : ones({m.num_features}, f32);
  const Tensor shift = m.bias.defined() ? m.bias : zeros({m.num_features}, f32);
  return {g.node1("BatchNormalization",
                  {x.name, g.initializer(path + ".weight", scale), g.initializer(path + ".bias", shift),
                   g.initializer(path + ".running_mean", m.running_mean),
                   g.initializer(path + ".running_var", m.running_var)},
                  path, {{"epsilon", static_cast<float>(m.options.eps)}}),
          m(x.example)};
}

Traced layer_norm(GraphBuilder& g, nn::LayerNorm& m, const std::string& path, const Traced& x) {
  const TensorOptions f32{x.example.dtype(), Device::cpu()};
  const Tensor scale = m.weight.defined() ? m.weight : ones(m.normalized_shape, f32);
  std::vector<std::string> in{x.name, g.initializer(path + ".weight", scale)};
  if (m.bias.defined()) in.push_back(g.initializer(path + ".bias", m.bias));
  return {g.node1("LayerNormalization", in, path,
                  {{"axis", -static_cast<int64_t>(m.normalized_shape.size())},
                   {"epsilon", static_cast<float>(m.options.eps)}}),
          m(x.example)};
}

Traced pool(GraphBuilder& g, nn::Module& m, const char* op, nn::Size2 kernel, const nn::Pool2dOptions& o, bool average,
            const std::string& path, const Traced& x) {
  const nn::Size2 stride = o.stride == nn::Size2(0) ? kernel : o.stride;
  std::vector<Attribute> attrs{{"kernel_shape", pair(kernel)},
                               {"strides", pair(stride)},
                               {"pads", pads4(o.padding.h, o.padding.w, o.padding.h, o.padding.w)},
                               {"ceil_mode", int64_t{o.ceil_mode ? 1 : 0}}};
  if (average) attrs.push_back({"count_include_pad", int64_t{o.count_include_pad ? 1 : 0}});
  return {g.node1(op, {x.name}, path, attrs), m(x.example)};
}

Traced adaptive_avg_pool(GraphBuilder& g, nn::AdaptiveAvgPool2d& m, const std::string& path, const Traced& x) {
  const Tensor y = m(x.example);
  const int64_t H = x.example.size(-2), W = x.example.size(-1), OH = y.size(-2), OW = y.size(-1);
  if (OH == 1 && OW == 1) return {g.node1("GlobalAveragePool", {x.name}, path), y};
  // Equal windows exist only when the output size divides the input's.
  EMBER_CHECK(H % OH == 0 && W % OW == 0, "ONNX export: AdaptiveAvgPool2d '", path, "' maps ", H, "x", W, " to ", OH,
              "x", OW,
              ", whose windows are unequal: ONNX has no adaptive pooling (expected an output "
              "size that divides the input size, or 1x1)");
  return {g.node1("AveragePool", {x.name}, path,
                  {{"kernel_shape", std::vector<int64_t>{H / OH, W / OW}},
                   {"strides", std::vector<int64_t>{H / OH, W / OW}}}),
          y};
}

// Reshape to `shape`, where 0 keeps the input's dimension (the batch stays free).
Traced reshape(GraphBuilder& g, const std::vector<int64_t>& shape, const std::string& path, const Traced& x, Tensor y) {
  return {g.node1("Reshape", {x.name, g.int64s(path + ".shape", shape)}, path), std::move(y)};
}

Traced flatten(GraphBuilder& g, nn::Flatten& m, const std::string& path, const Traced& x) {
  const Tensor y = m(x.example);
  const int64_t rank = x.example.dim();
  const int64_t start = wrap_dim(m.start_dim, rank, "Flatten"), end = wrap_dim(m.end_dim, rank, "Flatten");
  if (start == 1 && end == rank - 1) return {g.node1("Flatten", {x.name}, path, {{"axis", int64_t{1}}}), y};
  std::vector<int64_t> shape(static_cast<size_t>(start), 0);
  shape.push_back(-1);
  for (int64_t d = end + 1; d < rank; ++d) shape.push_back(x.example.size(d));
  return reshape(g, shape, path, x, y);
}

Traced unflatten(GraphBuilder& g, nn::Unflatten& m, const std::string& path, const Traced& x) {
  const Tensor y = m(x.example);
  const int64_t rank = x.example.dim();
  const int64_t dim = wrap_dim(m.dim, rank, "Unflatten");
  EMBER_CHECK(dim > 0, "ONNX export: Unflatten '", path,
              "' splits dimension 0, the batch, which the model "
              "leaves free (expected a later dimension)");
  std::vector<int64_t> shape(static_cast<size_t>(dim), 0);
  shape.insert(shape.end(), m.sizes.begin(), m.sizes.end());
  for (int64_t d = dim + 1; d < rank; ++d) shape.push_back(x.example.size(d));
  return reshape(g, shape, path, x, y);
}

Traced gelu(GraphBuilder& g, nn::GELU& m, const std::string& path, const Traced& x) {
  // Opset 17 has no Gelu: written out as PyTorch defines it.
  const Tensor y = m(x.example);
  const TensorOptions opts{x.example.dtype(), Device::cpu()};
  auto scalar = [&](const std::string& hint, double v) { return g.initializer(path + "." + hint, full({}, v, opts)); };
  std::string inner;
  if (m.tanh_approximation) {  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    const std::string cube = g.node1("Mul", {g.node1("Mul", {x.name, x.name}, path + ".sq"), x.name}, path + ".cube");
    const std::string sum =
        g.node1("Add", {x.name, g.node1("Mul", {cube, scalar("c", 0.044715)}, path + ".cx")}, path + ".sum");
    inner = g.node1("Tanh", {g.node1("Mul", {sum, scalar("k", 0.7978845608028654)}, path + ".arg")}, path + ".tanh");
  } else {  // 0.5 x (1 + erf(x / sqrt(2)))
    inner =
        g.node1("Erf", {g.node1("Mul", {x.name, scalar("rsqrt2", 0.7071067811865476)}, path + ".arg")}, path + ".erf");
  }
  const std::string one_plus = g.node1("Add", {inner, scalar("one", 1.0)}, path + ".onep");
  const std::string half_x = g.node1("Mul", {x.name, scalar("half", 0.5)}, path + ".halfx");
  return {g.node1("Mul", {half_x, one_plus}, path), y};
}

Traced embedding(GraphBuilder& g, nn::Embedding& m, const std::string& path, const Traced& x) {
  return {g.node1("Gather", {g.initializer(path + ".weight", m.weight), x.name}, path, {{"axis", int64_t{0}}}),
          m(x.example)};
}

// Ember keeps PyTorch's gate order (LSTM i, f, g, o; GRU r, z, n); ONNX's is LSTM i, o, f, c and
// GRU z, r, h. `order` lists, for each ONNX gate, the Ember gate it takes.
Tensor reorder_gates(const Tensor& t, const std::vector<int64_t>& order) {
  const int64_t h = t.size(0) / static_cast<int64_t>(order.size());
  std::vector<Tensor> blocks;
  for (int64_t gate : order) blocks.push_back(t.narrow(0, gate * h, h));
  return cat(blocks, 0);
}

}  // namespace

TracedRnn emit_rnn(GraphBuilder& g, nn::RNNBase& rnn, const std::string& path, const Traced& x,
                   const std::string& lengths, const std::vector<int64_t>& example_lengths) {
  EMBER_CHECK(x.example.dim() == 3, "ONNX export: ", rnn.type_name(), " '", path, "' takes an unbatched input ",
              shape_str(x.example.shape()), " (expected [B, T, features] with batch_first, else [T, B, features])");
  NoGradGuard no_grad;
  const nn::RnnOutput ember_out = rnn.forward(x.example, {}, example_lengths);
  const bool two = rnn.bidirectional;
  const int64_t H = rnn.hidden_size;
  const char* op = nullptr;
  std::vector<int64_t> order;
  std::vector<Attribute> attrs{{"hidden_size", H}, {"direction", std::string(two ? "bidirectional" : "forward")}};
  switch (rnn.mode) {
    case RnnMode::Lstm:
      op = "LSTM", order = {0, 3, 1, 2};
      break;
    case RnnMode::Gru:
      // PyTorch applies the reset gate after the hidden state's product: ONNX's linear_before_reset.
      op = "GRU", order = {1, 0, 2};
      attrs.push_back({"linear_before_reset", int64_t{1}});
      break;
    case RnnMode::RnnTanh:
    case RnnMode::RnnRelu: {
      op = "RNN", order = {0};
      const std::string f = rnn.mode == RnnMode::RnnTanh ? "Tanh" : "Relu";
      attrs.push_back({"activations", two ? std::vector<std::string>{f, f} : std::vector<std::string>{f}});
      break;
    }
  }
  // ONNX's RNN operators take [T, B, features].
  std::string seq =
      rnn.batch_first ? g.node1("Transpose", {x.name}, path + ".time_major", {{"perm", std::vector<int64_t>{1, 0, 2}}})
                      : x.name;
  TracedRnn out;
  for (int64_t l = 0; l < rnn.num_layers; ++l) {
    const std::string lp = path + ".l" + std::to_string(l);
    std::vector<Tensor> w, r, b;
    for (bool reverse : two ? std::vector<bool>{false, true} : std::vector<bool>{false}) {
      w.push_back(reorder_gates(rnn.weight_ih(l, reverse), order).unsqueeze(0));
      r.push_back(reorder_gates(rnn.weight_hh(l, reverse), order).unsqueeze(0));
      if (rnn.bias)
        b.push_back(
            cat({reorder_gates(rnn.bias_ih(l, reverse), order), reorder_gates(rnn.bias_hh(l, reverse), order)}, 0)
                .unsqueeze(0));
    }
    std::vector<std::string> in{seq, g.initializer(lp + ".W", cat(w, 0)), g.initializer(lp + ".R", cat(r, 0)),
                                rnn.bias ? g.initializer(lp + ".B", cat(b, 0)) : std::string()};
    if (!lengths.empty()) in.push_back(lengths);
    while (in.back().empty()) in.pop_back();  // an omitted optional input at the end is left out
    const std::vector<std::string> y = g.node(op, in, 2, lp, attrs);  // Y [T, D, B, H], Y_h [D, B, H]
    out.h_n.push_back(y[1]);
    // [T, D, B, H] -> [T, B, D*H]: the directions side by side, as Ember concatenates them.
    const std::string tbdh = g.node1("Transpose", {y[0]}, lp + ".tbdh", {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
    seq = g.node1("Reshape", {tbdh, g.int64s(lp + ".shape", {0, 0, -1})}, lp + ".out");
  }
  if (rnn.batch_first)
    seq = g.node1("Transpose", {seq}, path + ".batch_major", {{"perm", std::vector<int64_t>{1, 0, 2}}});
  out.output = {seq, ember_out.output};
  out.h_n_example = ember_out.h_n;
  return out;
}

Traced emit_module(GraphBuilder& g, nn::Module& module, const std::string& path, const Traced& x) {
  nn::Module* m = &module;
  if (auto* seq = dynamic_cast<nn::Sequential*>(m)) {
    Traced v = x;
    for (const auto& [name, child] : seq->named_children()) v = emit_module(g, *child, child_path(path, name), v);
    return v;
  }
  if (auto* net = dynamic_cast<nn::GraphNet*>(m)) {  // a model file's network with joins
    std::vector<Traced> values;
    auto value = [&](int i) -> const Traced& { return i < 0 ? x : values[static_cast<size_t>(i)]; };
    for (const auto& node : net->nodes()) {
      const std::string p = child_path(path, node.name);
      if (node.module) {
        values.push_back(emit_module(g, *node.module, p, value(node.inputs.at(0))));
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
    return values[static_cast<size_t>(net->output())];
  }
  if (auto* l = dynamic_cast<nn::Conv2d*>(m)) return conv2d(g, *l, path, x);
  if (auto* l = dynamic_cast<nn::ConvTranspose2d*>(m)) return conv_transpose2d(g, *l, path, x);
  if (auto* l = dynamic_cast<nn::Linear*>(m)) return linear(g, *l, path, x);
  if (auto* l = dynamic_cast<nn::BatchNormBase*>(m)) return batch_norm(g, *l, path, x);
  if (auto* l = dynamic_cast<nn::LayerNorm*>(m)) return layer_norm(g, *l, path, x);
  if (auto* l = dynamic_cast<nn::MaxPool2d*>(m))
    return pool(g, *l, "MaxPool", l->kernel_size, l->options, false, path, x);
  if (auto* l = dynamic_cast<nn::AvgPool2d*>(m))
    return pool(g, *l, "AveragePool", l->kernel_size, l->options, true, path, x);
  if (auto* l = dynamic_cast<nn::AdaptiveAvgPool2d*>(m)) return adaptive_avg_pool(g, *l, path, x);
  if (auto* l = dynamic_cast<nn::Flatten*>(m)) return flatten(g, *l, path, x);
  if (auto* l = dynamic_cast<nn::Unflatten*>(m)) return unflatten(g, *l, path, x);
  if (auto* l = dynamic_cast<nn::Embedding*>(m)) return embedding(g, *l, path, x);
  if (auto* l = dynamic_cast<nn::GELU*>(m)) return gelu(g, *l, path, x);
  if (auto* l = dynamic_cast<nn::RnnSequence*>(m)) return emit_rnn(g, *l->rnn, path, x).output;
  // In evaluation, dropout passes its input through.
  if (dynamic_cast<nn::Dropout*>(m) || dynamic_cast<nn::Identity*>(m))
    return {g.node1("Identity", {x.name}, path), m->forward(x.example)};
  if (dynamic_cast<nn::ReLU*>(m)) return {g.node1("Relu", {x.name}, path), m->forward(x.example)};
  if (dynamic_cast<nn::Sigmoid*>(m)) return {g.node1("Sigmoid", {x.name}, path), m->forward(x.example)};
  if (dynamic_cast<nn::Tanh*>(m)) return {g.node1("Tanh", {x.name}, path), m->forward(x.example)};
  if (auto* l = dynamic_cast<nn::LeakyReLU*>(m))
    return {g.node1("LeakyRelu", {x.name}, path, {{"alpha", static_cast<float>(l->negative_slope)}}),
            m->forward(x.example)};
  if (auto* l = dynamic_cast<nn::ELU*>(m))
    return {g.node1("Elu", {x.name}, path, {{"alpha", static_cast<float>(l->alpha)}}), m->forward(x.example)};
  if (auto* l = dynamic_cast<nn::Softmax*>(m))
    return {g.node1("Softmax", {x.name}, path, {{"axis", l->dim}}), m->forward(x.example)};
  if (auto* l = dynamic_cast<nn::LogSoftmax*>(m))
    return {g.node1("LogSoftmax", {x.name}, path, {{"axis", l->dim}}), m->forward(x.example)};
  EMBER_FAIL("ONNX export: module '", path.empty() ? std::string("(the model)") : path, "' of type ",
             module.type_name(),
             " has no ONNX form (exported: Sequential and its elements; Conv2d, ConvTranspose2d, Linear, "
             "BatchNorm1d/2d, LayerNorm, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, Flatten, Unflatten, Embedding, "
             "RNN/LSTM/GRU, Dropout, Identity and the activations; a model file's GraphNet; the model zoo's "
             "MnistCnn, LeNet5, GAN generators and discriminators, LstmLanguageModel and BiLstmClassifier)");
}

}  // namespace ember::onnx
