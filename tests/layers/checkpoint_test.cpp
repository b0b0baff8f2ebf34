// Checkpoints: round trips, exact resume (in one process; tests/layers/resume checks it across
// processes), piecewise I/O of large tensors, 64-bit offsets, and every kind of bad file.
#include "layers/checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>

#include "checkpoint.pb.h"
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

// The joined view every loader takes: the parameters, then the buffers (a BatchNorm's running
// statistics), so that loading a checkpoint restores both.
TEST(Checkpoint, ModelStateIsTheParametersThenTheBuffers) {
  CheckpointContents c;
  c.model_parameters = {{"w", ones({2})}, {"v", ones({1})}};
  c.model_buffers = {{"running_mean", zeros({2})}};
  const nn::StateDict sd = c.model_state();
  ASSERT_EQ(sd.size(), 3u);
  EXPECT_EQ(sd[0].first, "w");
  EXPECT_EQ(sd[1].first, "v");
  EXPECT_EQ(sd[2].first, "running_mean");
  auto bn = nn::make<nn::BatchNorm1d>(2);
  bn->named_buffers()[0].second.fill_(3.0);
  CheckpointContents saved;
  saved.model_parameters = bn->named_parameters();
  saved.model_buffers = bn->named_buffers();
  auto fresh = nn::make<nn::BatchNorm1d>(2);
  fresh->load_state_dict(saved.model_state());
  EXPECT_EQ(fresh->named_buffers()[0].second.sum().item<float>(), 6.0f);
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

// The same state gives the same bytes: Protobuf writes its maps (hyperparameters, scalars,
// metadata) in hash order, which differs between saves unless serialisation is deterministic.
TEST(Checkpoint, TheSameStateGivesTheSameBytes) {
  Scratch s;
  Net a;
  optim::Adam opt(a.parameters(), {.lr = 0.01, .weight_decay = 0.1});
  Tensor loss = a.f1(randn({4, 6})).sum();
  loss.backward();
  opt.step();
  std::map<std::string, std::string> metadata;
  for (int i = 0; i < 24; ++i) metadata["key" + std::to_string(i)] = std::to_string(i * i);
  save_training(s.file("a.ckpt"), {.model = &a, .optimizers = {&opt}}, {.epoch = 1, .step = 7}, metadata);
  const std::string first = slurp(s.file("a.ckpt"));
  for (int i = 0; i < 8; ++i) {
    save_training(s.file("b.ckpt"), {.model = &a, .optimizers = {&opt}}, {.epoch = 1, .step = 7}, metadata);
    ASSERT_EQ(slurp(s.file("b.ckpt")), first) << "save " << i << " differs";
  }
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

// ---- large tensors: piecewise I/O and 64-bit offsets

namespace {

// The file split into its preamble fields, its parsed header and the data section.
struct RawCheckpoint {
  proto::Checkpoint header;
  std::string data;  // from the aligned data start to the end
};
RawCheckpoint split(const std::string& bytes) {
  RawCheckpoint r;
  uint64_t head_len = 0;
  for (int i = 7; i >= 0; --i) head_len = (head_len << 8) | static_cast<unsigned char>(bytes[16 + i]);
  EXPECT_TRUE(r.header.ParseFromString(bytes.substr(24, head_len)));
  const uint64_t data_start = (24 + head_len + 63) / 64 * 64;
  r.data = bytes.substr(data_start);
  return r;
}
// A file with `header`, and `data` placed `gap` bytes into the data section (a hole before it).
void join(const std::string& path, const proto::Checkpoint& header, const std::string& data, uint64_t gap = 0) {
  std::string head;
  ASSERT_TRUE(header.SerializeToString(&head));
  std::string out = "EMBRCKPT";
  for (uint32_t v : {kCheckpointFormatVersion, 0u})
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((head.size() >> (8 * i)) & 0xff));
  out += head;
  out.resize((out.size() + 63) / 64 * 64, '\0');
  {
    std::ofstream f(path, std::ios::binary);
    f << out;
  }
  // The data goes after a hole: the file is sparse, so a gap of gigabytes costs no disk.
  std::FILE* f = std::fopen(path.c_str(), "r+b");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(::fseeko(f, static_cast<off_t>(out.size() + gap), SEEK_SET), 0);
  ASSERT_EQ(std::fwrite(data.data(), 1, data.size(), f), data.size());
  std::fclose(f);
}

struct ChunkGuard {
  uint64_t saved = checkpoint_detail::io_chunk_bytes();
  explicit ChunkGuard(uint64_t n) { checkpoint_detail::set_io_chunk_bytes(n); }
  ~ChunkGuard() { checkpoint_detail::set_io_chunk_bytes(saved); }
};

}  // namespace

TEST(Checkpoint, TensorsMoveInPiecesAndTheFileIsTheSame) {
  Scratch s;
  CheckpointContents c;
  Generator g(5);
  // Sizes around the 7-byte piece: empty, smaller, equal, not a multiple, many pieces.
  c.extra_tensors = {{"empty", zeros({0})},
                     {"u8x3", ones({3}, {.dtype = DType::UInt8})},
                     {"u8x7", arange(0, 7, 1, {.dtype = DType::UInt8})},
                     {"f32x13", randn({13}, {}, &g)},
                     {"f64", randn({37, 5}, {.dtype = DType::Float64}, &g)}};
  write_checkpoint(s.file("whole.ckpt"), c);
  {
    ChunkGuard small(7);
    write_checkpoint(s.file("pieces.ckpt"), c);
    EXPECT_EQ(slurp(s.file("pieces.ckpt")), slurp(s.file("whole.ckpt")));
    CheckpointContents r = read_checkpoint(s.file("pieces.ckpt"));
    ASSERT_EQ(r.extra_tensors.size(), c.extra_tensors.size());
    for (size_t i = 0; i < c.extra_tensors.size(); ++i)
      EXPECT_TRUE(equal(r.extra_tensors[i].second, c.extra_tensors[i].second)) << c.extra_tensors[i].first;
    // The checksum is still over the whole tensor: a flipped byte in a late piece is caught.
    std::string bad = slurp(s.file("pieces.ckpt"));
    bad[bad.size() - 9] ^= 0x10;
    spit(s.file("bad.ckpt"), bad);
    EXPECT_TRUE(has(error_of([&] { read_checkpoint(s.file("bad.ckpt")); }), "'f64' fails its CRC32"))
        << error_of([&] { read_checkpoint(s.file("bad.ckpt")); });
  }
  EXPECT_EQ(checkpoint_detail::io_chunk_bytes(), uint64_t{1} << 30);
  EXPECT_TRUE(has(error_of([] { checkpoint_detail::set_io_chunk_bytes(0); }), "1 byte to 1 GiB"));
  EXPECT_TRUE(has(error_of([] { checkpoint_detail::set_io_chunk_bytes((uint64_t{1} << 30) + 1); }), "1 GiB"));
}

TEST(Checkpoint, TensorDataBeyondFourGigabytesIsFound) {
  Scratch s;
  CheckpointContents c;
  c.extra_tensors = {{"far", arange(0, 16, 1, {.dtype = DType::Float32})}};
  write_checkpoint(s.file("near.ckpt"), c);
  RawCheckpoint raw = split(slurp(s.file("near.ckpt")));
  // Move the tensor 5 GiB into the data section (past every 32-bit offset) of a sparse file.
  const uint64_t gap = uint64_t{5} << 30;
  raw.header.mutable_extra_tensors(0)->set_offset(gap);
  join(s.file("far.ckpt"), raw.header, raw.data.substr(0, 64), gap);
  ASSERT_GT(fs::file_size(s.file("far.ckpt")), gap);
  CheckpointContents r = read_checkpoint(s.file("far.ckpt"));
  ASSERT_EQ(r.extra_tensors.size(), 1u);
  EXPECT_TRUE(equal(r.extra_tensors[0].second, c.extra_tensors[0].second));
}

TEST(Checkpoint, CorruptHeadersGiveClearErrors) {
  Scratch s;
  CheckpointContents c;
  c.extra_tensors = {{"t", arange(0, 6, 1, {.dtype = DType::Float32}).view({2, 3})}};
  write_checkpoint(s.file("ok.ckpt"), c);
  const RawCheckpoint good = split(slurp(s.file("ok.ckpt")));
  auto error_with = [&](const std::function<void(proto::TensorRecord&)>& edit) {
    proto::Checkpoint h = good.header;
    edit(*h.mutable_extra_tensors(0));
    join(s.file("edited.ckpt"), h, good.data);
    return error_of([&] { read_checkpoint(s.file("edited.ckpt")); });
  };
  EXPECT_TRUE(has(error_with([](proto::TensorRecord& r) { r.set_dtype(static_cast<proto::DType>(42)); }),
                  "tensor 't' has unknown dtype code 42"));
  EXPECT_TRUE(has(error_with([](proto::TensorRecord& r) { r.set_shape(0, -2); }), "negative size"));
  EXPECT_TRUE(has(error_with([](proto::TensorRecord& r) {
                    r.set_shape(0, int64_t{1} << 40);
                    r.set_shape(1, int64_t{1} << 40);
                  }),
                  "impossible shape"));
  EXPECT_TRUE(has(error_with([](proto::TensorRecord& r) { r.set_nbytes(20); }), "declares 20 bytes"));
  EXPECT_TRUE(has(error_with([](proto::TensorRecord& r) { r.set_offset(uint64_t{1} << 62); }), "beyond the end"));
  // Header bytes that do not parse.
  std::string bytes = slurp(s.file("ok.ckpt"));
  for (size_t i = 24; i < 40; ++i) bytes[i] = static_cast<char>(0xff);
  spit(s.file("garbled.ckpt"), bytes);
  EXPECT_TRUE(has(error_of([&] { read_checkpoint(s.file("garbled.ckpt")); }), "header of"));
  // A header length beyond the file.
  bytes = slurp(s.file("ok.ckpt"));
  bytes[20] = 0x7f;
  spit(s.file("longhead.ckpt"), bytes);
  EXPECT_TRUE(has(error_of([&] { read_checkpoint(s.file("longhead.ckpt")); }), "truncated"));
}

// Optimizer records that cannot belong to the model's parameters, or that would resume into NaN,
// are refused by name. A state for an index no group lists was once dropped without a word, and
// a NaN learning rate or a negative step were taken as they were.
TEST(Checkpoint, InconsistentOptimizerRecordsAreRefused) {
  Scratch s;
  Net a;
  optim::Adam opt(a.parameters(), {.lr = 0.01});
  a.f1(randn({4, 6})).sum().backward();
  opt.step();
  save(opt, s.file("o.ckpt"));
  const RawCheckpoint good = split(slurp(s.file("o.ckpt")));
  ASSERT_GT(good.header.optimizers(0).states_size(), 0);
  auto error_with = [&](const std::function<void(proto::OptimizerState&)>& edit) {
    proto::Checkpoint h = good.header;
    edit(*h.mutable_optimizers(0));
    join(s.file("edited.ckpt"), h, good.data);
    return error_of([&] { read_checkpoint(s.file("edited.ckpt")); });
  };
  std::string msg = error_with([](proto::OptimizerState& o) { o.mutable_states(0)->set_param(999); });
  EXPECT_TRUE(has(msg, "has a state for parameter index 999, which no parameter group lists")) << msg;
  msg = error_with([](proto::OptimizerState& o) { o.mutable_groups(0)->set_params(0, 999); });
  EXPECT_TRUE(has(msg, "lists parameter index 999 out of range")) << msg;
  msg = error_with([](proto::OptimizerState& o) { o.mutable_groups(0)->set_params(1, o.groups(0).params(0)); });
  EXPECT_TRUE(has(msg, "or twice")) << msg;
  msg = error_with([](proto::OptimizerState& o) { o.mutable_states(0)->set_step(-5); });
  EXPECT_TRUE(has(msg, "has step -5, expected >= 0")) << msg;
  msg = error_with([](proto::OptimizerState& o) {
    (*o.mutable_groups(0)->mutable_hyperparameters())["lr"] = std::numeric_limits<double>::quiet_NaN();
  });
  EXPECT_TRUE(has(msg, "hyperparameter 'lr' is nan, expected a finite number")) << msg;
  // The unedited file still loads.
  EXPECT_NO_THROW(read_checkpoint(s.file("o.ckpt")));
}

TEST(Checkpoint, LoadErrorsLeaveEverythingAsItWas) {
  Scratch s;
  Net a;
  optim::SGD opt(a.parameters(), {.lr = 0.1});
  Generator g(3);
  save_training(s.file("t.ckpt"), {&a, {&opt}, {{"g", &g}}}, {});
  // Another optimizer count, a generator the file lacks, an optimizer from a model-only file, an
  // optimizer of another kind.
  Net b;
  optim::SGD o1(b.parameters(), {.lr = 0.1}), o2(b.parameters(), {.lr = 0.1});
  EXPECT_TRUE(has(error_of([&] {
                    load_training(s.file("t.ckpt"), {&b, {&o1, &o2}, {}});
                  }),
                  "holds 1 optimizer states but the program has 2"));
  Generator other(9);
  EXPECT_TRUE(has(error_of([&] {
                    load_training(s.file("t.ckpt"), {&b, {&o1}, {{"loader", &other}}});
                  }),
                  "no state for generator 'loader'"));
  EXPECT_EQ(other.state().seed, 9u);
  save(a, s.file("model.ckpt"));
  EXPECT_TRUE(has(error_of([&] { load(o1, s.file("model.ckpt")); }), "holds 0 optimizer states (expected 1)"));
  optim::Adam adam(b.parameters());
  EXPECT_TRUE(has(error_of([&] { load(adam, s.file("t.ckpt")); }), "the state is for SGD, not Adam"));
  // A failed write keeps the previous file whole and leaves no temporary file behind.
  const std::string before = slurp(s.file("model.ckpt"));
  CheckpointContents bad;
  bad.extra_tensors = {{"ok", ones({2})}, {"undefined", Tensor()}};
  EXPECT_TRUE(has(error_of([&] { write_checkpoint(s.file("model.ckpt"), bad); }), "'undefined' is undefined"));
  EXPECT_EQ(slurp(s.file("model.ckpt")), before);
  int files = 0;
  for (const auto& e : fs::directory_iterator(s.dir)) files += e.is_regular_file();
  EXPECT_EQ(files, 2);  // t.ckpt and model.ckpt
}

TEST(Checkpoint, SchedulesAreRestoredAndMismatchesRefused) {
  Scratch s;
  Net a;
  optim::SGD opt(a.parameters(), {.lr = 0.1, .momentum = 0.9});
  optim::StepLR step(opt, 2, 0.5);
  optim::ReduceLROnPlateau plateau(opt, {.patience = 1});
  for (int i = 0; i < 3; ++i) step.step();
  plateau.step(1.0);
  plateau.step(2.0);
  save_training(s.file("t.ckpt"), {&a, {&opt}, {}, {&step, &plateau}}, {});
  EXPECT_EQ(read_checkpoint(s.file("t.ckpt")).schedulers.size(), 2u);

  Net b;
  optim::SGD opt_b(b.parameters(), {.lr = 0.1, .momentum = 0.9});
  optim::StepLR step_b(opt_b, 2, 0.5);
  optim::ReduceLROnPlateau plateau_b(opt_b, {.patience = 1});
  // Another count or another kind of schedule: refused, and nothing changes.
  EXPECT_TRUE(has(error_of([&] {
                    load_training(s.file("t.ckpt"), {&b, {&opt_b}, {}, {&step_b}});
                  }),
                  "holds 2 LR schedules but the program has 1"));
  EXPECT_TRUE(has(error_of([&] {
                    load_training(s.file("t.ckpt"), {&b, {&opt_b}, {}, {&plateau_b, &step_b}});
                  }),
                  "LR schedule 0 is a LRScheduler but the program's is a ReduceLROnPlateau"));
  // A failure after the schedules were loaded (the model does not match) puts them back.
  optim::SGD opt_c({randn({2}).requires_grad_(true)}, {.lr = 0.1});
  optim::StepLR step_c(opt_c, 2, 0.5);
  optim::ReduceLROnPlateau plateau_c(opt_c, {.patience = 1});
  struct Small : nn::Module {
    nn::Linear f{1, 1};
    Small() { register_module("f", &f); }
  } small;
  EXPECT_FALSE(error_of([&] {
                 load_training(s.file("t.ckpt"), {&small, {&opt_c}, {}, {&step_c, &plateau_c}});
               }).empty());
  EXPECT_EQ(step_c.last_epoch(), 0);
  EXPECT_EQ(plateau_c.num_bad_epochs(), 0);

  load_training(s.file("t.ckpt"), {&b, {&opt_b}, {}, {&step_b, &plateau_b}});
  EXPECT_EQ(step_b.last_epoch(), 3);
  EXPECT_EQ(step_b.state_dict(), step.state_dict());
  EXPECT_EQ(plateau_b.state_dict(), plateau.state_dict());
  step.step();
  step_b.step();
  EXPECT_DOUBLE_EQ(opt_b.param_groups()[0].options.at("lr"), opt.param_groups()[0].options.at("lr"));
}
