// Writes MNIST-format examples as PNG files in class folders, for the `ember eval` / `ember
// predict` / fine-tuning tests (eval_predict.sh, fine_tune.sh): the first N examples of a split
// whose labels are among CLASSES, as OUT/<label>/<index>.png, from the folder the examples train
// on (data/mnist, else Debian's Fashion-MNIST). Usage: mnist_pngs OUT N train|test [CLASSES]
// (CLASSES: comma-separated labels; default all).
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>

#include "common/training.h"
#include "data/image.h"
#include "data/mnist.h"

using namespace ember;

int main(int argc, char** argv) {
  if (argc < 4 || argc > 5 || (std::string(argv[3]) != "train" && std::string(argv[3]) != "test")) {
    std::fprintf(stderr, "usage: mnist_pngs OUT N train|test [CLASSES]\n");
    return 2;
  }
  const std::filesystem::path out = argv[1];
  const long n = std::stol(argv[2]);
  std::set<long> classes;
  for (std::string s = argc == 5 ? argv[4] : ""; !s.empty();) {
    const size_t comma = s.find(',');
    classes.insert(std::stol(s.substr(0, comma)));
    s = comma == std::string::npos ? "" : s.substr(comma + 1);
  }
  try {
    const auto [root, name] = examples::find_mnist_data(examples::kDefaultMnistDir, false);
    const data::MNIST set(root, std::string(argv[3]) == "train" ? data::Split::Train : data::Split::Test);
    long written = 0;
    for (int64_t i = 0; i < set.size() && written < n; ++i) {
      const long label = set.labels()[i].item<int64_t>();
      if (!classes.empty() && !classes.count(label)) continue;
      std::filesystem::create_directories(out / std::to_string(label));
      data::write_png((out / std::to_string(label) / (std::to_string(i) + ".png")).string(),
                      set.images().select(0, i).contiguous());
      ++written;
    }
    std::printf("%ld %s images in %s\n", written, name.c_str(), out.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mnist_pngs: %s\n", e.what());
    return 1;
  }
  return 0;
}
