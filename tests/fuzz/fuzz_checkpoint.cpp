// Checkpoint loading (layers/checkpoint.h: the preamble, the Protobuf header, the tensor records
// and their checksums) on arbitrary bytes.
#include "fuzz_support.h"
#include "layers/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = fuzz::scratch_file(data, size, ".ckpt");
  fuzz::errors_only([&] { (void)ember::read_checkpoint(path); });
  return 0;
}
