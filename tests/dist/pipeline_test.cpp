// Pipeline parallelism on real ranks: the model is cut into one stage per rank; K steps under
// either schedule, with and without recomputation, for several micro-batch counts, end with each
// stage's weights equal to those one process gets training the whole model on the same global
// batches. Also: buffers stay on their stage and are updated once per micro-batch, 1F1B holds
// fewer micro-batches than GPipe, the forward-only pass, and arguments that are refused.
#include "dist/pipeline.h"

#include <cmath>
#include <limits>
#include <map>

#include "core/autograd/grad_mode.h"
#include "core/ops/autocast.h"
#include "dist/pipeline_grid.h"
#include "dist_test_util.h"
#include "layers/nn.h"
#include "rendezvous_comm.h"

using namespace ember;
using namespace ember::dist;
using dist_test::comm;
using test_util::error_of;
using test_util::has;

namespace {

// Seven layers, float64 so that the micro-batches' different summation order stays far below the
// tolerance.
std::shared_ptr<nn::Sequential> mlp(uint64_t seed) {
  manual_seed(seed);
  auto m = std::make_shared<nn::Sequential>(
      nn::make<nn::Linear>(6, 16), nn::make<nn::Tanh>(), nn::make<nn::Linear>(16, 16), nn::make<nn::ReLU>(),
      nn::make<nn::Linear>(16, 12), nn::make<nn::Tanh>(), nn::make<nn::Linear>(12, 5));
  m->to(DType::Float64);
  return m;
}

// Conv, pooling, flatten: activations change shape and rank at every boundary.
std::shared_ptr<nn::Sequential> cnn(uint64_t seed, bool batch_norm) {
  manual_seed(seed);
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(nn::make<nn::Conv2d>(1, 4, 3));
  if (batch_norm) m->push_back(nn::make<nn::BatchNorm2d>(4));
  m->push_back(nn::make<nn::ReLU>());
  m->push_back(nn::make<nn::MaxPool2d>(2));
  m->push_back(nn::make<nn::Conv2d>(4, 6, 3));
  m->push_back(nn::make<nn::ReLU>());
  m->push_back(nn::make<nn::Flatten>());
  m->push_back(nn::make<nn::Linear>(6 * 2 * 2, 3));
  m->to(DType::Float64);
  return m;
}

// The LSTM language model's shape as a Sequential: embedding, four single-layer LSTMs (so that
// stages can cut between them), the vocabulary head. Tokens [B, T] -> logits [B, T, V].
std::shared_ptr<nn::Sequential> lstm_lm(uint64_t seed) {
  manual_seed(seed);
  auto m = std::make_shared<nn::Sequential>();
  m->push_back("embed", nn::make<nn::Embedding>(11, 6));
  for (int l = 0; l < 4; ++l)
    m->push_back("lstm" + std::to_string(l), nn::make<nn::RnnSequence>(nn::make<nn::LSTM>(
                                                 l == 0 ? 6 : 8, 8, nn::LSTMOptions{.batch_first = true})));
  m->push_back("head", nn::make<nn::Linear>(8, 11));
  m->to(DType::Float64);
  return m;
}

// Stage s of K starts at layer s * L / K.
std::vector<int> even_boundaries(int layers, int k) {
  std::vector<int> b;
  for (int s = 0; s < k; ++s) b.push_back(s * layers / k);
  return b;
}

struct Batch {
  Tensor x, y;
};
Batch batch_of(const Shape& x_shape, int64_t classes, uint64_t seed) {
  Generator g(seed);
  return {randn(x_shape, {.dtype = DType::Float64}, &g),
          randint(0, classes, {x_shape[0]}, {.dtype = DType::Int64}, &g)};
}

Tensor loss_fn(const Tensor& out, const Tensor& y) {
  return cross_entropy(out, y);
}

// The largest difference between this stage's parameters and buffers and the same names in `ref`.
double stage_diff(Pipeline& pipe, nn::Module& ref) {
  std::map<std::string, Tensor> want;
  for (auto& [n, t] : ref.state_dict()) want[n] = t;
  double worst = 0;
  for (auto& [n, t] : pipe.stage_module().state_dict()) {
    EXPECT_TRUE(want.count(n)) << n;
    if (!want.count(n)) continue;
    auto a = t.to_vector<double>(), b = want[n].to_vector<double>();
    for (size_t j = 0; j < a.size(); ++j) worst = std::max(worst, std::abs(a[j] - b[j]));
  }
  return worst;
}

struct PipeRun {
  PipelineSchedule schedule;
  int micro_batches;
  bool recompute;
};

// `steps` SGD steps (momentum: the step depends on the whole gradient history) of the pipeline and
// of the whole model in one process; `reference_micro` > 0 accumulates the reference's gradient
// over that many micro-batches (models with batch statistics).
void check_equivalence(const std::function<std::shared_ptr<nn::Sequential>()>& make, const Shape& x_shape,
                       int64_t classes, const PipeRun& r, int reference_micro = 0, Communicator& c = comm()) {
  const int steps = 3;
  auto model = make(), ref = make();
  PipelineOptions o{.micro_batches = r.micro_batches, .schedule = r.schedule, .recompute = r.recompute};
  Pipeline pipe(*model, even_boundaries(static_cast<int>(model->size()), c.size()), c, o);
  optim::SGD opt(pipe.parameters(), {.lr = 0.1, .momentum = 0.9});
  optim::SGD ref_opt(ref->parameters(), {.lr = 0.1, .momentum = 0.9});
  for (int s = 0; s < steps; ++s) {
    Batch b = batch_of(x_shape, classes, 50 + static_cast<uint64_t>(s));
    opt.zero_grad();
    const double loss = pipe.train_step(pipe.is_first() ? b.x : Tensor(), pipe.is_last() ? b.y : Tensor(), loss_fn);
    opt.step();
    ref_opt.zero_grad();
    double ref_loss = 0;
    if (reference_micro == 0) {
      Tensor l = loss_fn(ref->forward(b.x), b.y);
      l.backward();
      ref_loss = l.item();
    } else {
      const auto sizes = micro_batch_sizes(x_shape[0], reference_micro);
      int64_t at = 0;
      for (int64_t n : sizes) {
        Tensor l = loss_fn(ref->forward(b.x.narrow(0, at, n)), b.y.narrow(0, at, n));
        mul(l, static_cast<double>(n) / static_cast<double>(x_shape[0])).backward();
        ref_loss += l.item() * static_cast<double>(n) / static_cast<double>(x_shape[0]);
        at += n;
      }
    }
    ref_opt.step();
    EXPECT_NEAR(loss, ref_loss, 1e-10) << "step " << s << " on " << pipe.describe();
  }
  EXPECT_LT(stage_diff(pipe, *ref), 1e-10) << pipe.describe() << ", " << pipeline_schedule_name(r.schedule) << ", M "
                                           << r.micro_batches << (r.recompute ? ", recompute" : "");
}

// The CNN in float32, for the mixed-precision runs.
std::shared_ptr<nn::Sequential> float_cnn() {
  auto net = cnn(8, false);
  net->to(DType::Float32);
  return net;
}

// One process's forward and backward of a batch micro-batch by micro-batch as a pipeline of `m`
// cuts it, each forward under autocast(cpu, low), `backward` given each micro-batch's loss
// weighted by its share of the batch; returns the batch's mean loss.
double one_process_autocast_step(nn::Sequential& ref, const Tensor& x, const Tensor& y, int m, DType low,
                                 const std::function<void(const Tensor&)>& backward) {
  const int64_t rows = x.size(0);
  double loss = 0;
  int64_t at = 0;
  for (int64_t n : micro_batch_sizes(rows, m)) {
    Tensor l;
    {
      autocast ac(Device::cpu(), low);
      l = loss_fn(ref.forward(x.narrow(0, at, n)), y.narrow(0, at, n));
    }
    const double w = static_cast<double>(n) / static_cast<double>(rows);
    backward(mul(l, w));
    loss += l.item() * w;
    at += n;
  }
  return loss;
}

std::vector<PipeRun> every_run() {
  std::vector<PipeRun> runs;
  for (PipelineSchedule s : {PipelineSchedule::GPipe, PipelineSchedule::OneFOneB})
    for (int m : {1, 3, 4})
      for (bool rc : {false, true}) runs.push_back({s, m, rc});
  return runs;
}

}  // namespace

