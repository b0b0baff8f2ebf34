// The libtorch side of bench/train_text: the same recurrent models, batches and optimizer as the
// Ember side, behind plain C++ types so that only train_text_torch.cpp includes libtorch.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "bench/workloads.h"

namespace ember::bench::torch_side {

using bench::BiLstmShape;
using bench::LstmClassifierShape;
using bench::LstmLmShape;

// A training step (forward, cross-entropy, backward, Adam) on fixed random data, built once.
std::function<void()> make_lstm_lm_step(const LstmLmShape& s, uint64_t seed);
std::function<void()> make_bilstm_step(const BiLstmShape& s, uint64_t seed);
std::function<void()> make_lstm_classifier_step(const LstmClassifierShape& s, uint64_t seed);
void set_threads(int n);
const char* version();

}  // namespace ember::bench::torch_side
