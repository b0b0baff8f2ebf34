// Writes the event files the TensorBoard check reads (tests/interop/tensorboard_check.py): known
// scalars (also through add_scalars), an image, a histogram and a text, in DIR.
// Usage: tensorboard_cases DIR
#include <cmath>
#include <iostream>

#include "core/ops.h"
#include "interop/summary_writer.h"

using namespace ember;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: tensorboard_cases DIR\n";
    return 2;
  }
  try {
    SummaryWriter w(argv[1]);
    for (int64_t step = 0; step < 20; ++step) {
      w.add_scalar("train/loss", 2.0 / (1.0 + static_cast<double>(step)), step, 1000.0 + static_cast<double>(step));
      w.add_scalars("lr", {{"g", 1e-3 * static_cast<double>(step)}, {"d", 2e-3}}, step);
    }
    // A 3-channel 5x7 image: channel k holds k/2, so its pixels are 0, 128 and 255.
    Tensor img = zeros({3, 5, 7});
    for (int64_t k = 0; k < 3; ++k) img.select(0, k).fill_(static_cast<double>(k) / 2);
    w.add_image("samples", img, 3);
    w.add_image("grey", full({9, 4}, 200.0, {.dtype = DType::UInt8}), 4);
    // 1000 values: 0.5 a hundred times, -3 and 7 once each, the rest 0.001 .. 0.897.
    std::vector<double> v;
    for (int i = 0; i < 897; ++i) v.push_back(0.001 * (i + 1));
    for (int i = 0; i < 100; ++i) v.push_back(0.5);
    v.push_back(-3), v.push_back(7), v.push_back(std::nan(""));
    w.add_histogram("weights/fc", from_vector(v, {static_cast<int64_t>(v.size())}), 5);
    w.add_text("notes", "**Ember** run, seed 1", 6);
    w.close();
    std::cout << "tensorboard_cases: wrote " << w.file() << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "tensorboard_cases: " << e.what() << "\n";
    return 1;
  }
}