TEST(Pipeline, MlpTrainsLikeOneProcessUnderEverySchedule) {
  for (const PipeRun& r : every_run()) check_equivalence([] { return mlp(7); }, {12, 6}, 5, r);
}

// Mixed precision (PipelineOptions::autocast): each stage's forward under autocast bfloat16 gives
// what one process gets running the whole model's forward under autocast, micro-batch by
// micro-batch as the pipeline cuts the batch (a bfloat16 rounding depends on the float32 sum before
// it); the CNN in float32, its activations widened to float32 at the stage boundary as the next op
// of one process widens them. Its losses are not float32's (it did run in bfloat16).
TEST(Pipeline, Bf16AutocastTrainsLikeOneProcessUnderAutocast) {
  for (int m : {1, 3}) {
    auto model = float_cnn(), ref = float_cnn(), ref32 = float_cnn();
    Pipeline pipe(*model, even_boundaries(static_cast<int>(model->size()), comm().size()), comm(),
                  {.micro_batches = m, .autocast = DType::BFloat16});
    optim::SGD opt(pipe.parameters(), {.lr = 0.1, .momentum = 0.9});
    optim::SGD ref_opt(ref->parameters(), {.lr = 0.1, .momentum = 0.9});
    for (int s = 0; s < 3; ++s) {
      Batch b = batch_of({12, 1, 10, 10}, 3, 60 + static_cast<uint64_t>(s));
      const Tensor x = b.x.to(DType::Float32);
      opt.zero_grad();
      const double loss = pipe.train_step(pipe.is_first() ? x : Tensor(), pipe.is_last() ? b.y : Tensor(), loss_fn);
      opt.step();
      ref_opt.zero_grad();
      const double ref_loss =
          one_process_autocast_step(*ref, x, b.y, m, DType::BFloat16, [](const Tensor& l) { l.backward(); });
      ref_opt.step();
      if (pipe.is_last()) {
        EXPECT_NEAR(loss, ref_loss, 1e-5) << "step " << s << ", M " << m;
        if (s == 0) {
          EXPECT_NE(loss, loss_fn(ref32->forward(x), b.y).item()) << "the step ran in float32";
        }
      }
    }
    EXPECT_LT(stage_diff(pipe, *ref), 1e-5) << pipe.describe() << ", M " << m;
  }
}

