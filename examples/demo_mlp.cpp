// The smallest complete training loop in Ember: a two-layer perceptron learns to imitate a fixed
// random "teacher" network on synthetic data. Forward through ops, backward through autograd,
// and a plain SGD update written by hand under NoGradGuard. Prints the loss as it falls and exits
// with status 1 if it did not fall (so ctest can run it). --precision bf16 runs the forward under
// ember::autocast (docs/PRECISION.md); fp16 also scales the loss (optim::GradScaler), which steps
// through an optimizer: there the update is optim::SGD's, the same rule.
//   usage: demo_mlp [steps=300] [learning rate=0.1] [--tensorboard DIR] [--precision fp32|bf16|fp16]
#include <ember/ember.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "interop/summary_writer.h"

using namespace ember;

struct Args {
  int steps = 300;
  double lr = 0.1;
  std::string tensorboard;  // the loss curve as TensorBoard event files here; empty: none
  std::string precision = "fp32";
};

// Reads `steps` and `lr` (positional), --tensorboard DIR and --precision P. Returns the exit status to stop with
// (0 after --help, 2 for a usage error), or -1 to train.
int parse(int argc, char** argv, Args& a) {
  // Whole-argument parses: "2x" or "nan" is refused, not read as 2 or trained into NaN.
  auto usage = [&](const char* why) {
    std::fprintf(stderr,
                 "%s: %s\nusage: %s [steps > 0] [learning rate > 0] [--tensorboard DIR] [--precision fp32|bf16|fp16]\n",
                 argv[0], why, argv[0]);
    return 2;
  };
  std::vector<const char*> positional;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::printf(
          "usage: %s [steps > 0, default 300] [learning rate > 0, default 0.1] [--tensorboard DIR]\n"
          "       [--precision fp32|bf16|fp16, default fp32]\n\n"
          "Trains a two-layer perceptron to imitate a fixed random teacher network on synthetic data\n"
          "(forward through ops, backward through autograd, SGD by hand); exits with status 1 if the\n"
          "loss did not fall to half its first value. --tensorboard writes the loss curve for TensorBoard.\n"
          "--precision bf16/fp16 runs the forward in 16 bits under autocast (fp16 with loss scaling).\n",
          argv[0]);
      return 0;
    }
    if (std::strcmp(argv[i], "--tensorboard") == 0) {
      if (i + 1 == argc) return usage("--tensorboard needs a folder");
      a.tensorboard = argv[++i];
    } else if (std::strcmp(argv[i], "--precision") == 0) {
      if (i + 1 == argc) return usage("--precision needs fp32, bf16 or fp16");
      a.precision = argv[++i];
      if (a.precision != "fp32" && a.precision != "bf16" && a.precision != "fp16")
        return usage(("--precision: expected fp32, bf16 or fp16, got '" + a.precision + "'").c_str());
    } else {
      positional.push_back(argv[i]);
    }
  }
  if (positional.size() > 2) return usage("too many arguments");
  char* end = nullptr;
  const long steps = !positional.empty() ? std::strtol(positional[0], &end, 10) : 300;
  if (!positional.empty() && (*positional[0] == '\0' || *end != '\0' || steps <= 0 || steps > 10000000))
    return usage("steps: expected a whole number in [1, 10000000]");
  a.lr = positional.size() > 1 ? std::strtod(positional[1], &end) : 0.1;
  if (positional.size() > 1 && (*positional[1] == '\0' || *end != '\0' || !std::isfinite(a.lr) || a.lr <= 0))
    return usage("learning rate: expected a finite number > 0");
  a.steps = static_cast<int>(steps);
  return -1;
}

int main(int argc, char** argv) {
  Args a;
  if (const int status = parse(argc, argv, a); status >= 0) return status;
  const int steps = a.steps;
  const double lr = a.lr;
  std::optional<SummaryWriter> tb;
  if (!a.tensorboard.empty()) tb.emplace(a.tensorboard);
  manual_seed(0);
  const Device dev = Device::best();
  const int threads = get_num_threads();
  std::printf("demo_mlp: 2-layer MLP, MSE, SGD lr %g, %d steps on %s with %d thread%s, %s\n", lr, steps,
              dev.str().c_str(), threads, threads == 1 ? "" : "s", a.precision.c_str());

  // Data: x ~ N(0, 1); targets from a tanh teacher network that the student cannot see.
  const int64_t n = 512, in = 8, hidden = 32, teacher_hidden = 16;
  Tensor x = randn({n, in}).to(dev);
  Tensor y;
  {
    NoGradGuard no_grad;
    Tensor tw1 = randn({in, teacher_hidden}).to(dev) * (1.0 / std::sqrt(double(in)));
    Tensor tw2 = randn({teacher_hidden, 1}).to(dev) * (1.0 / std::sqrt(double(teacher_hidden)));
    y = matmul(tanh(matmul(x, tw1)), tw2);
  }

  // Student parameters: leaves that collect gradients.
  Tensor w1 = (randn({in, hidden}) * std::sqrt(2.0 / double(in))).to(dev).requires_grad_();
  Tensor b1 = zeros({hidden}).to(dev).requires_grad_();
  Tensor w2 = (randn({hidden, 1}) * std::sqrt(1.0 / double(hidden))).to(dev).requires_grad_();
  Tensor b2 = zeros({1}).to(dev).requires_grad_();
  std::vector<Tensor> params = {w1, b1, w2, b2};

  std::optional<DType> low;  // the autocast dtype; none in fp32
  if (a.precision != "fp32") low = a.precision == "bf16" ? DType::BFloat16 : DType::Float16;
  // fp16 only: the loss scaler and the optimizer it steps (skipping a step whose gradients overflowed).
  std::optional<optim::GradScaler> scaler;
  std::optional<optim::SGD> sgd;
  if (a.precision == "fp16") scaler.emplace(), sgd.emplace(params, optim::SGDOptions{.lr = lr});

  double first = 0, last = 0;
  DType matmul_dtype = DType::Float32;  // what the forward's products ran in, printed at the end
  for (int step = 0; step < steps; ++step) {
    Tensor loss;
    {
      std::optional<autocast> ac;  // matmul in 16 bits; the bias add, the error and the mean in float32
      if (low) ac.emplace(dev, *low);
      Tensor z = matmul(x, w1);
      matmul_dtype = z.dtype();
      Tensor h = relu(z + b1);           // [n, hidden]; the bias broadcasts over rows
      Tensor pred = matmul(h, w2) + b2;  // [n, 1]
      Tensor err = pred - y;
      loss = mean(err * err);
    }
    if (scaler) {
      scaler->scale(loss).backward();
      scaler->step(*sgd);
      scaler->update();
      sgd->zero_grad();
    } else {
      loss.backward();
      NoGradGuard no_grad;
      for (Tensor& p : params) {
        p.sub_(p.grad(), lr);
        p.grad().zero_();
      }
    }
    last = loss.item();
    if (step == 0) first = last;
    if (tb) tb->add_scalar("loss", last, step);
    if (step % std::max(1, steps / 10) == 0 || step == steps - 1) std::printf("step %5d  loss %.6f\n", step, last);
  }
  const bool fell = last < 0.5 * first;
  std::printf("loss %s from %.6f to %.6f (matrix products in %s)\n", fell ? "fell" : "did NOT fall enough", first, last,
              dtype_name(matmul_dtype));
  return fell ? 0 : 1;
}
