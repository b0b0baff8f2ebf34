#include "interop/model_file.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <filesystem>
#include <map>

#include "core/autograd/grad_mode.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/ops.h"
#include "interop/graph_net.h"
#include "layers/nn.h"

namespace ember::model_file {

namespace pb = google::protobuf;
using train_file::Layer;

struct LoadedFile::Where {
  pb::TextFormat::ParseInfoTree tree;
};

namespace {

const pb::FieldDescriptor* field_of(const pb::Descriptor* d, const std::string& name) {
  const pb::FieldDescriptor* f = d->FindFieldByName(name);
  EMBER_CHECK(f, "model file: the schema has no field '", name, "' in ", d->name());
  return f;
}

std::string line_of(const std::string& path, int line) {
  return path + ":" + std::to_string(line + 1);
}

// Protobuf's own messages for syntax errors, unknown fields and values of the wrong type, each
// with its line and column.
class Collector : public pb::io::ErrorCollector {
 public:
  explicit Collector(std::string path) : path_(std::move(path)) {}
  void AddError(int line, pb::io::ColumnNumber column, const std::string& message) override {
    if (first_.empty())
      first_ = path_ + ":" + std::to_string(line + 1) + ":" + std::to_string(column + 1) + ": " + message;
  }
  void AddWarning(int, pb::io::ColumnNumber, const std::string&) override {}
  const std::string& first() const { return first_; }