// float16 with loss scaling (PipelineOptions::scaler): the stages' scalers train as one process's
// scaler does, micro-batch by micro-batch under autocast float16, and skip together: at step 1 an
// inf is planted in one gradient of the first stage only, so the other stages' gradients are finite
// and they skip only because the flag is all-reduced; every stage's scale halves with the
// reference's.
TEST(Pipeline, Fp16WithLossScalingTrainsLikeOneProcessAndStagesSkipTogether) {
  const double inf = std::numeric_limits<double>::infinity();
  for (int m : {1, 3}) {
    auto model = float_cnn(), ref = float_cnn();
    const optim::GradScalerOptions so{.init_scale = 1024.0, .growth_interval = 2};
    optim::GradScaler scaler(so), ref_scaler(so);
    Pipeline pipe(*model, even_boundaries(static_cast<int>(model->size()), comm().size()), comm(),
                  {.micro_batches = m, .autocast = DType::Float16, .scaler = &scaler});
    optim::SGD opt(pipe.parameters(), {.lr = 0.1, .momentum = 0.9});
    optim::SGD ref_opt(ref->parameters(), {.lr = 0.1, .momentum = 0.9});
    for (int s = 0; s < 4; ++s) {
      Batch b = batch_of({12, 1, 10, 10}, 3, 70 + static_cast<uint64_t>(s));
      const Tensor x = b.x.to(DType::Float32);
      opt.zero_grad();
      const double loss = pipe.train_step(pipe.is_first() ? x : Tensor(), pipe.is_last() ? b.y : Tensor(), loss_fn);
      if (s == 1 && pipe.is_first()) pipe.parameters()[0].grad().flatten().narrow(0, 0, 1).fill_(inf);
      scaler.step(opt);
      scaler.update();
      ref_opt.zero_grad();
      const double ref_loss = one_process_autocast_step(*ref, x, b.y, m, DType::Float16,
                                                        [&](const Tensor& l) { ref_scaler.scale(l).backward(); });
      if (s == 1) ref->parameters()[0].grad().flatten().narrow(0, 0, 1).fill_(inf);
      ref_scaler.step(ref_opt);
      ref_scaler.update();
      if (pipe.is_last()) {
        EXPECT_NEAR(loss, ref_loss, 1e-5) << "step " << s << ", M " << m;
      }
      EXPECT_EQ(scaler.get_scale(), ref_scaler.get_scale()) << "step " << s << " on " << pipe.describe();
    }
    EXPECT_EQ(scaler.get_scale(), 1024.0) << "halved at step 1, doubled after steps 2 and 3";
    EXPECT_LT(stage_diff(pipe, *ref), 1e-5) << pipe.describe() << ", M " << m;
  }
}

