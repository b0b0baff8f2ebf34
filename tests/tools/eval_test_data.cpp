// Test data for the `ember eval` / `ember predict` / fine-tuning tests (tests/tools/*.sh):
//   eval_test_data pngs OUT N train|test [CLASSES]: the first N examples of an MNIST-format split
//     whose labels are among CLASSES (comma-separated; default all), as OUT/<label>/<index>.png,
//     from the folder the examples train on (data/mnist, else Debian's Fashion-MNIST);
//   eval_test_data old-checkpoint IN OUT: IN's model weights alone, as ember::save wrote a model
//     before checkpoints recorded the model, its classes and its normalisation.
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>

#include "data/image.h"
#include "data/mnist.h"
#include "layers/checkpoint.h"
#include "train/training.h"

using namespace ember;

namespace {

int pngs(const std::filesystem::path& out, long n, const std::string& split, const std::string& wanted) {
  std::set<long> classes;
  for (std::string s = wanted; !s.empty();) {
    const size_t comma = s.find(',');
    classes.insert(std::stol(s.substr(0, comma)));
    s = comma == std::string::npos ? "" : s.substr(comma + 1);
  }
  const auto [root, name] = train::find_mnist_data(train::kDefaultMnistDir, false);
  const data::MNIST set(root, split == "train" ? data::Split::Train : data::Split::Test);
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
  return 0;
}

int old_checkpoint(const std::string& in, const std::string& out) {
  const CheckpointContents c = read_checkpoint(in);
  CheckpointContents old;
  old.model_parameters = c.model_parameters;
  old.model_buffers = c.model_buffers;
  write_checkpoint(out, old);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "";
  try {
    if (what == "pngs" && (argc == 5 || argc == 6) &&
        (std::string(argv[4]) == "train" || std::string(argv[4]) == "test"))
      return pngs(argv[2], std::stol(argv[3]), argv[4], argc == 6 ? argv[5] : "");
    if (what == "old-checkpoint" && argc == 4) return old_checkpoint(argv[2], argv[3]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "eval_test_data: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr,
               "usage: eval_test_data pngs OUT N train|test [CLASSES]\n       eval_test_data old-checkpoint IN OUT\n");
  return 2;
}
