// Rows: the batch norm kernels (core/nn_kernels.h; on CUDA core/cuda/batch_norm.cu) in training
// (Welford statistics and the running-statistics update, compared after the step) and in
// evaluation, with and without weight and bias, and the backward with every subset of gradients
// the op asks for: all three, the input's alone, the parameters' alone, the bias's without a
// weight. Over [N, C, S] inputs: a few values per channel, [N, C] (S = 1), a channel of a single
// value (evaluation only: training needs two), channels longer than a block of threads, and a
// mean of 1000 (where a sum of squares would cancel), in float32 and float64. The statistics the
// forward saves are checked through the gradients that read them. These rows took over tests/emu's
// batch norm checks.
#include <string>
#include <vector>

#include "op_table.h"

namespace ember::ops_test {
namespace {

struct Case {
  const char* name;
  int64_t N, C, S;
  double offset;  // added to the input: a large mean
};

constexpr double kMomentum = 0.2, kEps = 1e-5;

// Inputs: x, weight, bias, running_mean, running_var (the last two constants, updated in place).
OpRow bn_row(std::string name, DType dt, const Case& k, std::function<Tensor(const Inputs&)> f) {
  OpRow r{std::move(name),
          [dt, k](Generator& g) {
            const TensorOptions o{.dtype = dt};
            return Inputs{add(randn({k.N, k.C, k.S}, o, &g), k.offset), randn({k.C}, o, &g), randn({k.C}, o, &g),
                          randn({k.C}, o, &g), add(rand({k.C}, o, &g), 0.5)};
          },
          std::move(f), dt == DType::Float32 ? 2e-4 : 1e-10};
  r.gradcheck = false;  // op_rows_nn.cpp's batch norm rows check the derivatives
  r.strided = false;    // the op copies a strided input first
  r.constants = {3, 4};
  return r;
}

}  // namespace

void add_batch_norm_rows(std::vector<OpRow>& t) {
  const std::vector<Case> cases = {
      {"n4_c3_s5", 4, 3, 5, 0},
      {"n7_c5_s1", 7, 5, 1, 0},
      {"n1_c2_s1", 1, 2, 1, 0},
      {"n3_c2_s97", 3, 2, 97, 0},
      {"n5_c2_s3_mean1000", 5, 2, 3, 1000},
  };
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (const Case& k : cases) {
      for (bool training : {true, false}) {
        if (training && k.N * k.S < 2) continue;  // the op refuses: no variance to normalise by
        const std::string tag =
            std::string("batch_norm_") + dtype_name(dt) + "_" + k.name + (training ? "_train" : "_eval");
        // Weight, bias and running statistics; in training the updated statistics too (the mean
        // less the large mean's share, which would otherwise set the tolerance's scale).
        t.push_back(bn_row(tag, dt, k, [training, offset = k.offset](const Inputs& x) {
          Tensor rm = x[3], rv = x[4];
          const Tensor y = batch_norm(x[0], rm, rv, x[1], x[2], training, kMomentum, kEps);
          return training ? cat({y.reshape({-1}), sub(rm, kMomentum * offset), rv}, 0) : y;
        }));
        // No affine parameters (and, in training, no running statistics): the input's gradient.
        t.push_back(bn_row(tag + "_plain", dt, k, [training](const Inputs& x) {
          return training ? batch_norm(x[0], Tensor(), Tensor(), Tensor(), Tensor(), true, kMomentum, kEps)
                          : batch_norm(x[0], x[3], x[4], Tensor(), Tensor(), false, kMomentum, kEps);
        }));
        // The gradient subsets: the input's alone, the parameters' alone, input and bias without
        // a weight.
        t.push_back(bn_row(tag + "_gradient_subsets", dt, k, [training](const Inputs& x) {
          const Tensor rm = training ? Tensor() : x[3], rv = training ? Tensor() : x[4];
          auto bn = [&](const Tensor& in, const Tensor& w, const Tensor& b) {
            return batch_norm(in, rm, rv, w, b, training, kMomentum, kEps).reshape({-1});
          };
          return cat({bn(x[0], x[1].detach(), x[2].detach()), bn(x[0].detach(), x[1], x[2]), bn(x[0], Tensor(), x[2])},
                     0);
        }));
      }
    }
  }
}

}  // namespace ember::ops_test
