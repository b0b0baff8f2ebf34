// The training workloads that bench/step_rate (Ember) and bench/torch_ref (libtorch) time one at a
// time, each in a process of its own, and bench/compare_torch.sh alternates: plain C++ so that both
// sides include it (libtorch's headers never meet Ember's). The models, batches, optimizers and
// data are bench/train's and bench/train_text's.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace ember::bench {

// GFLOP per training step: 2 FLOP per multiply-add of the convolutions, linear layers and LSTM
// gates, forward x 3 for forward and backward (the input and weight gradients each cost about a
// forward); elementwise work, pooling, norms and the optimizer are left out. This is the convention
// of issue 17's figures (16.8 MFLOP per MnistCnn image, 31.8 GFLOP per DCGAN iteration); it counts
// the input gradients of layers fed by data, which autograd skips, so a fraction of the SGEMM rate
// computed from it is an upper bound. Per sample:
// - MnistCnn: conv 1->32 3x3 (26x26 out) 0.195M + conv 32->64 (11x11) 2.230M + conv 64->64 (3x3)
//   0.332M + linear 576->64 and 64->10 0.037M = 2.794M multiply-adds: 16.8 MFLOP trained.
// - A GAN iteration runs the generator forward once and back once (3 forwards' worth) and the
//   discriminator forward three times (real, fake, fake again for G's step) and back three times
//   (9 forwards' worth). MLP GAN: G 100->256->784 0.226M, D 784->256->1 0.201M multiply-adds:
//   3 x 0.226M + 9 x 0.201M = 2.488M, x 2 x 64 = 0.318 GFLOP. DCGAN: G linear 100->7x7x256
//   1.254M, deconv 256->128 5x5 at 7x7 40.14M, 128->64 5x5 stride 2 10.04M, 64->1 0.314M;
//   D conv 1->64 5x5 stride 2 0.314M, 64->128 10.04M, linear 6272->1: 51.75M and 10.36M, so
//   3 x 51.75M + 9 x 10.36M = 248.5M, x 2 x 64 = 31.8 GFLOP.
// - LSTM LM: per token 4H(E+H) = 0.131M for the gates and 128 x 10,000 = 1.28M for the output
//   layer, 3,200 tokens: 4.515G multiply-adds forward, 27.1 GFLOP trained.
// - LSTM classifier: the LSTM LM's gates (0.131M per token, 3,200 tokens: 419.4M) and the output
//   layer on the last step only (1.28M x 32 sequences: 41.0M): 460.4M forward, 2.76 GFLOP trained.
// - BiLSTM: per token and direction 4 x 64 x (32 + 64) = 24,576, two directions, 1,600 tokens:
//   78.6M multiply-adds forward (the 128->4 classifier is negligible), 0.472 GFLOP trained.
struct Workload {
  const char* name;
  int samples_per_step;   // what a samples/s rate counts
  int steps_per_run;      // one timed run lasts about a second on a 2-core machine
  double gflop_per_step;  // see above
};

inline constexpr std::array<Workload, 6> kWorkloads = {{
    {"mnist_cnn", 64, 40, 64 * 0.0168},  // MnistCnn, batch 64, Adam
    {"mlp_gan", 64, 100, 0.318},         // MLP GAN, batch 64: one D step and one G step per iteration
    {"dcgan", 64, 3, 31.8},              // DCGAN, batch 64, likewise
    {"lstm_lm", 32, 5, 27.1},            // LSTM LM: vocabulary 10k, embedding 128, hidden 128, T 100, B 32
    {"lstm_classifier", 32, 20, 2.76},   // the same LSTM, dense 128 -> 10k on the last step only
    {"bilstm", 32, 20, 0.472},           // BiLSTM classifier: embedding 32 -> hidden 64 x 2, T 50, B 32, 4 classes
}};

// The recurrent models' shapes.
struct LstmLmShape {
  int64_t vocab = 10000, embed = 128, hidden = 128, seq = 100, batch = 32;
};
struct LstmClassifierShape {  // the issue-17 workload: a classifier over 10k classes from the last step
  int64_t vocab = 10000, embed = 128, hidden = 128, seq = 100, batch = 32;
};
struct BiLstmShape {
  int64_t vocab = 100, embed = 32, hidden = 64, seq = 50, batch = 32, classes = 4;
};

// The batch of the data the last step builder made, set by the builder from the tensor itself, so
// that bench/step_rate_main.h can check that a side built the batch it was asked for (a builder
// handed the workload's default instead once went unnoticed).
inline int& built_batch() {
  static int batch = 0;
  return batch;
}

inline const Workload* find_workload(const std::string& name) {
  for (const Workload& w : kWorkloads)
    if (name == w.name) return &w;
  return nullptr;
}

}  // namespace ember::bench