 private:
  std::string path_, first_;
};

}  // namespace

std::string LoadedFile::at(int network, int layer, const std::string& field) const {
  const pb::Descriptor* top = train_file::TrainFile::descriptor();
  const pb::FieldDescriptor* nf = field_of(top, "network");
  int line = where->tree.GetLocation(nf, network).line;
  if (layer >= 0) {
    const pb::TextFormat::ParseInfoTree* nt = where->tree.GetTreeForNested(nf, network);
    const pb::FieldDescriptor* lf = field_of(train_file::Network::descriptor(), "layer");
    if (nt) line = nt->GetLocation(lf, layer).line;
    if (nt && !field.empty()) {
      const pb::TextFormat::ParseInfoTree* lt = nt->GetTreeForNested(lf, layer);
      const pb::FieldDescriptor* ff = field_of(Layer::descriptor(), field);
      if (lt) {
        const int fl = lt->GetLocation(ff, ff->is_repeated() ? 0 : -1).line;
        if (fl >= 0) line = fl;
      }
    }
  }
  return line_of(path, line);
}

std::string LoadedFile::at_top(const std::string& field) const {
  return line_of(path, where->tree.GetLocation(field_of(train_file::TrainFile::descriptor(), field), -1).line);
}

std::string LoadedFile::resolve(const std::string& named) const {
  const std::filesystem::path p = named;
  return p.is_absolute() ? named : (std::filesystem::path(path).parent_path() / p).string();
}

Tensor example_input(const train_file::Network& n, int64_t batch) {
  Shape shape{batch};
  shape.insert(shape.end(), n.input_shape().begin(), n.input_shape().end());
  const bool tokens = n.layer_size() > 0 && n.layer(0).kind_case() == Layer::kEmbedding;
  return zeros(shape, {.dtype = tokens ? DType::Int64 : DType::Float32});
}

LoadedFile load(const std::string& path) {
  const std::string text = read_input_file(path, "a model file in Protobuf text format");
  LoadedFile f;
  f.path = path;
  f.where = std::make_shared<LoadedFile::Where>();
  pb::TextFormat::Parser parser;
  Collector errors(path);
  parser.RecordErrorsTo(&errors);
  parser.WriteLocationsTo(&f.where->tree);
  if (!parser.ParseFromString(text, &f.spec)) {
    EMBER_FAIL(errors.first().empty() ? path + ": cannot be parsed" : errors.first());
  }
  const auto& s = f.spec;
  EMBER_CHECK(s.version() != 0, path, ": version is missing (expected 'version: ", kVersion, "' at the top)");
  EMBER_CHECK(s.version() <= kVersion, f.at_top("version"), ": version ", s.version(),
              " is newer than this Ember reads (", kVersion, "): use a newer Ember");
  EMBER_CHECK(s.version() >= 1, f.at_top("version"), ": version ", s.version(), " is not a version (expected ",
              kVersion, ")");
  EMBER_CHECK(!s.name().empty(), path, ": name is missing (expected 'name: \"...\"': the run's name)");
  EMBER_CHECK(s.network_size() > 0, path, ": no network (expected at least one 'network { ... }')");
  std::map<std::string, int> names;
  for (int i = 0; i < s.network_size(); ++i) {
    const auto& n = s.network(i);
    EMBER_CHECK(!n.name().empty(), f.at(i), ": a network without a name");
    EMBER_CHECK(names.emplace(n.name(), i).second, f.at(i), ": a second network named '", n.name(), "'");
    EMBER_CHECK(n.input_shape_size() > 0, f.at(i), ": network '", n.name(),
                "': input_shape is missing (one example's shape without the batch, e.g. [1, 28, 28])");
    for (int64_t d : n.input_shape())
      EMBER_CHECK(d > 0, f.at(i), ": network '", n.name(), "': input_shape has a dimension ", d,
                  " (expected positive sizes)");
    EMBER_CHECK(n.layer_size() > 0, f.at(i), ": network '", n.name(), "' has no layer");
  }
  EMBER_CHECK(s.task_case() != train_file::TrainFile::TASK_NOT_SET, path,
              ": no task (expected 'classifier { ... }', 'gan { ... }' or 'language_model { ... }')");
  EMBER_CHECK(s.has_data() && s.data().source_case() != train_file::Data::SOURCE_NOT_SET, path,
              ": no data source (expected 'data { mnist { ... } batch_size: N }', or image_folder, csv, text)");
  return f;
}

int network_index(const LoadedFile& file, const std::string& name, const std::string& who) {
  const auto& s = file.spec;
  if (name.empty()) {
    EMBER_CHECK(s.network_size() == 1, file.at_top(who), ": ", who, " names no network, and the file has ",
                s.network_size(), " (expected 'network: \"NAME\"')");
    return 0;
  }
  for (int i = 0; i < s.network_size(); ++i)
    if (s.network(i).name() == name) return i;
  EMBER_FAIL(file.at_top(who), ": ", who, " names network '", name, "', which the file does not define");
}

namespace {

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
};

// A pair given as [], [n] or [h, w].
nn::Size2 size2(const Site& at, const pb::RepeatedField<int64_t>& v, const std::string& what, nn::Size2 def,
                int64_t min) {
  at.check(v.size() <= 2, at.kind, what + " has " + std::to_string(v.size()) + " values (expected 1 or 2)");
  if (v.empty()) return def;
  const nn::Size2 s = v.size() == 1 ? nn::Size2(v[0]) : nn::Size2(v[0], v[1]);
  at.check(s.h >= min && s.w >= min, at.kind,
           what + " is " + s.str() + " (expected values of at least " + std::to_string(min) + ")");
  return s;
}

int64_t channels(const Site& at, const Tensor& x, int64_t rank) {
  at.check(
      x.dim() == rank, at.kind,
      "its input is " + shape_str(x.shape()) + " (expected " + std::to_string(rank) + " dimensions, batch included)");
  return x.size(1);
}

std::shared_ptr<nn::Module> make_layer(const Site& at, const Layer& l, const Tensor& x) {
  switch (l.kind_case()) {
    case Layer::kConv2D: {
      const auto& c = l.conv2d();
      at.check(c.out_channels() > 0, "conv2d", "out_channels is missing (expected a positive number)");
      at.check(!c.kernel().empty(), "conv2d", "kernel is missing (expected [k] or [kh, kw])");
      nn::Conv2dOptions o{
          .stride = size2(at, c.stride(), "stride", 1, 1),
          .padding = c.same() ? nn::ConvPadding("same") : nn::ConvPadding(size2(at, c.padding(), "padding", 0, 0)),
          .dilation = size2(at, c.dilation(), "dilation", 1, 1),
          .groups = c.groups() == 0 ? 1 : c.groups(),
          .bias = !c.no_bias()};
      return std::make_shared<nn::Conv2d>(channels(at, x, 4), c.out_channels(), size2(at, c.kernel(), "kernel", 1, 1),
                                          o);
    }
    case Layer::kConvTranspose2D: {
      const auto& c = l.conv_transpose2d();
      at.check(c.out_channels() > 0, "conv_transpose2d", "out_channels is missing (expected a positive number)");
      at.check(!c.kernel().empty(), "conv_transpose2d", "kernel is missing (expected [k] or [kh, kw])");
      nn::ConvTranspose2dOptions o{.stride = size2(at, c.stride(), "stride", 1, 1),
                                   .padding = size2(at, c.padding(), "padding", 0, 0),
                                   .output_padding = size2(at, c.output_padding(), "output_padding", 0, 0),
                                   .dilation = size2(at, c.dilation(), "dilation", 1, 1),
                                   .groups = c.groups() == 0 ? 1 : c.groups(),
                                   .bias = !c.no_bias()};
      return std::make_shared<nn::ConvTranspose2d>(channels(at, x, 4), c.out_channels(),
                                                   size2(at, c.kernel(), "kernel", 1, 1), o);
    }
    case Layer::kLinear: {
      const int64_t out = l.linear().to_vocabulary() ? at.sized_by_vocabulary("linear") : l.linear().out_features();
      at.check(out > 0, "linear", "out_features is missing (expected a positive number, or to_vocabulary)");
      at.check(x.dim() >= 2, "linear", "its input is " + shape_str(x.shape()) + " (expected [N, features])");
      return std::make_shared<nn::Linear>(x.size(-1), out, nn::LinearOptions{.bias = !l.linear().no_bias()});
    }
    case Layer::kEmbedding: {
      const auto& e = l.embedding();
      const int64_t n = e.num_embeddings() > 0 ? e.num_embeddings() : at.sized_by_vocabulary("embedding");
      at.check(e.dim() > 0, "embedding", "dim is missing (expected a positive number)");
      at.check(!is_floating(x.dtype()), "embedding",
               "its input is " + std::string(dtype_name(x.dtype())) +
                   " (expected token ids: put it first in a network of a text source)");
      return std::make_shared<nn::Embedding>(n, e.dim());
    }
    case Layer::kLstm:
    case Layer::kGru:
    case Layer::kRnn: {
      const auto& r = l.kind_case() == Layer::kLstm ? l.lstm() : l.kind_case() == Layer::kGru ? l.gru() : l.rnn();
      at.check(r.hidden() > 0, at.kind, "hidden is missing (expected a positive number)");
      at.check(r.dropout() >= 0 && r.dropout() < 1, at.kind, "dropout must be in [0, 1)");
      at.check(x.dim() == 3, at.kind, "its input is " + shape_str(x.shape()) + " (expected [N, T, features])");
      const int64_t layers = r.layers() == 0 ? 1 : r.layers();
      std::shared_ptr<nn::RNNBase> rnn;
      if (l.kind_case() == Layer::kRnn) {
        rnn = std::make_shared<nn::RNN>(
            x.size(2), r.hidden(),
            nn::RNNOptions{.num_layers = layers,
                           .nonlinearity = r.relu() ? nn::RnnNonlinearity::Relu : nn::RnnNonlinearity::Tanh,
                           .batch_first = true,
                           .dropout = r.dropout(),
                           .bidirectional = r.bidirectional()});
      } else {
        const nn::LSTMOptions o{
            .num_layers = layers, .batch_first = true, .dropout = r.dropout(), .bidirectional = r.bidirectional()};
        if (l.kind_case() == Layer::kLstm)
          rnn = std::make_shared<nn::LSTM>(x.size(2), r.hidden(), o);
        else
          rnn = std::make_shared<nn::GRU>(x.size(2), r.hidden(), o);
      }
      return std::make_shared<nn::RnnSequence>(rnn);
    }
    case Layer::kBatchNorm: {
      const nn::BatchNormOptions o{.eps = l.batch_norm().has_eps() ? l.batch_norm().eps() : 1e-5,
                                   .momentum = l.batch_norm().has_momentum() ? l.batch_norm().momentum() : 0.1};
      if (x.dim() == 4) return std::make_shared<nn::BatchNorm2d>(x.size(1), o);
      at.check(x.dim() == 2 || x.dim() == 3, "batch_norm",
               "its input is " + shape_str(x.shape()) + " (expected [N, C], [N, C, L] or [N, C, H, W])");
      return std::make_shared<nn::BatchNorm1d>(x.size(1), o);
    }
    case Layer::kLayerNorm: {
      const int64_t k = l.layer_norm().last_dims() == 0 ? 1 : l.layer_norm().last_dims();
      at.check(k >= 1 && k < x.dim(), "layer_norm",
               "last_dims " + std::to_string(k) + " for input " + shape_str(x.shape()) + " (expected 1 to rank - 1)");
      const Shape shape(x.shape().end() - k, x.shape().end());
      return std::make_shared<nn::LayerNorm>(
          shape, nn::LayerNormOptions{.eps = l.layer_norm().has_eps() ? l.layer_norm().eps() : 1e-5});
    }
    case Layer::kMaxPool2D:
    case Layer::kAvgPool2D: {
      const auto& p = l.kind_case() == Layer::kMaxPool2D ? l.max_pool2d() : l.avg_pool2d();
      const std::string kind = l.kind_case() == Layer::kMaxPool2D ? "max_pool2d" : "avg_pool2d";
      at.check(!p.kernel().empty(), kind, "kernel is missing (expected [k] or [kh, kw])");
      const nn::Pool2dOptions o{.stride = size2(at, p.stride(), "stride", 0, 1),
                                .padding = size2(at, p.padding(), "padding", 0, 0),
                                .ceil_mode = p.ceil_mode()};
      const nn::Size2 k = size2(at, p.kernel(), "kernel", 1, 1);
      if (l.kind_case() == Layer::kMaxPool2D) return std::make_shared<nn::MaxPool2d>(k, o);
      return std::make_shared<nn::AvgPool2d>(k, o);
    }
    case Layer::kAdaptiveAvgPool2D:
      at.check(!l.adaptive_avg_pool2d().output().empty(), "adaptive_avg_pool2d",
               "output is missing (expected [n] or [h, w])");
      return std::make_shared<nn::AdaptiveAvgPool2d>(size2(at, l.adaptive_avg_pool2d().output(), "output", 1, 1));
    case Layer::kFlatten:
      return std::make_shared<nn::Flatten>(l.flatten().has_start_dim() ? l.flatten().start_dim() : 1,
                                           l.flatten().has_end_dim() ? l.flatten().end_dim() : -1);
    case Layer::kUnflatten:
      at.check(!l.unflatten().sizes().empty(), "unflatten", "sizes is missing (expected the sizes to split into)");
      return std::make_shared<nn::Unflatten>(l.unflatten().dim(),
                                             Shape(l.unflatten().sizes().begin(), l.unflatten().sizes().end()));
    case Layer::kDropout:
      at.check(l.dropout().p() >= 0 && l.dropout().p() < 1, "dropout",
               "p is " + std::to_string(l.dropout().p()) + " (expected [0, 1))");
      return std::make_shared<nn::Dropout>(l.dropout().p());
    case Layer::kRelu:
      return std::make_shared<nn::ReLU>();
    case Layer::kLeakyRelu:
      return std::make_shared<nn::LeakyReLU>(l.leaky_relu().has_negative_slope() ? l.leaky_relu().negative_slope()
                                                                                 : 0.01);
    case Layer::kTanh:
      return std::make_shared<nn::Tanh>();
    case Layer::kSigmoid:
      return std::make_shared<nn::Sigmoid>();
    case Layer::kIdentity:
      return std::make_shared<nn::Identity>();
    case Layer::kSoftmax:
      return std::make_shared<nn::Softmax>(l.softmax().dim());
    case Layer::kLogSoftmax:
      return std::make_shared<nn::LogSoftmax>(l.log_softmax().dim());
    case Layer::kElu:
      return std::make_shared<nn::ELU>(l.elu().has_alpha() ? l.elu().alpha() : 1.0);
    case Layer::kGelu:
      return std::make_shared<nn::GELU>(l.gelu().tanh() ? "tanh" : "none");
    case Layer::kAdd:
    case Layer::kConcat:
    case Layer::KIND_NOT_SET:
      break;
  }
  return nullptr;
}

// Re-initialises `t` as `init` says (after the layer's own default initialisation).
void apply_init(const Site& at, const train_file::Init& init, Tensor& t, const std::string& field) {
  using train_file::Init;
  at.check(t.defined(), field,
           "the layer has no " + std::string(field == "weight_init" ? "weight" : "bias") + " to initialise");
  switch (init.kind_case()) {
    case Init::kNormal:
      at.check(init.normal().std() > 0, field, "normal.std must be positive");
      nn::init::normal_(t, init.normal().mean(), init.normal().std());
      return;
    case Init::kUniform:
      at.check(init.uniform().high() > init.uniform().low(), field, "uniform needs low < high");
      nn::init::uniform_(t, init.uniform().low(), init.uniform().high());
      return;
    case Init::kConstant:
      nn::init::constant_(t, init.constant());
      return;
    case Init::kXavierUniform:
    case Init::kXavierNormal:
    case Init::kOrthogonal: {
      const auto& g = init.kind_case() == Init::kXavierUniform  ? init.xavier_uniform()
                      : init.kind_case() == Init::kXavierNormal ? init.xavier_normal()
                                                                : init.orthogonal();
      const double gain = g.has_gain() ? g.gain() : 1.0;
      at.check(t.dim() >= 2, field, "this initialisation needs a weight of at least 2 dimensions");
      if (init.kind_case() == Init::kXavierUniform)
        nn::init::xavier_uniform_(t, gain);
      else if (init.kind_case() == Init::kXavierNormal)
        nn::init::xavier_normal_(t, gain);
      else
        nn::init::orthogonal_(t, gain);
      return;
    }
    case Init::kKaimingUniform:
    case Init::kKaimingNormal: {
      const auto& k = init.kind_case() == Init::kKaimingUniform ? init.kaiming_uniform() : init.kaiming_normal();
      at.check(t.dim() >= 2, field, "kaiming initialisation needs a weight of at least 2 dimensions");
      const auto mode = k.fan_out() ? nn::init::FanMode::FanOut : nn::init::FanMode::FanIn;
      if (init.kind_case() == Init::kKaimingUniform)
        nn::init::kaiming_uniform_(t, k.a(), mode);
      else
        nn::init::kaiming_normal_(t, k.a(), mode);
      return;
    }
    case Init::KIND_NOT_SET:
      at.fail(field, "an empty initialisation (expected normal, uniform, constant, ...)");
  }
}

// The layer's own parameter named `name`, or an undefined tensor.
Tensor own_parameter(nn::Module& m, const std::string& name) {
  for (auto& [n, t] : m.named_parameters(false))
    if (n == name) return t;
  return {};
}

const char* kind_name(const Layer& l) {
  if (l.kind_case() == Layer::KIND_NOT_SET) return "no kind";
  return Layer::descriptor()->FindFieldByNumber(l.kind_case())->name().c_str();
}

}  // namespace

