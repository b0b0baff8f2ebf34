// Writes the cases the onnxruntime check reads (tests/interop/onnxruntime_check.py): for each model
// and layer family, the exported .onnx (traced at one batch size) and, at two batch sizes (and two
// sequence lengths for the token models), random inputs and Ember's outputs as .npy files, listed
// in DIR/manifest.txt. Also a model file of MnistCnn and of the LSTM LM for the `ember export onnx`
// test. Usage: onnx_cases DIR
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "interop/model_file.h"
#include "interop/onnx_export.h"
#include "layers/checkpoint.h"
#include "layers/nn.h"
#include "models/gan.h"
#include "models/lstm.h"
#include "models/mnist_cnn.h"

using namespace ember;
namespace fs = std::filesystem;

namespace {

// NumPy's .npy format, version 1.0: magic, a Python-dict header padded to 64 bytes, the data.
void write_npy(const std::string& path, const Tensor& t) {
  const Tensor host = t.detach().cpu().contiguous();
  const char* descr = host.dtype() == DType::Float32 ? "<f4" : host.dtype() == DType::Int64 ? "<i8" : nullptr;
  EMBER_CHECK(descr, "write_npy: dtype ", dtype_name(host.dtype()));
  std::string shape = "(";
  for (int64_t d : host.shape()) shape += std::to_string(d) + ", ";
  shape += ")";
  std::string header = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': " + shape + ", }";
  header.append(64 - (10 + header.size() + 1) % 64, ' ').push_back('\n');
  std::string bytes = "\x93NUMPY\x01";
  bytes.push_back('\0');
  bytes.push_back(static_cast<char>(header.size() & 0xff));
  bytes.push_back(static_cast<char>(header.size() >> 8));
  bytes += header;
  bytes.append(static_cast<const char*>(host.raw_data()), static_cast<size_t>(host.numel()) * host.itemsize());
  write_file_atomic(path, bytes);
}

struct Case {
  std::string name;
  std::shared_ptr<nn::Module> model;
  // The inputs at a batch size and a sequence length.
  std::function<std::vector<Tensor>(int64_t batch, int64_t seq)> inputs;
};

Tensor tokens(int64_t batch, int64_t seq, int64_t vocab) {
  return randint(0, vocab, {batch, seq}, {.dtype = DType::Int64});
}

Tensor run(nn::Module& m, const std::vector<Tensor>& in) {
  NoGradGuard ng;
  if (auto* b = dynamic_cast<models::BiLstmClassifier*>(&m)) {
    const Tensor l = in[1].contiguous();
    return b->forward(in[0], std::vector<int64_t>(l.data_ptr<int64_t>(), l.data_ptr<int64_t>() + l.numel()));
  }
  return m.forward(in[0]);
}

std::shared_ptr<nn::Sequential> seq(std::vector<std::pair<std::string, std::shared_ptr<nn::Module>>> layers) {
  return std::make_shared<nn::Sequential>(std::move(layers));
}

// Inputs of the image models, the generators and the layer families (features of shape s after
// the batch), at batch size b.
std::vector<Tensor> image(int64_t b, int64_t) {
  return {randn({b, 1, 28, 28})};
}
std::vector<Tensor> noise(int64_t b, int64_t) {
  return {randn({b, models::kNoiseDim})};
}
std::function<std::vector<Tensor>(int64_t, int64_t)> features(Shape s) {
  return [s](int64_t b, int64_t) {
    Shape full = s;
    full.insert(full.begin(), b);
    return std::vector<Tensor>{randn(full)};
  };
}

// The model zoo's networks (their weights drawn in this order from the seeded generator).
void add_zoo_cases(std::vector<Case>& cases) {
  cases.push_back({"mnist_cnn", std::make_shared<models::MnistCnn>(), image});
  cases.push_back({"lenet5", std::make_shared<models::LeNet5>(), image});
  cases.push_back({"mlp_generator", std::make_shared<models::MlpGenerator>(), noise});
  cases.push_back({"mlp_discriminator", std::make_shared<models::MlpDiscriminator>(), image});
  auto dcgan = std::make_shared<models::DcganGenerator>();
  {  // move the running statistics off 0 and 1, so that evaluation's normalisation is checked
    for (int i = 0; i < 3; ++i) dcgan->forward(randn({8, models::kNoiseDim}));
  }
  cases.push_back({"dcgan_generator", dcgan, noise});
  cases.push_back({"dcgan_discriminator", std::make_shared<models::DcganDiscriminator>(), image});
  cases.push_back({"lstm_lm",
                   std::make_shared<models::LstmLanguageModel>(models::LstmLmOptions{
                       .vocab_size = 50, .embed_dim = 16, .hidden = 24, .layers = 2, .dropout = 0.1}),
                   [](int64_t b, int64_t s) { return std::vector<Tensor>{tokens(b, s, 50)}; }});
  cases.push_back({"bilstm_classify",
                   std::make_shared<models::BiLstmClassifier>(
                       models::BiLstmOptions{.vocab_size = 40, .embed_dim = 12, .hidden = 16, .classes = 4}),
                   [](int64_t b, int64_t s) {
                     // Lengths from 1 to s, the longest included, in no order.
                     std::vector<int64_t> l;
                     for (int64_t i = 0; i < b; ++i) l.push_back(i == 1 ? s : 1 + (i * 5 + 3) % s);
                     return std::vector<Tensor>{tokens(b, s, 40), from_vector(l, {b})};
                   }});
}

void add_layer_family_cases(std::vector<Case>& cases) {
  // The layer families the zoo does not use, each in the geometry that tells its attributes apart.
  cases.push_back({"conv_groups_dilation_same",
                   seq({{"c1", nn::make<nn::Conv2d>(4, 6, nn::Size2(3, 4),
                                                    nn::Conv2dOptions{.padding = "same", .dilation = 2, .groups = 2})},
                        {"c2", nn::make<nn::Conv2d>(
                                   6, 6, 3, nn::Conv2dOptions{.stride = 2, .padding = 1, .groups = 3, .bias = false})},
                        {"elu", nn::make<nn::ELU>(0.7)},
                        {"t", nn::make<nn::ConvTranspose2d>(
                                  6, 4, 3,
                                  nn::ConvTranspose2dOptions{
                                      .stride = 2, .padding = 1, .output_padding = 1, .dilation = 1, .groups = 2})},
                        {"t2", nn::make<nn::ConvTranspose2d>(4, 2, 2, nn::ConvTranspose2dOptions{.dilation = 2})}}),
                   features({4, 9, 11})});
  cases.push_back(
      {"pooling",
       seq({{"max", nn::make<nn::MaxPool2d>(3, nn::Pool2dOptions{.stride = 2, .padding = 1, .ceil_mode = true})},
            {"avg",
             nn::make<nn::AvgPool2d>(2, nn::Pool2dOptions{.stride = 1, .padding = 1, .count_include_pad = false})},
            {"adaptive", nn::make<nn::AdaptiveAvgPool2d>(nn::Size2(4, 3))},
            {"flatten", nn::make<nn::Flatten>()},
            {"softmax", nn::make<nn::Softmax>(1)}}),
       features({3, 12, 9})});
  cases.push_back({"norms_and_activations",
                   seq({{"bn", nn::make<nn::BatchNorm1d>(5)},
                        {"gelu", nn::make<nn::GELU>()},
                        {"ln", nn::make<nn::LayerNorm>(Shape{5, 6})},
                        {"gelu_tanh", nn::make<nn::GELU>("tanh")},
                        {"flatten", nn::make<nn::Flatten>(1, 2)},
                        {"lin", nn::make<nn::Linear>(30, 8)},
                        {"sig", nn::make<nn::Sigmoid>()},
                        {"logsoftmax", nn::make<nn::LogSoftmax>(-1)}}),
                   features({5, 6})});
  auto gru =
      std::make_shared<nn::GRU>(6, 7, nn::GRUOptions{.num_layers = 2, .batch_first = true, .bidirectional = true});
  auto rnn = std::make_shared<nn::RNN>(
      14, 5, nn::RNNOptions{.nonlinearity = nn::RnnNonlinearity::Relu, .batch_first = true, .bidirectional = true});
  auto rnn_tanh = std::make_shared<nn::RNN>(10, 4, nn::RNNOptions{.bias = false});
  // A bidirectional 2-layer GRU and a ReLU RNN (batch first), then a time-major tanh RNN without
  // bias that reads the batch as time.
  cases.push_back({"gru_rnn",
                   seq({{"gru", std::make_shared<nn::RnnSequence>(gru)},
                        {"rnn", std::make_shared<nn::RnnSequence>(rnn)},
                        {"unflatten", nn::make<nn::Unflatten>(2, Shape{2, 5})},
                        {"flatten", nn::make<nn::Flatten>(2)},
                        {"tanh_rnn_time_major", std::make_shared<nn::RnnSequence>(rnn_tanh)}}),
                   // A float input keeps its time fixed (only token inputs leave it free).
                   [](int64_t b, int64_t) {
                     return std::vector<Tensor>{randn({b, 6, 6})};
                   }});
}

void add_residual_case(std::vector<Case>& cases) {
  // A model file's network with a residual join (an nn::GraphNet), its batch norm moved off 0 and 1.
  auto residual =
      model_file::build_network(model_file::load(std::string(EMBER_SOURCE_DIR) + "/models/residual_cnn.pbtxt"), 0);
  for (int i = 0; i < 3; ++i) residual->forward(randn({8, 1, 28, 28}));
  cases.push_back({"residual_cnn", residual, image});
}

// Case c's .onnx (traced at batch 2, sequence 6), and at two batch sizes and sequence lengths its
// inputs and Ember's outputs as .npy files, each listed in the manifest; a checkpoint of the
// models the `ember export onnx` test exports.
void write_case(const fs::path& dir, Case& c, std::ofstream& manifest) {
  const std::string onnx_path = (dir / (c.name + ".onnx")).string();
  onnx::export_model(*c.model, c.inputs(2, 6), onnx_path);
  c.model->eval();
  int k = 0;
  for (auto [b, s] : {std::pair<int64_t, int64_t>{2, 6}, {5, 9}}) {
    const std::vector<Tensor> in = c.inputs(b, s);
    std::string line = c.name + " " + c.name + ".onnx";
    for (size_t i = 0; i < in.size(); ++i) {
      const std::string f = c.name + "_" + std::to_string(k) + "_in" + std::to_string(i) + ".npy";
      write_npy((dir / f).string(), in[i]);
      line += " " + f;
    }
    const std::string f = c.name + "_" + std::to_string(k) + "_out.npy";
    write_npy((dir / f).string(), run(*c.model, in));
    manifest << line << " -> " << f << "\n";
    ++k;
  }
  if (c.name == "mnist_cnn" || c.name == "lstm_lm" || c.name == "residual_cnn")
    save(*c.model, (dir / (c.name + ".ckpt")).string());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: onnx_cases DIR\n";
    return 2;
  }
  try {
    const fs::path dir = argv[1];
    fs::create_directories(dir);
    manual_seed(7);
    std::vector<Case> cases;
    add_zoo_cases(cases);
    add_layer_family_cases(cases);
    add_residual_case(cases);
    std::ofstream manifest(dir / "manifest.txt");
    for (Case& c : cases) write_case(dir, c, manifest);
    std::cout << "onnx_cases: wrote " << cases.size() << " models to " << dir.string() << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "onnx_cases: " << e.what() << "\n";
    return 1;
  }
}
