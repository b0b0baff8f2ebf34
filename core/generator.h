// Random number generators. A Generator is (seed, offset): the offset counts 128-bit Philox
// blocks already consumed. A random op over n elements reserves blocks [offset, offset + k) and
// derives element i from its own block alone, so the numbers do not depend on thread count or
// device:
//   uniform (float32 or float64), bernoulli: element i uses block offset + i/2, words
//     2*(i%2), 2*(i%2)+1 (float32 uses the first of the two words); k = ceil(n/2).
//   normal: element i uses block offset + i, Box-Muller on words (0,1) (cosine branch); k = n.
//   randint: element i uses block offset + i/2 like uniform, as a 64-bit integer modulo range.
// The state (seed, offset) is two integers, so it fits in a checkpoint and restores exactly.
#pragma once

#include <cstdint>
#include <mutex>

namespace ember {

struct GeneratorState {
  uint64_t seed = 0;
  uint64_t offset = 0;
};

class Generator {
 public:
  explicit Generator(uint64_t seed = 67280421310721ULL) : state_{seed, 0} {}

  void manual_seed(uint64_t seed);
  uint64_t seed() const;
  GeneratorState state() const;
  void set_state(GeneratorState s);
  // Reserves `blocks` Philox blocks and returns the first one's index. Thread-safe.
  uint64_t reserve(uint64_t blocks);

 private:
  mutable std::mutex mu_;
  GeneratorState state_;
};

// The process-wide default generator (used when an op is given none).
Generator& default_generator();
// Seeds the default generator (and, through the CUDA backend, nothing else: one stream serves
// every device because the counter layout is device independent).
void manual_seed(uint64_t seed);

}  // namespace ember