std::shared_ptr<nn::Module> build_network(const LoadedFile& file, int network, int64_t vocabulary) {
  const train_file::Network& n = file.spec.network(network);
  NoGradGuard no_grad;
  std::vector<Tensor> examples;  // each node's output on a zero input of batch 1
  std::vector<nn::GraphNet::Node> nodes;
  std::map<std::string, int> index{{"input", -1}};
  const Tensor input = example_input(n, 1);
  bool chain = true;
  for (int i = 0; i < n.layer_size(); ++i) {
    const Layer& l = n.layer(i);
    const Site at{file, network, i, n.name(), l.name(), kind_name(l), vocabulary};
    at.check(!l.name().empty(), "name", "the layer has no name");
    at.check(!index.count(l.name()), "name",
             l.name() == "input" ? "'input' names the network's input" : "a second layer of this name");
    at.check(l.kind_case() != Layer::KIND_NOT_SET, "name",
             "the layer has no kind (expected one of conv2d, conv_transpose2d, linear, batch_norm, layer_norm, "
             "max_pool2d, avg_pool2d, adaptive_avg_pool2d, flatten, unflatten, dropout, relu, leaky_relu, tanh, "
             "sigmoid, elu, gelu, identity, softmax, log_softmax, embedding, lstm, gru, rnn, add, concat)");
    nn::GraphNet::Node node{.name = l.name()};
    for (const std::string& in : l.input()) {
      auto it = index.find(in);
      at.check(it != index.end(), "input", "input '" + in + "' names no earlier layer (nor 'input')");
      node.inputs.push_back(it->second);
    }
    if (node.inputs.empty()) node.inputs.push_back(i - 1);
    const bool join = l.kind_case() == Layer::kAdd || l.kind_case() == Layer::kConcat;
    if (join) {
      at.check(node.inputs.size() >= 2, "input", "a join reads at least 2 inputs (expected input: [\"a\", \"b\"])");
      node.join = l.kind_case() == Layer::kAdd ? nn::GraphNet::Join::Add : nn::GraphNet::Join::Concat;
      node.dim = l.kind_case() == Layer::kConcat ? l.concat().dim() : 0;
    } else {
      at.check(node.inputs.size() == 1, "input",
               "a " + at.kind + " layer reads 1 input, not " + std::to_string(node.inputs.size()));
    }
    chain = chain && !join && node.inputs[0] == i - 1;
    std::vector<Tensor> in;
    for (int k : node.inputs) in.push_back(k < 0 ? input : examples[static_cast<size_t>(k)]);
    Tensor out;
    try {
      if (join) {
        out = nn::apply_join(node.join, node.dim, in);
      } else {
        node.module = make_layer(at, l, in[0]);
        if (l.has_weight_init() || l.has_bias_init()) {
          Tensor w = own_parameter(*node.module, "weight"), b = own_parameter(*node.module, "bias");
          if (l.has_weight_init()) apply_init(at, l.weight_init(), w, "weight_init");
          if (l.has_bias_init()) apply_init(at, l.bias_init(), b, "bias_init");
        }
        node.module->eval();  // its shape without touching batch-norm statistics; training mode after
        out = (*node.module)(in[0]);
        node.module->train();
      }
    } catch (const Error& e) {
      const std::string msg = e.what();
      if (msg.rfind(file.path + ":", 0) == 0) throw;  // already placed
      at.fail(at.kind, "cannot take its input " + shape_str(in[0].shape()) + ": " + msg);
    }
    index[l.name()] = i;
    examples.push_back(out);
    nodes.push_back(std::move(node));
  }
  int output = n.layer_size() - 1;
  if (!n.output().empty()) {
    auto it = index.find(n.output());
    EMBER_CHECK(it != index.end() && it->second >= 0, file.at(network), ": network '", n.name(), "': output '",
                n.output(), "' names no layer");
    output = it->second;
  }
  if (chain && output == n.layer_size() - 1) {
    std::vector<std::pair<std::string, std::shared_ptr<nn::Module>>> layers;
    for (auto& node : nodes) layers.emplace_back(node.name, node.module);
    return std::make_shared<nn::Sequential>(std::move(layers));
  }
  return std::make_shared<nn::GraphNet>(n.name(), std::move(nodes), output);
}

