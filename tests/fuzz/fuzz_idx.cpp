// The IDX reader (MNIST's format, plain or gzipped) on arbitrary bytes.
#include "data/idx.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = fuzz::scratch_file(data, size, ".idx");
  fuzz::errors_only([&] { (void)ember::data::read_idx(path); });
  return 0;
}
