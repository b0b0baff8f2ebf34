// The thread-sanitised pass's own check: two threads fill one tensor at once, a data race inside
// Ember's CPU kernels. ThreadSanitizer must report it (ctest expects its report), which proves the
// libraries are instrumented and the pass's options (TSAN_OPTIONS in scripts/test.sh) hide
// nothing of Ember's own code. ctest runs it with one OpenMP thread, so that nothing but the two
// threads' start and join orders their writes. A pass that reported nothing here would be
// passing every other test without looking.
#include <thread>

#include "core/ops.h"

int main() {
  ember::Tensor t = ember::zeros({1 << 16});
  std::thread a([&] { t.fill_(1.0); });
  std::thread b([&] { t.fill_(2.0); });
  a.join();
  b.join();
  return 0;
}
