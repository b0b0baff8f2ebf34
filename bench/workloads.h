// The training workloads that bench/step_rate (Ember) and bench/torch_ref (libtorch) time one at a
// time, each in a process of its own, and bench/compare_torch.sh alternates: plain C++ so that both
// sides include it (libtorch's headers never meet Ember's). The models, batches, optimizers and
// data are bench/train's and bench/train_text's.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace ember::bench {

struct Workload {
  const char* name;
  int samples_per_step;  // what a samples/s rate counts
  int steps_per_run;     // one timed run lasts about a second on a 2-core machine
};

inline constexpr std::array<Workload, 5> kWorkloads = {{
    {"mnist_cnn", 64, 40},  // MnistCnn, batch 64, Adam
    {"mlp_gan", 64, 100},   // MLP GAN, batch 64: one D step and one G step per iteration
    {"dcgan", 64, 3},       // DCGAN, batch 64, likewise
    {"lstm_lm", 32, 5},     // LSTM LM: vocabulary 10k, embedding 128, hidden 128, T 100, B 32
    {"bilstm", 32, 20},     // BiLSTM classifier: embedding 32 -> hidden 64 x 2, T 50, B 32, 4 classes
}};

// The recurrent models' shapes.
struct LstmLmShape {
  int64_t vocab = 10000, embed = 128, hidden = 128, seq = 100, batch = 32;
};
struct BiLstmShape {
  int64_t vocab = 100, embed = 32, hidden = 64, seq = 50, batch = 32, classes = 4;
};

inline const Workload* find_workload(const std::string& name) {
  for (const Workload& w : kWorkloads)
    if (name == w.name) return &w;
  return nullptr;
}

}  // namespace ember::bench