TEST(Pipeline, CnnTrainsLikeOneProcessUnderEverySchedule) {
  for (const PipeRun& r : every_run()) check_equivalence([] { return cnn(8, false); }, {12, 1, 10, 10}, 3, r);
}

// 10 rows in 4 micro-batches: 3, 3, 2, 2; each micro-batch's loss weighs by its share.
// Token inputs on the first stage, [b, T, H] activations between LSTMs, a loss over every step.
TEST(Pipeline, LstmLanguageModelTrainsLikeOneProcessUnderEverySchedule) {
  for (const PipeRun& r : every_run()) {
    const int steps = 2;
    auto model = lstm_lm(19), ref = lstm_lm(19);
    PipelineOptions o{.micro_batches = r.micro_batches, .schedule = r.schedule, .recompute = r.recompute};
    Pipeline pipe(*model, even_boundaries(6, comm().size()), comm(), o);
    optim::SGD opt(pipe.parameters(), {.lr = 0.5});
    optim::SGD ref_opt(ref->parameters(), {.lr = 0.5});
    auto lm_loss = [](const Tensor& logits, const Tensor& y) {
      return cross_entropy(logits.reshape({-1, logits.size(-1)}), y.reshape({-1}));
    };
    for (int s = 0; s < steps; ++s) {
      Generator g(90 + static_cast<uint64_t>(s));
      Tensor tokens = randint(0, 11, {12, 5}, {.dtype = DType::Int64}, &g);
      Tensor next = randint(0, 11, {12, 5}, {.dtype = DType::Int64}, &g);
      opt.zero_grad();
      pipe.train_step(tokens, next, lm_loss);
      opt.step();
      ref_opt.zero_grad();
      lm_loss(ref->forward(tokens), next).backward();
      ref_opt.step();
    }
    EXPECT_LT(stage_diff(pipe, *ref), 1e-10) << pipe.describe() << ", " << pipeline_schedule_name(r.schedule) << ", M "
                                             << r.micro_batches << (r.recompute ? ", recompute" : "");
  }
}

TEST(Pipeline, UnequalMicroBatchesStillGiveTheBatchGradient) {
  check_equivalence([] { return mlp(9); }, {10, 6}, 5, {PipelineSchedule::OneFOneB, 4, false});
}

