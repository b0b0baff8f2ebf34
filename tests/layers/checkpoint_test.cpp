// Checkpoints: round trips, exact resume, and every kind of bad file.
#include "layers/checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "layers/nn.h"
#include "test_helpers.h"

using namespace ember;
using namespace test_util;
namespace fs = std::filesystem;

namespace {

struct Scratch {
  fs::path dir;
  Scratch() {
    dir = fs::temp_directory_path() / ("ember_ckpt_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(dir);
  }
  ~Scratch() { fs::remove_all(dir); }
  std::string file(const std::string& n) const { return (dir / n).string(); }
  static inline int counter = 0;
};

struct Net : nn::Module {
  nn::Linear f1{6, 8}, f2{8, 3};
  nn::BatchNorm1d bn{8};
  nn::Dropout drop{0.3};
  Net() { register_modules({{"f1", &f1}, {"bn", &bn}, {"drop", &drop}, {"f2", &f2}}); }
  Tensor forward(const Tensor& x) override { return f2(drop(relu(bn(f1(x))))); }
};

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}
void spit(const std::string& p, const std::string& s) {
  std::ofstream(p, std::ios::binary) << s;
}

// One training step on a batch chosen by a shuffled order from `order_gen`.
void train_steps(Net& net, optim::Optimizer& opt, Generator& order_gen, Generator& dropout_gen, int steps,
                 const Tensor& xs, const Tensor& ys) {
  for (int s = 0; s < steps; ++s) {
    std::vector<int64_t> idx = randperm(xs.size(0), &order_gen).to_vector<int64_t>();
    idx.resize(8);
    Tensor index = from_vector(idx, {8});
    Tensor x = index_select(xs, 0, index), y = index_select(ys, 0, index);
    Tensor h = relu(net.bn(net.f1(x)));
    h = dropout(h, 0.3, true, &dropout_gen);
    Tensor loss = cross_entropy(net.f2(h), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
}

}  // namespace

TEST(Checkpoint, ModuleRoundTrip) {
  Scratch s;
  Net a, b;
  a.bn.running_mean.fill_(0.25);
  save(a, s.file("m.ckpt"));
  load(b, s.file("m.ckpt"));
  auto sa = a.state_dict(), sb = b.state_dict();
  ASSERT_EQ(sa.size(), sb.size());
  for (size_t i = 0; i < sa.size(); ++i) {
    EXPECT_EQ(sa[i].first, sb[i].first);
    EXPECT_TRUE(equal(sa[i].second, sb[i].second)) << sa[i].first;
  }
  CheckpointContents c = read_checkpoint(s.file("m.ckpt"));
  EXPECT_EQ(c.model_parameters.size(), 6u);  // f1/bn/f2 weights and biases
  EXPECT_EQ(c.model_buffers.size(), 3u);     // running_mean, running_var, num_batches_tracked
}

TEST(Checkpoint, AllDtypesAndEmptyTensors) {
  Scratch s;
  CheckpointContents c;
  c.extra_tensors = {{"f32", randn({3, 5})},
                     {"f64", randn({2}, {.dtype = DType::Float64})},
                     {"i32", arange(0, 7, 1, {.dtype = DType::Int32})},
                     {"i64", arange(9)},
                     {"u8", ones({4}, {.dtype = DType::UInt8})},
                     {"bool", ones({3}).to(DType::Bool)},
                     {"f16", randn({5}).to(DType::Float16)},
                     {"bf16", randn({5}).to(DType::BFloat16)},
                     {"empty", zeros({0, 4})},
                     {"scalar", scalar_tensor(2.5)},
                     {"view", arange(12).reshape({3, 4}).t()}};
  c.metadata = {{"note", "hello"}};
  c.position = {3, 120, 3, 7, 2, 1};
  c.generators = {{"default", {42, 99}}};
  write_checkpoint(s.file("x.ckpt"), c);
  CheckpointContents r = read_checkpoint(s.file("x.ckpt"));
  ASSERT_EQ(r.extra_tensors.size(), c.extra_tensors.size());
  for (size_t i = 0; i < c.extra_tensors.size(); ++i) {
    EXPECT_EQ(r.extra_tensors[i].first, c.extra_tensors[i].first);
    EXPECT_EQ(r.extra_tensors[i].second.dtype(), c.extra_tensors[i].second.dtype());
    EXPECT_EQ(r.extra_tensors[i].second.shape(), c.extra_tensors[i].second.shape());
    EXPECT_TRUE(equal(r.extra_tensors[i].second.to(DType::Float64), c.extra_tensors[i].second.to(DType::Float64)))
        << c.extra_tensors[i].first;
  }
  EXPECT_EQ(r.metadata.at("note"), "hello");
  EXPECT_EQ(r.position.step, 120);
  EXPECT_EQ(r.position.loader_batch, 7);
  EXPECT_EQ(r.position.world_size, 2);
  EXPECT_EQ(r.generators[0].second.offset, 99u);
}

TEST(Checkpoint, ResumeIsBitExact) {
  Scratch s;
  Generator data_gen(7);
  Tensor xs = randn({40, 6}, {}, &data_gen);
  Tensor ys = randint(0, 3, {40}, {.dtype = DType::Int64}, &data_gen);

  // N + M steps straight.
  manual_seed(1);
  Net ref;
  optim::Adam ref_opt(ref.parameters(), {.lr = 1e-2});
  Generator ref_order(11), ref_drop(12);
  train_steps(ref, ref_opt, ref_order, ref_drop, 5 + 4, xs, ys);

  // N steps, save, restore into fresh objects, M steps.
  manual_seed(1);
  {
    Net a;
    optim::Adam opt(a.parameters(), {.lr = 1e-2});
    Generator order(11), drop(12);
    train_steps(a, opt, order, drop, 5, xs, ys);
    save_training(s.file("t.ckpt"), {&a, {&opt}, {{"order", &order}, {"dropout", &drop}}}, {0, 5, 0, 0, 1, 0});
  }
  manual_seed(999);  // a fresh process would start from other random weights
  Net b;
  optim::Adam opt_b(b.parameters(), {.lr = 1e-2});
  Generator order_b(0), drop_b(0);
  auto [pos, meta] = load_training(s.file("t.ckpt"), {&b, {&opt_b}, {{"order", &order_b}, {"dropout", &drop_b}}});
  EXPECT_EQ(pos.step, 5);
  train_steps(b, opt_b, order_b, drop_b, 4, xs, ys);

  auto pr = ref.state_dict(), pb = b.state_dict();
  ASSERT_EQ(pr.size(), pb.size());
  for (size_t i = 0; i < pr.size(); ++i) EXPECT_TRUE(equal(pr[i].second, pb[i].second)) << pr[i].first;
}

TEST(Checkpoint, OptimizerRoundTrip) {
  Scratch s;
  Net a;
  optim::SGD opt(a.parameters(), {.lr = 0.1, .momentum = 0.9});
  Tensor loss = a.f1(randn({4, 6})).sum();
  loss.backward();
  opt.step();
  save(opt, s.file("o.ckpt"));
  optim::SGD opt2(a.parameters(), {.lr = 0.5, .momentum = 0.9});
  load(opt2, s.file("o.ckpt"));
  EXPECT_DOUBLE_EQ(opt2.param_groups()[0].options.at("lr"), 0.1);
  const optim::ParamState* st = opt2.find_state(a.f1.weight);
  ASSERT_NE(st, nullptr);
  ASSERT_NE(st->find("momentum_buffer"), nullptr);
  EXPECT_TRUE(equal(*st->find("momentum_buffer"), *opt.find_state(a.f1.weight)->find("momentum_buffer")));
}

TEST(Checkpoint, MismatchesAreAllListed) {
  Scratch s;
  Net a;
  save(a, s.file("m.ckpt"));
  struct Other : nn::Module {
    nn::Linear f1{6, 9};  // shape differs
    nn::Linear extra{2, 2};
    Other() { register_modules({{"f1", &f1}, {"extra", &extra}}); }
  } o;
  std::string e = error_of([&] { load(o, s.file("m.ckpt")); });
  EXPECT_NE(e.find("f1.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("extra.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("f2.weight"), std::string::npos) << e;
}

TEST(Checkpoint, BadFilesGiveClearErrors) {
  Scratch s;
  Net a;
  save(a, s.file("good.ckpt"));
  const std::string good = slurp(s.file("good.ckpt"));
  EXPECT_NE(error_of([&] { read_checkpoint(s.file("missing.ckpt")); }).find("does not exist"), std::string::npos);
  spit(s.file("text"), "this is not a checkpoint at all, just some text");
  EXPECT_NE(error_of([&] { read_checkpoint(s.file("text")); }).find("not an Ember checkpoint"), std::string::npos);
  spit(s.file("short"), "EMB");
  EXPECT_NE(error_of([&] { read_checkpoint(s.file("short")); }).find("too short"), std::string::npos);
  std::string v = good;
  v[8] = 9;
  spit(s.file("version"), v);
  EXPECT_NE(error_of([&] { read_checkpoint(s.file("version")); }).find("format version 9"), std::string::npos);
  for (size_t cut : {size_t{30}, good.size() / 2, good.size() - 1}) {
    spit(s.file("trunc"), good.substr(0, cut));
    std::string e = error_of([&] { read_checkpoint(s.file("trunc")); });
    EXPECT_FALSE(e.empty()) << "cut at " << cut;
  }
  std::string flipped = good;
  flipped[flipped.size() - 3] ^= 0x55;
  spit(s.file("flip"), flipped);
  EXPECT_NE(error_of([&] { read_checkpoint(s.file("flip")); }).find("CRC32"), std::string::npos);
  EXPECT_NE(error_of([&] { save(a, s.file("no_such_dir/x.ckpt")); }).find("does not exist"), std::string::npos);
}
