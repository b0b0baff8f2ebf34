#include "interop/model_file.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>

#include "core/autograd/grad_mode.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/ops.h"
#include "data/loader_limits.h"
#include "interop/graph_net.h"
#include "interop/model_file_layers.h"
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

std::string LoadedFile::at_path(const std::string& dotted) const {
  const pb::Descriptor* d = train_file::TrainFile::descriptor();
  const pb::TextFormat::ParseInfoTree* tree = &where->tree;
  int line = -1;
  for (size_t start = 0; tree && d;) {
    const size_t dot = dotted.find('.', start);
    const pb::FieldDescriptor* f = field_of(d, dotted.substr(start, dot - start));
    line = std::max(line, tree->GetLocation(f, -1).line);
    if (dot == std::string::npos) break;
    tree = tree->GetTreeForNested(f, -1);
    d = f->message_type();
    start = dot + 1;
  }
  return line_of(path, line);
}

std::string LoadedFile::resolve(const std::string& named) const {
  const std::filesystem::path p = named;
  return p.is_absolute() ? named : (std::filesystem::path(path).parent_path() / p).string();
}

namespace {
// What a network's input holds: token ids (int64) when its first layer reads them, else float32.
DType input_dtype(const train_file::Network& n) {
  const FileLayer* first = n.layer_size() > 0 ? find_layer(n.layer(0).kind_case()) : nullptr;
  return first && first->token_input ? DType::Int64 : DType::Float32;
}
}  // namespace

Tensor example_input(const train_file::Network& n, int64_t batch) {
  Shape shape{batch};
  shape.insert(shape.end(), n.input_shape().begin(), n.input_shape().end());
  return zeros(shape, {.dtype = input_dtype(n)});
}