// Batch statistics are per micro-batch (as in every pipeline): the reference accumulates over the
// same micro-batches. The running statistics stay on their stage, updated once per micro-batch
// even when the stage's forward runs a second time for recomputation.
TEST(Pipeline, BatchNormBuffersStayOnTheirStageAndUpdateOnce) {
  for (bool rc : {false, true})
    check_equivalence([] { return cnn(10, true); }, {12, 1, 10, 10}, 3, {PipelineSchedule::OneFOneB, 3, rc}, 3);
}

TEST(Pipeline, OneFOneBHoldsFewerMicroBatchesThanGPipe) {
  for (PipelineSchedule s : {PipelineSchedule::GPipe, PipelineSchedule::OneFOneB}) {
    auto model = mlp(11);
    Pipeline pipe(*model, even_boundaries(7, comm().size()), comm(), {.micro_batches = 6, .schedule = s});
    Batch b = batch_of({12, 6}, 5, 3);
    pipe.train_step(b.x, b.y, loss_fn);
    EXPECT_EQ(pipe.last_step().max_in_flight, pipeline_in_flight(s, comm().size(), pipe.stage(), 6))
        << pipe.describe() << " " << pipeline_schedule_name(s);
  }
}

// Live activation memory, from the allocator. GPipe's peak at M = 4 and M = 8 micro-batches of the
// same size gives one micro-batch's activations A and the rest of the stage's memory; under 1F1B
// with M = 8 each stage's peak must then stay within min(M, K - stage) micro-batches of A (and
// one gradient sent back).
TEST(Pipeline, OneFOneBPeakMemoryFollowsItsInFlightBound) {
  const int k = comm().size();
  auto peak_of = [&](PipelineSchedule s, int m) {
    manual_seed(12);  // small weights; on 2, 3 or 4 stages every stage holds [8, 2048] per micro-batch
    nn::Sequential model(nn::make<nn::Linear>(4, 2048), nn::make<nn::Tanh>(), nn::make<nn::Tanh>(),
                         nn::make<nn::Linear>(2048, 4));
    Pipeline pipe(model, even_boundaries(4, k), comm(), {.micro_batches = m, .schedule = s});
    Generator g(4);
    Tensor x = randn({8 * m, 4}, {}, &g), y = randn({8 * m, 4}, {}, &g);
    auto mse = [](const Tensor& out, const Tensor& t) { return nn::mse_loss(out, t); };
    pipe.train_step(x, y, mse);  // the allocator's cache and the gradients exist from here on
    pipe.train_step(x, y, mse);
    EXPECT_EQ(pipe.last_step().max_in_flight, pipeline_in_flight(s, k, pipe.stage(), m));
    return std::pair{static_cast<double>(pipe.last_step().peak_bytes), pipe.stage()};
  };
  const auto [g4, stage] = peak_of(PipelineSchedule::GPipe, 4);
  const double g8 = peak_of(PipelineSchedule::GPipe, 8).first;
  const double f8 = peak_of(PipelineSchedule::OneFOneB, 8).first;
  const double per_micro = (g8 - g4) / 4, rest = g4 - 4 * per_micro;
  EXPECT_GT(per_micro, 8 * 2048 * 4 * 0.9) << "stage " << stage << ": GPipe's peak should grow by a micro-batch's "
                                           << "[8, 2048] activation per micro-batch";
  // The schedule's bound, plus the one gradient a stage may have sent that its predecessor has not
  // taken yet (how long it waits depends on the other rank's timing).
  const int bound = pipeline_in_flight(PipelineSchedule::OneFOneB, k, stage, 8) + (stage > 0 ? 1 : 0);
  EXPECT_LE(f8, rest + (bound + 0.5) * per_micro)
      << "stage " << stage << ": 1F1B peak " << f8 << " bytes; GPipe " << g4 << " (M 4), " << g8 << " (M 8)";
  EXPECT_LT(f8, g8);
}

