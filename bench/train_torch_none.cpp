// bench/train without libtorch: no reference column (see train_torch.h).
#include "bench/train_torch.h"

namespace ember::bench {

bool torch_available() {
  return false;
}
std::function<void()> torch_train_step(const std::string&, int, int) {
  return {};
}

}  // namespace ember::bench
