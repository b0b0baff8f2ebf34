// The smallest complete training loop in Ember: a two-layer perceptron learns to imitate a fixed
// random "teacher" network on synthetic data. Forward through ops, backward through autograd,
// and a plain SGD update written by hand under NoGradGuard. Prints the loss as it falls and exits
// with status 1 if it did not fall (so ctest can run it).
//   usage: demo_mlp [steps=300] [learning rate=0.1]   (--help: this)
#include <ember/ember.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

using namespace ember;

int main(int argc, char** argv) {
  // Whole-argument parses: "2x" or "nan" is refused, not read as 2 or trained into NaN.
  auto usage = [&](const char* why) {
    std::fprintf(stderr, "%s: %s\nusage: %s [steps > 0] [learning rate > 0]\n", argv[0], why, argv[0]);
    return 2;
  };
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::printf(
          "usage: %s [steps > 0, default 300] [learning rate > 0, default 0.1]\n\n"
          "Trains a two-layer perceptron to imitate a fixed random teacher network on synthetic data\n"
          "(forward through ops, backward through autograd, SGD by hand); exits with status 1 if the\n"
          "loss did not fall to half its first value.\n",
          argv[0]);
      return 0;
    }
  if (argc > 3) return usage("too many arguments");
  char* end = nullptr;
  const long steps_arg = argc > 1 ? std::strtol(argv[1], &end, 10) : 300;
  if (argc > 1 && (*argv[1] == '\0' || *end != '\0' || steps_arg <= 0 || steps_arg > 10000000))
    return usage("steps: expected a whole number in [1, 10000000]");
  const double lr = argc > 2 ? std::strtod(argv[2], &end) : 0.1;
  if (argc > 2 && (*argv[2] == '\0' || *end != '\0' || !std::isfinite(lr) || lr <= 0))
    return usage("learning rate: expected a finite number > 0");
  const int steps = static_cast<int>(steps_arg);
  manual_seed(0);
  const Device dev = Device::best();
  std::printf("demo_mlp: 2-layer MLP, MSE, SGD lr %g, %d steps on %s with %d threads\n", lr, steps, dev.str().c_str(),
              get_num_threads());

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

  double first = 0, last = 0;
  for (int step = 0; step < steps; ++step) {
    Tensor h = relu(matmul(x, w1) + b1);  // [n, hidden]; the bias broadcasts over rows
    Tensor pred = matmul(h, w2) + b2;     // [n, 1]
    Tensor err = pred - y;
    Tensor loss = mean(err * err);
    loss.backward();
    {
      NoGradGuard no_grad;
      for (Tensor& p : params) {
        p.sub_(p.grad(), lr);
        p.grad().zero_();
      }
    }
    last = loss.item();
    if (step == 0) first = last;
    if (step % std::max(1, steps / 10) == 0 || step == steps - 1) std::printf("step %5d  loss %.6f\n", step, last);
  }
  const bool fell = last < 0.5 * first;
  std::printf("loss %s from %.6f to %.6f\n", fell ? "fell" : "did NOT fall enough", first, last);
  return fell ? 0 : 1;
}