namespace {

// A number a file gives, refused unless `ok`, naming its line: "invalid", for a value written in
// the file is never taken for one left out (which takes its default; the callers check only
// fields the file gives, or whose 0 means the default).
template <typename T>
void valid(const LoadedFile& f, bool ok, const std::string& path, T value, const std::string& expected) {
  EMBER_CHECK(ok, f.at_path(path), ": ", path, " is ", value, " (invalid: expected ", expected, ")");
}

bool at_least(double v, double lo) {
  return std::isfinite(v) && v >= lo;
}

void check_solver(const LoadedFile& f, const train_file::Solver& s, const std::string& at) {
  if (s.has_sgd()) {
    const auto& o = s.sgd();
    if (o.has_lr()) valid(f, at_least(o.lr(), 0) && o.lr() > 0, at + ".sgd.lr", o.lr(), "a finite rate > 0");
    valid(f, at_least(o.momentum(), 0), at + ".sgd.momentum", o.momentum(), "a finite number >= 0");
    valid(f, at_least(o.weight_decay(), 0), at + ".sgd.weight_decay", o.weight_decay(), "a finite number >= 0");
  }
  if (s.has_adam()) {
    const auto& o = s.adam();
    if (o.has_lr()) valid(f, at_least(o.lr(), 0) && o.lr() > 0, at + ".adam.lr", o.lr(), "a finite rate > 0");
    if (o.has_beta1()) valid(f, at_least(o.beta1(), 0) && o.beta1() < 1, at + ".adam.beta1", o.beta1(), "[0, 1)");
    if (o.has_beta2()) valid(f, at_least(o.beta2(), 0) && o.beta2() < 1, at + ".adam.beta2", o.beta2(), "[0, 1)");
    if (o.has_eps()) valid(f, at_least(o.eps(), 0) && o.eps() > 0, at + ".adam.eps", o.eps(), "a finite number > 0");
    valid(f, at_least(o.weight_decay(), 0), at + ".adam.weight_decay", o.weight_decay(), "a finite number >= 0");
  }
  if (s.has_step_lr()) {
    const auto& l = s.step_lr();
    EMBER_CHECK(l.has_step_size(), f.at_path(at + ".step_lr"), ": ", at,
                ".step_lr.step_size is missing (expected the epochs between two decays)");
    valid(f, l.step_size() > 0, at + ".step_lr.step_size", l.step_size(), "a positive number of epochs");
    if (l.has_gamma())
      valid(f, at_least(l.gamma(), 0) && l.gamma() > 0, at + ".step_lr.gamma", l.gamma(), "a finite factor > 0");
  }
}

void check_normalisation(const LoadedFile& f, const std::string& at, bool has_mean, double mean, bool has_std,
                         double std) {
  if (has_mean) valid(f, std::isfinite(mean), at + ".mean", mean, "a finite number");
  if (has_std) valid(f, at_least(std, 0) && std > 0, at + ".std", std, "a finite number > 0");
}

// The random transforms' ranges are data/transforms.h's (torchvision's: a flip probability in
// [0, 1], rotations within [0, 180] degrees, shifts within [0, 1] of the size); a padding beyond
// kMaxCropPadding pixels is no augmentation but a typo that would allocate images of gigabytes.
void check_augment(const LoadedFile& f) {
  constexpr int64_t kMaxCropPadding = 1024;
  const auto& a = f.spec.data().augment();
  valid(f, a.crop_padding() >= 0 && a.crop_padding() <= kMaxCropPadding, "data.augment.crop_padding", a.crop_padding(),
        "0 to " + std::to_string(kMaxCropPadding) + " pixels");
  valid(f, a.horizontal_flip() >= 0 && a.horizontal_flip() <= 1, "data.augment.horizontal_flip", a.horizontal_flip(),
        "a probability in [0, 1]");
  valid(f, a.affine_degrees() >= 0 && a.affine_degrees() <= 180, "data.augment.affine_degrees", a.affine_degrees(),
        "degrees in [0, 180]");
  valid(f, a.affine_translate() >= 0 && a.affine_translate() <= 1, "data.augment.affine_translate",
        a.affine_translate(), "a fraction of the size in [0, 1]");
}

void check_data(const LoadedFile& f) {
  const auto& d = f.spec.data();
  if (d.has_batch_size())
    valid(f, d.batch_size() >= 1, "data.batch_size", d.batch_size(), "a positive number of examples per step");
  if (d.has_limit())
    valid(f, d.limit() == -1 || d.limit() >= 1, "data.limit", d.limit(), "-1 (all) or a positive number");
  if (d.has_workers())
    valid(f, d.workers() >= 0 && d.workers() <= data::kMaxWorkers, "data.workers", d.workers(),
          "0 (load in the training thread) to " + std::to_string(data::kMaxWorkers) + " threads, as --workers");
  check_augment(f);
  if (d.has_mnist()) {
    const auto& m = d.mnist();
    check_normalisation(f, "data.mnist", m.has_mean(), m.mean(), m.has_std(), m.std());
  }
  if (d.has_image_folder()) {
    const auto& i = d.image_folder();
    if (i.has_height()) valid(f, i.height() >= 1, "data.image_folder.height", i.height(), "a positive size");
    if (i.has_width()) valid(f, i.width() >= 1, "data.image_folder.width", i.width(), "a positive size");
    if (i.has_channels())
      valid(f, i.channels() == 1 || i.channels() == 3 || i.channels() == 4, "data.image_folder.channels", i.channels(),
            "1, 3 or 4");
    check_normalisation(f, "data.image_folder", i.has_mean(), i.mean(), i.has_std(), i.std());
  }
  if (d.has_text()) {
    const auto& t = d.text();
    valid(f, t.min_freq() >= 0, "data.text.min_freq", t.min_freq(), "0 (by the level) or a positive count");
    if (t.has_max_vocab()) valid(f, t.max_vocab() >= 0, "data.text.max_vocab", t.max_vocab(), "0 (none) or more");
    if (t.has_test_fraction())
      valid(f, t.test_fraction() > 0 && t.test_fraction() < 1, "data.text.test_fraction", t.test_fraction(),
            "a number in (0, 1)");
    if (t.has_seq_len()) valid(f, t.seq_len() >= 1, "data.text.seq_len", t.seq_len(), "a positive number of tokens");
  }
}

// The numbers of the data, the task and the training settings, which reach the flags' defaults
// and the optimizers: what the flags refuse is refused here, in the file's terms.
void check_settings(const LoadedFile& f) {
  const auto& s = f.spec;
  check_data(f);
  if (s.has_classifier()) {
    check_solver(f, s.classifier().solver(), "classifier.solver");
    const double smoothing = s.classifier().loss().label_smoothing();
    valid(f, smoothing >= 0 && smoothing < 1, "classifier.loss.label_smoothing", smoothing, "a fraction in [0, 1)");
  }
  if (s.has_language_model()) {
    check_solver(f, s.language_model().solver(), "language_model.solver");
    valid(f, at_least(s.language_model().clip(), 0), "language_model.clip", s.language_model().clip(),
          "0 (no clipping) or a finite norm > 0");
  }
  if (s.has_gan()) {
    check_solver(f, s.gan().generator_solver(), "gan.generator_solver");
    check_solver(f, s.gan().discriminator_solver(), "gan.discriminator_solver");
    if (s.gan().has_noise_dim())
      valid(f, s.gan().noise_dim() >= 1, "gan.noise_dim", s.gan().noise_dim(), "a positive size");
  }
  const auto& t = s.training();
  if (t.has_epochs()) valid(f, t.epochs() >= 1, "training.epochs", t.epochs(), "a positive number of passes");
  if (t.has_max_steps())
    valid(f, t.max_steps() >= -1, "training.max_steps", t.max_steps(), "-1 (no limit) or a number of steps >= 0");
  const std::string& p = t.precision();
  valid(f, p.empty() || p == "fp32" || p == "bf16" || p == "fp16", "training.precision", "'" + p + "'",
        "fp32, bf16 or fp16");
}

// Positive sizes whose product a tensor's size in bytes holds (building runs a batch of 1).
void check_input_shape(const LoadedFile& f, int i) {
  const auto& n = f.spec.network(i);
  EMBER_CHECK(n.input_shape_size() > 0, f.at(i), ": network '", n.name(),
              "': input_shape is missing (one example's shape without the batch, e.g. [1, 28, 28])");
  int64_t values = 1;
  for (int64_t d : n.input_shape()) {
    EMBER_CHECK(d > 0, f.at(i), ": network '", n.name(), "': input_shape has a dimension ", d,
                " (expected positive sizes)");
    EMBER_CHECK(!__builtin_mul_overflow(values, d, &values) && values <= std::numeric_limits<int64_t>::max() / 8,
                f.at(i), ": network '", n.name(), "': input_shape ",
                shape_str(Shape(n.input_shape().begin(), n.input_shape().end())),
                " has more values than a tensor can (expected one example's shape, without the batch)");
  }
}

}  // namespace

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
  EMBER_CHECK(s.has_version(), path, ": version is missing (expected 'version: ", kVersion, "' at the top)");
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
    check_input_shape(f, i);
    EMBER_CHECK(n.layer_size() > 0, f.at(i), ": network '", n.name(), "' has no layer");
  }
  EMBER_CHECK(s.task_case() != train_file::TrainFile::TASK_NOT_SET, path,
              ": no task (expected 'classifier { ... }', 'gan { ... }' or 'language_model { ... }')");
  EMBER_CHECK(s.has_data() && s.data().source_case() != train_file::Data::SOURCE_NOT_SET, path,
              ": no data source (expected 'data { mnist { ... } batch_size: N }', or image_folder, csv, text)");
  check_settings(f);
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