TEST(Pipeline, ForwardOnlyReturnsTheWholeModelsOutputOnTheLastStage) {
  auto model = mlp(13), ref = mlp(13);
  Pipeline pipe(*model, even_boundaries(7, comm().size()), comm(), {.micro_batches = 3});
  for (int64_t n : {7, 2, 0}) {  // fewer rows than micro-batches, and none
    Batch b = batch_of({n, 6}, 5, 5);
    Tensor out = pipe.forward(pipe.is_first() ? b.x : Tensor());
    if (!pipe.is_last()) {
      EXPECT_FALSE(out.defined());
      continue;
    }
    NoGradGuard g;
    Tensor want = ref->forward(b.x);
    ASSERT_EQ(out.shape(), want.shape());
    auto a = out.to_vector<double>(), w = want.to_vector<double>();
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], w[i], 1e-12);
  }
}

TEST(Pipeline, StageModuleKeepsTheWholeModelsNames) {
  auto model = mlp(14);
  Pipeline pipe(*model, even_boundaries(7, comm().size()), comm());
  const auto all = model->named_parameters();
  ASSERT_EQ(all.size(), 8u);
  for (auto& [n, t] : all) {  // every parameter is on exactly one stage, under its own name
    bool mine = false;
    for (auto& [m, u] : pipe.stage_module().named_parameters()) mine |= m == n && u.raw_data() == t.raw_data();
    int owners = 0;
    for (double v : dist_test::gather(mine ? 1.0 : 0.0)) owners += v != 0;
    EXPECT_EQ(owners, 1) << n;
  }
}

TEST(Pipeline, BadArgumentsAreErrors) {
  auto model = mlp(15);
  const int k = comm().size();
  EXPECT_TRUE(has(error_of([&] { Pipeline(*model, {}, comm()); }), "at least one stage"));
  EXPECT_TRUE(has(error_of([&] { Pipeline(*model, {1}, comm(), {.stage_ranks = {comm().rank()}}); }),
                  "the first stage must start at layer 0"));
  EXPECT_TRUE(has(error_of([&] {
                    Pipeline(*model, {0, 7}, comm(), {.stage_ranks = {0, 1}});
                  }),
                  "strictly increasing and below the model's 7 layers"));
  EXPECT_TRUE(has(error_of([&] { Pipeline(*model, {0, 3}, comm(), {.stage_ranks = {0, 0}}); }), "two stages"));
  EXPECT_TRUE(has(error_of([&] { Pipeline(*model, even_boundaries(7, k), comm(), {.micro_batches = 0}); }),
                  "at least one micro-batch"));
  EXPECT_TRUE(has(error_of([&] { Pipeline(*model, even_boundaries(7, k), comm(), {.autocast = DType::Float16}); }),
                  "float16 needs a loss scaler"));
  EXPECT_TRUE(has(error_of([&] { Pipeline(*model, even_boundaries(7, k), comm(), {.autocast = DType::Int32}); }),
                  "expected bfloat16 or float16"));
  if (k >= 2) {
    const int other = (comm().rank() + 1) % k;
    EXPECT_TRUE(
        has(error_of([&] { Pipeline(*model, {0}, comm(), {.stage_ranks = {other}}); }), "holds none of the 1 stages"));
  }
  // Checked before anything is sent, so every rank can be refused alone.
  Pipeline one(*model, {0}, comm(), {.micro_batches = 4, .stage_ranks = {comm().rank()}});
  EXPECT_TRUE(has(error_of([&] { one.train_step(Tensor(), Tensor(), loss_fn); }), "needs the batch's input"));
  Batch b = batch_of({8, 6}, 5, 1);
  EXPECT_TRUE(has(error_of([&] { one.train_step(b.x, b.y.narrow(0, 0, 5), loss_fn); }),
                  "expected a target with the batch's 8 rows"));
  EXPECT_TRUE(has(error_of([&] { one.train_step(b.x, b.y, {}); }), "needs a loss function"));
  EXPECT_TRUE(has(error_of([] { micro_batch_sizes(3, 4); }), "a batch of 3 rows cannot be split into 4"));
  EXPECT_EQ(micro_batch_sizes(10, 4), (std::vector<int64_t>{3, 3, 2, 2}));
}

