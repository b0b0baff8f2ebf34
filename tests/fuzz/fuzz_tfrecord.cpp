// TFRecord files (interop/tfrecord.h: the framing of TensorBoard event files, which a resumed run
// appends to) on arbitrary bytes. The records read back, framed again, are the file byte for byte
// up to where it ends or is cut off.
#include "fuzz_support.h"
#include "interop/tfrecord.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = fuzz::scratch_file(data, size, ".tfrecord");
  fuzz::errors_only([&] {
    const ember::tfrecord::ReadResult r = ember::tfrecord::read_records(path);
    std::string again;
    for (const std::string& rec : r.records) again += ember::tfrecord::frame(rec);
    const size_t end = r.truncated ? r.truncated_at : size;
    if (again.size() != end || again != std::string(reinterpret_cast<const char*>(data), end)) std::abort();
  });
  return 0;
}