std::unique_ptr<optim::Optimizer> make_optimizer(const LoadedFile& file, const train_file::Solver& solver,
                                                 const std::string& where, std::vector<Tensor> params, double lr) {
  switch (solver.optimizer_case()) {
    case train_file::Solver::kSgd: {
      const auto& s = solver.sgd();
      const double rate = lr > 0 ? lr : s.lr();
      EMBER_CHECK(rate > 0, file.at_top(where), ": ", where, ".solver.sgd.lr is missing (expected a positive rate)");
      return std::make_unique<optim::SGD>(
          std::move(params),
          optim::SGDOptions{
              .lr = rate, .momentum = s.momentum(), .weight_decay = s.weight_decay(), .nesterov = s.nesterov()});
    }
    case train_file::Solver::kAdam: {
      const auto& a = solver.adam();
      const double rate = lr > 0 ? lr : a.lr();
      EMBER_CHECK(rate > 0, file.at_top(where), ": ", where, ".solver.adam.lr is missing (expected a positive rate)");
      return std::make_unique<optim::Adam>(std::move(params),
                                           optim::AdamOptions{.lr = rate,
                                                              .beta1 = a.has_beta1() ? a.beta1() : 0.9,
                                                              .beta2 = a.has_beta2() ? a.beta2() : 0.999,
                                                              .eps = a.has_eps() ? a.eps() : 1e-8,
                                                              .weight_decay = a.weight_decay()});
    }
    case train_file::Solver::OPTIMIZER_NOT_SET:
      break;
  }
  EMBER_FAIL(file.at_top(where), ": ", where, " has no optimizer (expected 'solver { adam { lr: ... } }' or sgd)");
}

std::unique_ptr<optim::LRScheduler> make_schedule(const train_file::Solver& solver, optim::Optimizer& opt) {
  if (!solver.has_step_lr()) return nullptr;
  const auto& s = solver.step_lr();
  EMBER_CHECK(s.step_size() > 0 && s.gamma() > 0, "step_lr: step_size and gamma must be positive, got ", s.step_size(),
              " and ", s.gamma());
  return std::make_unique<optim::StepLR>(opt, s.step_size(), s.gamma());
}

}  // namespace ember::model_file
