// ONNX export (interop/onnx_export.h): the graphs' structure, attributes and initialisers as ONNX
// defines them, the free dimensions, and every refusal. That onnxruntime computes what Ember
// computes is the interop.onnxruntime test (onnxruntime_check.sh).
#include "interop/onnx_export.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "layers/nn.h"
#include "models/gan.h"
#include "models/lstm.h"
#include "models/mnist_cnn.h"
#include "test_helpers.h"

using namespace ember;
namespace fs = std::filesystem;
using onnx_schema::ModelProto;
using test_util::error_of;

namespace {

std::vector<std::string> op_types(const ModelProto& m) {
  std::vector<std::string> ops;
  for (const auto& n : m.graph().node()) ops.push_back(n.op_type());
  return ops;
}

// "batch" or the number, per dimension of a graph input or output.
std::vector<std::string> dims(const onnx_schema::ValueInfoProto& v) {
  std::vector<std::string> out;
  for (const auto& d : v.type().tensor_type().shape().dim())
    out.push_back(d.has_dim_param() ? d.dim_param() : std::to_string(d.dim_value()));
  return out;
}

const onnx_schema::TensorProto& initializer(const ModelProto& m, const std::string& name) {
  for (const auto& t : m.graph().initializer())
    if (t.name() == name) return t;
  throw std::runtime_error("no initializer " + name);
}

// An initialiser's float32 values.
std::vector<float> values(const onnx_schema::TensorProto& t) {
  std::vector<float> v(t.raw_data().size() / sizeof(float));
  std::memcpy(v.data(), t.raw_data().data(), t.raw_data().size());
  return v;
}

std::vector<float> values(const Tensor& t) {
  const Tensor c = t.detach().contiguous();
  return {c.data_ptr<float>(), c.data_ptr<float>() + c.numel()};
}

const onnx_schema::NodeProto& node_of(const ModelProto& m, const std::string& op) {
  for (const auto& n : m.graph().node())
    if (n.op_type() == op) return n;
  throw std::runtime_error("no node " + op);
}

const onnx_schema::AttributeProto* attribute(const onnx_schema::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

}  // namespace

TEST(OnnxExport, MnistCnnIsTheLayersInOrderWithAFreeBatch) {
  models::MnistCnn net;
  const ModelProto m = onnx::to_onnx(net, {randn({3, 1, 28, 28})});
  EXPECT_EQ(m.ir_version(), 8);
  ASSERT_EQ(m.opset_import_size(), 1);
  EXPECT_EQ(m.opset_import(0).domain(), "");
  EXPECT_EQ(m.opset_import(0).version(), 17);
  EXPECT_EQ(m.producer_name(), "ember");
  EXPECT_EQ(op_types(m), (std::vector<std::string>{"Conv", "Relu", "MaxPool", "Conv", "Relu", "MaxPool", "Conv", "Relu",
                                                   "Flatten", "Gemm", "Relu", "Gemm"}));
  ASSERT_EQ(m.graph().input_size(), 1);
  EXPECT_EQ(dims(m.graph().input(0)), (std::vector<std::string>{"batch", "1", "28", "28"}));
  ASSERT_EQ(m.graph().output_size(), 1);
  EXPECT_EQ(m.graph().output(0).name(), "output");
  EXPECT_EQ(dims(m.graph().output(0)), (std::vector<std::string>{"batch", "10"}));
  EXPECT_EQ(m.graph().node(m.graph().node_size() - 1).output(0), "output");
  // Every parameter once, bit for bit, under its state-dict name.
  int64_t floats = 0;
  for (const auto& t : m.graph().initializer()) floats += static_cast<int64_t>(t.raw_data().size() / 4);
  EXPECT_EQ(floats, net.num_parameters());
  EXPECT_EQ(values(initializer(m, "c2.weight")), values(net.c2.weight));
  EXPECT_EQ(values(initializer(m, "f2.bias")), values(net.f2.bias));
  // Gemm with the weight as stored ([out, in]) and transB.
  ASSERT_NE(attribute(node_of(m, "Gemm"), "transB"), nullptr);
  EXPECT_EQ(attribute(node_of(m, "Gemm"), "transB")->i(), 1);
}

TEST(OnnxExport, StaticShapesWhenAsked) {
  models::LeNet5 net;
  const ModelProto m = onnx::to_onnx(net, {randn({4, 1, 28, 28})}, {.dynamic_batch = false});
  EXPECT_EQ(dims(m.graph().input(0)), (std::vector<std::string>{"4", "1", "28", "28"}));
  EXPECT_EQ(dims(m.graph().output(0)), (std::vector<std::string>{"4", "10"}));
  EXPECT_EQ(op_types(m)[2], "AveragePool");
}

TEST(OnnxExport, ConvolutionAttributesAreOnnxs) {
  nn::Sequential s;
  s.push_back("c", nn::make<nn::Conv2d>(4, 6, nn::Size2(3, 4),
                                        nn::Conv2dOptions{.padding = "same", .dilation = 2, .groups = 2}));
  s.push_back("t", nn::make<nn::ConvTranspose2d>(
                       6, 2, 3, nn::ConvTranspose2dOptions{.stride = 2, .padding = 1, .output_padding = 1}));
  const ModelProto m = onnx::to_onnx(s, {randn({1, 4, 9, 11})});
  const auto& conv = node_of(m, "Conv");
  EXPECT_EQ(attribute(conv, "group")->i(), 2);
  // "same" with dilation 2: 4 rows and 6 columns of padding, the odd one at the end.
  const auto& pads = attribute(conv, "pads")->ints();
  EXPECT_EQ(std::vector<int64_t>(pads.begin(), pads.end()), (std::vector<int64_t>{2, 3, 2, 3}));
  const auto& t = node_of(m, "ConvTranspose");
  const auto& op = attribute(t, "output_padding")->ints();
  EXPECT_EQ(std::vector<int64_t>(op.begin(), op.end()), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(dims(m.graph().output(0)), (std::vector<std::string>{"batch", "2", "18", "22"}));
}

TEST(OnnxExport, LstmGatesAreReorderedToOnnxs) {
  models::LstmLanguageModel lm({.vocab_size = 11, .embed_dim = 3, .hidden = 2, .layers = 2});
  const ModelProto m = onnx::to_onnx(lm, {randint(0, 11, {2, 5}, {.dtype = DType::Int64})});
  EXPECT_EQ(dims(m.graph().input(0)), (std::vector<std::string>{"batch", "sequence"}));
  EXPECT_EQ(dims(m.graph().output(0)), (std::vector<std::string>{"batch", "sequence", "11"}));
  int lstm_nodes = 0;
  for (const auto& n : m.graph().node()) lstm_nodes += n.op_type() == "LSTM";
  EXPECT_EQ(lstm_nodes, 2);  // one ONNX LSTM per layer
  // Ember's weight_ih_l1 is [i; f; g; o] in blocks of H rows; ONNX's W is [i; o; f; c].
  const Tensor w = lm.lstm.weight_ih(1);
  const int64_t H = 2;
  const std::vector<float> want =
      values(cat({w.narrow(0, 0, H), w.narrow(0, 3 * H, H), w.narrow(0, H, H), w.narrow(0, 2 * H, H)}, 0));
  EXPECT_EQ(values(initializer(m, "lstm.l1.W")), want);
  // B is [Wb; Rb], each reordered.
  const std::vector<float> b = values(initializer(m, "lstm.l1.B"));
  ASSERT_EQ(b.size(), 16u);
  EXPECT_EQ(b[2], values(lm.lstm.bias_ih(1))[6]);      // o's first unit
  EXPECT_EQ(b[8 + 4], values(lm.lstm.bias_hh(1))[2]);  // f's first unit, the recurrent bias
  // The head runs on [B, T, H]: MatMul with the transposed weight, then the bias.
  EXPECT_EQ(op_types(m).back(), "Add");
}

TEST(OnnxExport, GruTakesLinearBeforeResetAndZrnOrder) {
  auto gru = std::make_shared<nn::GRU>(3, 2, nn::GRUOptions{.batch_first = true});
  nn::Sequential s;
  s.push_back("gru", std::make_shared<nn::RnnSequence>(gru));
  const ModelProto m = onnx::to_onnx(s, {randn({2, 4, 3})});
  const auto& n = node_of(m, "GRU");
  ASSERT_NE(attribute(n, "linear_before_reset"), nullptr);
  EXPECT_EQ(attribute(n, "linear_before_reset")->i(), 1);
  const Tensor w = gru->weight_hh(0);
  EXPECT_EQ(values(initializer(m, "gru.l0.R")),
            values(cat({w.narrow(0, 2, 2), w.narrow(0, 0, 2), w.narrow(0, 4, 2)}, 0)));
}

TEST(OnnxExport, BiLstmClassifierTakesTokensAndLengths) {
  models::BiLstmClassifier clf({.vocab_size = 9, .embed_dim = 4, .hidden = 3, .classes = 2});
  const ModelProto m = onnx::to_onnx(
      clf, {randint(0, 9, {3, 5}, {.dtype = DType::Int64}), from_vector(std::vector<int64_t>{5, 2, 1}, {3})});
  ASSERT_EQ(m.graph().input_size(), 2);
  EXPECT_EQ(m.graph().input(1).name(), "lengths");
  EXPECT_EQ(dims(m.graph().input(1)), (std::vector<std::string>{"batch"}));
  const auto& lstm = node_of(m, "LSTM");
  EXPECT_EQ(attribute(lstm, "direction")->s(), "bidirectional");
  ASSERT_EQ(lstm.input_size(), 5);  // X, W, R, B, sequence_lens
  EXPECT_EQ(dims(m.graph().output(0)), (std::vector<std::string>{"batch", "2"}));
  EXPECT_NE(error_of([&] {
              onnx::to_onnx(clf, {zeros({3, 5}, {.dtype = DType::Int64})});
            }).find("BiLstmClassifier takes 2 inputs"),
            std::string::npos);
}

TEST(OnnxExport, TheModelKeepsItsModeAndItsStatistics) {
  models::DcganGenerator g;
  ASSERT_TRUE(g.is_training());
  const Tensor mean = g.bn0.running_mean.clone();
  onnx::to_onnx(g, {randn({2, models::kNoiseDim})});
  EXPECT_TRUE(g.is_training());
  EXPECT_EQ(values(g.bn0.running_mean), values(mean));  // traced in evaluation mode
  EXPECT_EQ(node_of(onnx::to_onnx(g, {randn({2, models::kNoiseDim})}), "BatchNormalization").input_size(), 5);
  // Also when the export fails.
  nn::Sequential bad;
  bad.push_back("f", nn::make<nn::Lambda>([](const Tensor& x) { return x; }));
  EXPECT_THROW(onnx::to_onnx(bad, {randn({1, 2})}), Error);
  EXPECT_TRUE(bad.is_training());
}

TEST(OnnxExport, WhatHasNoOnnxFormIsNamed) {
  nn::Sequential s;
  s.push_back("fc", nn::make<nn::Linear>(2, 3));
  s.push_back("act", nn::make<nn::Lambda>([](const Tensor& x) { return x * 2; }));
  EXPECT_NE(error_of([&] {
              onnx::to_onnx(s, {randn({1, 2})});
            }).find("module 'act' of type Lambda has no ONNX form"),
            std::string::npos);

  nn::Linear f64(2, 2);
  f64.to(DType::Float64);
  EXPECT_NE(error_of([&] {
              onnx::to_onnx(f64, {randn({1, 2}, {.dtype = DType::Float64})});
            }).find("parameter 'weight' is float64 (expected float32"),
            std::string::npos);

  nn::Sequential unflat;
  unflat.push_back("u", nn::make<nn::Unflatten>(0, Shape{1, 2}));
  EXPECT_NE(error_of([&] {
              onnx::to_onnx(unflat, {randn({2, 3})});
            }).find("splits dimension 0, the batch"),
            std::string::npos);

  nn::Sequential adaptive;
  adaptive.push_back("pool", nn::make<nn::AdaptiveAvgPool2d>(3));
  EXPECT_NE(error_of([&] {
              onnx::to_onnx(adaptive, {randn({1, 1, 7, 7})});
            }).find("whose windows are unequal"),
            std::string::npos);

  nn::Sequential bn;
  bn.push_back("bn", nn::make<nn::BatchNorm1d>(3, nn::BatchNormOptions{.track_running_stats = false}));
  EXPECT_NE(error_of([&] {
              onnx::to_onnx(bn, {randn({4, 3})});
            }).find("keeps no running statistics"),
            std::string::npos);

  auto lstm = std::make_shared<nn::LSTM>(3, 2);
  nn::Sequential unbatched;
  unbatched.push_back("lstm", std::make_shared<nn::RnnSequence>(lstm));
  EXPECT_NE(error_of([&] {
              onnx::to_onnx(unbatched, {randn({5, 3})});
            }).find("takes an unbatched input [5, 3]"),
            std::string::npos);

  models::MnistCnn net;
  EXPECT_NE(error_of([&] {
              onnx::to_onnx(net, {randn({1, 1, 28, 28})}, {.opset = 13});
            }).find("opset 13 is not written (expected 17 to 21)"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              onnx::to_onnx(net, {randn({1, 1, 28, 28}), randn({1})});
            }).find("MnistCnn takes 1 input, got 2 example inputs"),
            std::string::npos);
}

namespace {
// A Sequential whose forward does more than its layers: its export must be refused, not written wrong.
class Doubled : public nn::Sequential {
 public:
  Doubled() { push_back("fc", nn::make<nn::Linear>(2, 2)); }
  Tensor forward(const Tensor& x) override { return nn::Sequential::forward(x) * 2; }
  std::string type_name() const override { return "Doubled"; }
};
}  // namespace

TEST(OnnxExport, AForwardThatIsNotItsLayersIsRefused) {
  Doubled d;
  EXPECT_NE(error_of([&] {
              onnx::to_onnx(d, {randn({3, 2})});
            }).find("Doubled's layers differ from its forward"),
            std::string::npos);
}

TEST(OnnxExport, WritesThroughTheAtomicWriter) {
  const fs::path dir = fs::temp_directory_path() / ("ember_onnx_" + std::to_string(::getpid()));
  fs::create_directories(dir / "a_folder");
  models::MlpGenerator g;
  const Tensor z = randn({2, models::kNoiseDim});
  const std::string path = (dir / "g.onnx").string();
  onnx::export_model(g, z, path);
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  ModelProto back;
  ASSERT_TRUE(back.ParseFromString(bytes.str()));
  EXPECT_EQ(back.SerializeAsString(), onnx::to_onnx(g, {z}).SerializeAsString());
  EXPECT_EQ(op_types(back), (std::vector<std::string>{"Gemm", "Relu", "Gemm", "Tanh", "Reshape"}));
  // A folder is never replaced; a missing folder is an error, and nothing is left behind.
  EXPECT_THROW(onnx::export_model(g, z, (dir / "a_folder").string()), Error);
  EXPECT_TRUE(fs::is_directory(dir / "a_folder"));
  EXPECT_THROW(onnx::export_model(g, z, (dir / "missing" / "g.onnx").string()), Error);
  int files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++files;
  EXPECT_EQ(files, 2);  // g.onnx and a_folder
  fs::remove_all(dir);
}
