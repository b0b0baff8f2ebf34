#include "interop/onnx_layers.h"

#include <algorithm>
#include <unordered_map>

#include "core/autograd/grad_mode.h"
#include "core/ops.h"
#include "core/shape.h"

namespace ember::onnx {
namespace {

// Ember keeps PyTorch's gate order (LSTM i, f, g, o; GRU r, z, n); ONNX's is LSTM i, o, f, c and
// GRU z, r, h. `order` lists, for each ONNX gate, the Ember gate it takes.
Tensor reorder_gates(const Tensor& t, const std::vector<int64_t>& order) {
  const int64_t h = t.size(0) / static_cast<int64_t>(order.size());
  std::vector<Tensor> blocks;
  for (int64_t gate : order) blocks.push_back(t.narrow(0, gate * h, h));
  return cat(blocks, 0);
}

struct Registry {
  std::vector<Exporter> exporters;
  std::unordered_map<std::type_index, size_t> by_type;
  std::vector<std::string> duplicates;
  std::vector<size_t> by_name;  // indices sorted by name: the order the derived-type lookup tries
};

// Made on first use: registrations run during the library's static initialisation, in no set order.
Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

void register_exporter(Exporter exporter) {
  Registry& r = registry();
  if (r.by_type.count(exporter.type)) {
    r.duplicates.push_back(exporter.name);
    return;
  }
  r.by_type.emplace(exporter.type, r.exporters.size());
  r.exporters.push_back(std::move(exporter));
  r.by_name.clear();
  for (size_t i = 0; i < r.exporters.size(); ++i) r.by_name.push_back(i);
  std::stable_sort(r.by_name.begin(), r.by_name.end(),
                   [&](size_t a, size_t b) { return r.exporters[a].name < r.exporters[b].name; });
}

const Exporter* find_exporter(nn::Module& m) {
  const Registry& r = registry();
  auto it = r.by_type.find(std::type_index(typeid(m)));
  if (it != r.by_type.end()) return &r.exporters[it->second];
  for (size_t i : r.by_name)
    if (r.exporters[i].matches(m)) return &r.exporters[i];
  return nullptr;
}

std::vector<std::string> exporter_names() {
  const Registry& r = registry();
  std::vector<std::string> names;
  for (size_t i : r.by_name) names.push_back(r.exporters[i].name);
  return names;
}

std::vector<std::string> duplicate_exporters() {
  return registry().duplicates;
}

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
  if (const Exporter* e = find_exporter(module)) return e->emit(g, module, path, x);
  std::string exported;
  for (const std::string& name : exporter_names()) exported += (exported.empty() ? "" : ", ") + name;
  EMBER_FAIL("ONNX export: module '", path.empty() ? std::string("(the model)") : path, "' of type ",
             module.type_name(), " has no ONNX form (exported: ", exported,
             "; so the model zoo's MnistCnn, LeNet5, GAN generators and discriminators, and its "
             "LstmLanguageModel and BiLstmClassifier)");
}

}  // namespace ember::onnx