// The layer kinds a file may write, in the schema's order ("conv2d, conv_transpose2d, ...").
std::string layer_kinds() {
  const pb::OneofDescriptor* kinds = Layer::descriptor()->FindOneofByName("kind");
  std::string out;
  for (int i = 0; i < kinds->field_count(); ++i) out += (i ? ", " : "") + kinds->field(i)->name();
  return out;
}

// How a layer of this kind is made (interop/layers/): an ember::Error for a kind that registered none.
const FileLayer& registered(const Site& at, const Layer& l) {
  const FileLayer* f = find_layer(l.kind_case());
  at.check(f != nullptr, at.kind, "this Ember registers no way to build a layer of this kind (interop/layers/)");
  return *f;
}

// Re-initialises `t` as `init` says (after the layer's own default initialisation).
void apply_init(const Site& at, const train_file::Init& init, Tensor& t, const std::string& field) {
  using train_file::Init;
  at.check(t.defined(), field,
           "the layer has no " + std::string(field == "weight_init" ? "weight" : "bias") + " to initialise");
  switch (init.kind_case()) {
    case Init::kNormal: {
      const auto& n = init.normal();
      const double sd = n.has_std() ? n.std() : 1.0;
      at.check(std::isfinite(n.mean()) && std::isfinite(sd) && sd > 0, field,
               detail::concat("normal { mean: ", n.mean(), " std: ", sd,
                              " } is invalid (expected a finite mean and a finite std > 0)"));
      nn::init::normal_(t, n.mean(), sd);
      return;
    }
    case Init::kUniform: {
      const auto& u = init.uniform();
      const double high = u.has_high() ? u.high() : 1.0;
      at.check(std::isfinite(u.low()) && std::isfinite(high) && u.low() < high, field,
               detail::concat("uniform { low: ", u.low(), " high: ", high,
                              " } is invalid (expected finite bounds, low < high)"));
      nn::init::uniform_(t, u.low(), high);
      return;
    }
    case Init::kConstant:
      at.check(std::isfinite(init.constant()), field,
               detail::concat("constant ", init.constant(), " is invalid (expected a finite number)"));
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

// Network n's zero example of batch 1, which building runs through its layers. One larger than the
// machine's memory is refused before it is asked for: the allocator's failure names no file, and
// under AddressSanitizer a request beyond its limit aborts instead of throwing.
Tensor first_example(const LoadedFile& file, int network) {
  const train_file::Network& n = file.spec.network(network);
  auto bytes = static_cast<double>(itemsize(input_dtype(n)));
  for (int64_t d : n.input_shape()) bytes *= static_cast<double>(d);
  const double memory = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGE_SIZE));
  EMBER_CHECK(memory <= 0 || bytes <= memory, file.at(network), ": network '", n.name(),
              "': one example of input_shape ", shape_str(Shape(n.input_shape().begin(), n.input_shape().end())),
              " cannot be made (about ", bytes / (1 << 30), " GiB, more than this machine's ", memory / (1 << 30),
              " GiB of memory; expected one example's shape, without the batch)");
  try {
    return example_input(n, 1);
  } catch (const std::exception& e) {
    EMBER_FAIL(file.at(network), ": network '", n.name(), "': one example of input_shape ",
               shape_str(Shape(n.input_shape().begin(), n.input_shape().end())), " cannot be made (", e.what(),
               "; expected one example's shape, without the batch)");
  }
}

}  // namespace