// One stage is plain gradient accumulation over micro-batches.
TEST(Pipeline, OneStageIsGradientAccumulation) {
  auto model = mlp(16), ref = mlp(16);
  Pipeline one(*model, {0}, comm(), {.micro_batches = 3, .stage_ranks = {comm().rank()}});
  Batch b = batch_of({9, 6}, 5, 2);
  const double loss = one.train_step(b.x, b.y, loss_fn);
  Tensor l = loss_fn(ref->forward(b.x), b.y);
  l.backward();
  EXPECT_NEAR(loss, l.item(), 1e-12);
  auto pa = model->parameters(), pb = ref->parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    auto ga = pa[i].grad().to_vector<double>(), gb = pb[i].grad().to_vector<double>();
    for (size_t j = 0; j < ga.size(); ++j) EXPECT_NEAR(ga[j], gb[j], 1e-12);
  }
}

// Pipeline x data parallelism: every way of arranging this job's ranks as stages x replicas (2 x 2
// on four ranks) trains like one process on the global batch, each replica taking its rows.
TEST(PipelineGrid, StagesTimesReplicasTrainLikeOneProcess) {
  const int n = comm().size();
  for (int stages = 1; stages <= n; ++stages) {
    if (n % stages) continue;
    PipelineGrid grid = make_pipeline_grid(comm(), stages);
    ASSERT_EQ(grid.stages * grid.replicas, n);
    ASSERT_EQ(grid.stage_ranks.at(grid.stage), comm().rank()) << grid.describe();
    auto model = mlp(17), ref = mlp(17);
    Pipeline pipe(*model, even_boundaries(7, stages), comm(),
                  {.micro_batches = 3, .stage_ranks = grid.stage_ranks, .data_parallel = grid.replicas_comm.get()});
    optim::SGD opt(pipe.parameters(), {.lr = 0.1, .momentum = 0.9});
    optim::SGD ref_opt(ref->parameters(), {.lr = 0.1, .momentum = 0.9});
    const int64_t global = 12, rows = global / grid.replicas;
    for (int s = 0; s < 3; ++s) {
      Batch b = batch_of({global, 6}, 5, 70 + static_cast<uint64_t>(s));
      Tensor x = b.x.narrow(0, grid.replica * rows, rows), y = b.y.narrow(0, grid.replica * rows, rows);
      opt.zero_grad();
      pipe.train_step(x, y, loss_fn);
      opt.step();
      ref_opt.zero_grad();
      loss_fn(ref->forward(b.x), b.y).backward();
      ref_opt.step();
    }
    EXPECT_LT(stage_diff(pipe, *ref), 1e-10) << grid.describe();
  }
  EXPECT_TRUE(has(error_of([&] { make_pipeline_grid(comm(), n + 1); }), "stages do not divide"));
}

// A classifier's correct count, computed on the last stage per micro-batch, reaches every stage.
TEST(Pipeline, MetricsReachEveryStage) {
  auto model = mlp(18), ref = mlp(18);
  Pipeline pipe(*model, even_boundaries(7, comm().size()), comm(), {.micro_batches = 4});
  Batch b = batch_of({10, 6}, 5, 8);
  auto correct = [](const Tensor& out, const Tensor& y) {
    return std::vector<double>{static_cast<double>(sum(eq(argmax(out, 1), y)).item<int64_t>()),
                               static_cast<double>(y.numel())};
  };
  pipe.train_step(b.x, b.y, loss_fn, correct);
  NoGradGuard g;
  const double want = static_cast<double>(sum(eq(argmax(ref->forward(b.x), 1), b.y)).item<int64_t>());
  ASSERT_EQ(pipe.last_step().metrics.size(), 2u);
  EXPECT_EQ(pipe.last_step().metrics[0], want);
  EXPECT_EQ(pipe.last_step().metrics[1], 10.0);
}