std::shared_ptr<nn::Module> build_network(const LoadedFile& file, int network, int64_t vocabulary) {
  const train_file::Network& n = file.spec.network(network);
  NoGradGuard no_grad;
  std::vector<Tensor> examples;  // each node's output on a zero input of batch 1
  std::vector<nn::GraphNet::Node> nodes;
  std::map<std::string, int> index{{"input", -1}};
  const Tensor input = first_example(file, network);
  bool chain = true;
  for (int i = 0; i < n.layer_size(); ++i) {
    const Layer& l = n.layer(i);
    const Site at{file, network, i, n.name(), l.name(), kind_name(l), vocabulary};
    at.check(!l.name().empty(), "name", "the layer has no name");
    at.check(!index.count(l.name()), "name",
             l.name() == "input" ? "'input' names the network's input" : "a second layer of this name");
    at.check(l.kind_case() != Layer::KIND_NOT_SET, "name",
             "the layer has no kind (expected one of " + layer_kinds() + ")");
    const FileLayer& kind = registered(at, l);
    nn::GraphNet::Node node{.name = l.name()};
    for (const std::string& in : l.input()) {
      auto it = index.find(in);
      at.check(it != index.end(), "input", "input '" + in + "' names no earlier layer (nor 'input')");
      node.inputs.push_back(it->second);
    }
    if (node.inputs.empty()) node.inputs.push_back(i - 1);
    std::vector<Tensor> in;
    for (int k : node.inputs) in.push_back(k < 0 ? input : examples[static_cast<size_t>(k)]);
    const bool join = kind.join != nn::GraphNet::Join::None;
    if (join) {
      at.check(node.inputs.size() >= 2, "input", "a join reads at least 2 inputs (expected input: [\"a\", \"b\"])");
      node.join = kind.join;
      if (kind.join_dim) node.dim = kind.join_dim(at, l, in[0]);
    } else {
      at.check(node.inputs.size() == 1, "input",
               "a " + at.kind + " layer reads 1 input, not " + std::to_string(node.inputs.size()));
    }
    chain = chain && !join && node.inputs[0] == i - 1;
    Tensor out;
    try {
      if (join) {
        out = nn::apply_join(node.join, node.dim, in);
      } else {
        node.module = kind.build(at, l, in[0]);
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

int64_t classifier_outputs(const LoadedFile& file, int network, nn::Module& net) {
  const train_file::Network& n = file.spec.network(network);
  NoGradGuard no_grad;
  const bool training = net.is_training();
  net.eval();  // the shape, without touching batch-norm statistics
  const Shape out = net(first_example(file, network)).shape();
  net.train(training);
  EMBER_CHECK(out.size() == 2 && out[0] == 1, file.at(network), ": network '", n.name(), "' maps one example to ",
              shape_str(out), " (expected [1, classes]: a classifier's logits, one score per class)");
  return out[1];
}

std::unique_ptr<optim::Optimizer> make_optimizer(const LoadedFile& file, const train_file::Solver& solver,
                                                 const std::string& where, std::vector<Tensor> params, double lr) {
  switch (solver.optimizer_case()) {
    case train_file::Solver::kSgd: {
      const auto& s = solver.sgd();
      EMBER_CHECK(lr > 0 || s.has_lr(), file.at_top(where), ": ", where,
                  ".solver.sgd.lr is missing (expected a positive rate, or --lr)");
      const double rate = lr > 0 ? lr : s.lr();
      return std::make_unique<optim::SGD>(
          std::move(params),
          optim::SGDOptions{
              .lr = rate, .momentum = s.momentum(), .weight_decay = s.weight_decay(), .nesterov = s.nesterov()});
    }
    case train_file::Solver::kAdam: {
      const auto& a = solver.adam();
      EMBER_CHECK(lr > 0 || a.has_lr(), file.at_top(where), ": ", where,
                  ".solver.adam.lr is missing (expected a positive rate, or --lr)");
      const double rate = lr > 0 ? lr : a.lr();
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
  // load() refused a missing step_size and values out of range, naming their lines.
  const auto& s = solver.step_lr();
  return std::make_unique<optim::StepLR>(opt, s.step_size(), s.has_gamma() ? s.gamma() : 0.1);
}

}  // namespace ember::model_file