// NCCL delivers a link's messages only in the order both ends post them, and a send waits for its
// receive (rendezvous_comm.h): the pipeline's order of messages must be one that both neighbours
// post without either waiting on the other first. Every schedule, on every rank count the suite
// runs with, and pipeline x data parallelism with the replicas' all-reduces under the same rules.
TEST(PipelineUnderNcclOrdering, EveryScheduleTrainsLikeOneProcess) {
  dist_test::RendezvousCommunicator ordered(comm());
  for (const PipeRun& r : every_run()) check_equivalence([] { return mlp(7); }, {12, 6}, 5, r, 0, ordered);
  check_equivalence([] { return cnn(10, true); }, {12, 1, 10, 10}, 3, {PipelineSchedule::OneFOneB, 3, true}, 3,
                    ordered);
}

TEST(PipelineUnderNcclOrdering, StagesTimesReplicas) {
  const int n = comm().size();
  for (int stages = 2; stages <= n; ++stages) {
    if (n % stages) continue;
    PipelineGrid grid = make_pipeline_grid(comm(), stages);
    dist_test::RendezvousCommunicator ordered(comm());
    std::unique_ptr<dist_test::RendezvousCommunicator> replicas;  // none for one replica
    if (grid.replicas_comm) replicas = std::make_unique<dist_test::RendezvousCommunicator>(*grid.replicas_comm);
    auto model = mlp(17), ref = mlp(17);
    Pipeline pipe(*model, even_boundaries(7, stages), ordered,
                  {.micro_batches = 4, .stage_ranks = grid.stage_ranks, .data_parallel = replicas.get()});
    optim::SGD opt(pipe.parameters(), {.lr = 0.1});
    optim::SGD ref_opt(ref->parameters(), {.lr = 0.1});
    const int64_t global = 16, rows = global / grid.replicas;
    for (int s = 0; s < 2; ++s) {
      Batch b = batch_of({global, 6}, 5, 80 + static_cast<uint64_t>(s));
      opt.zero_grad();
      pipe.train_step(b.x.narrow(0, grid.replica * rows, rows), b.y.narrow(0, grid.replica * rows, rows), loss_fn);
      opt.step();
      ref_opt.zero_grad();
      loss_fn(ref->forward(b.x), b.y).backward();
      ref_opt.step();
    }
    EXPECT_LT(stage_diff(pipe, *ref), 1e-10) << grid.describe();
  }
}

// The emulation is strict enough to fail: two ranks that both send before they receive (which MPI
// buffers and NCCL leaves hanging) are reported as a deadlock naming the transfer.
TEST(PipelineUnderNcclOrdering, CrossedSendsAreADeadlock) {
  if (comm().rank() < 2) {
    dist_test::RendezvousCommunicator ordered(comm(), std::chrono::milliseconds(300));
    const int peer = 1 - comm().rank();
    Tensor mine = full({4}, 1.0), theirs = empty({4});
    const std::string e = error_of([&] { ordered.send(mine, peer, 0); });
    EXPECT_TRUE(has(e, "deadlock under NCCL's ordering")) << e;
    EXPECT_TRUE(has(e, "send")) << e;
    // Both sends were left unmatched, each rank's acknowledgement still posted: match them, once
    // both ranks have given up (an acknowledgement sent earlier would let the other one succeed).
    Tensor gave_up = zeros({1}, {.dtype = DType::UInt8}), peer_gave_up = empty({1}, {.dtype = DType::UInt8});
    auto told = comm().send(gave_up, peer, 2950);
    comm().recv(peer_gave_up, peer, 2950)->wait();
    told->wait();
    comm().recv(theirs, peer, dist_test::RendezvousCommunicator::kDataTag)->wait();
    comm().send(zeros({1}, {.dtype = DType::UInt8}), peer, dist_test::RendezvousCommunicator::kAckTag)->wait();
    EXPECT_EQ(theirs.to_vector<float>(), std::vector<float>(4, 1.0f));
  }
  comm().barrier("crossed sends done")->wait();
}
