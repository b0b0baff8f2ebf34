// Image decoding (stb_image: PNG, JPEG, BMP and the rest it knows) on arbitrary bytes. The first
// byte picks the channels asked for, so that stb's conversions run too; a decoded image goes
// through the datasets' conversion to float.
#include "data/image.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static const int kChannels[4] = {0, 1, 3, 4};
  const int channels = kChannels[data[0] % 4];
  const std::string bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  fuzz::errors_only([&] {
    // Decoding costs time in proportion to the pixels the header declares, not to the input: a
    // 30-byte BMP or a 2 KB PNG of one colour can declare 2^28 pixels (kMaxImagePixels, refused
    // above that), which stb fills in minutes under the sanitizers, past libFuzzer's timeout. So
    // an image above 2^20 pixels is decoded only while it holds at least one input byte per 1024
    // pixels (about what zlib's best ratio allows a PNG): that keeps each input's decode to under
    // a second or so and still reaches the large-image paths (a 256 KB input reaches the limit). Images
    // of 2^20 to 2^28 pixels are also decoded whole by tests/data/image_test.cpp.
    const ember::data::ImageInfo info = ember::data::image_info(bytes, "fuzz input");
    const int64_t pixels = int64_t{info.width} * info.height;
    if (pixels > (int64_t{1} << 20) && pixels > 1024 * static_cast<int64_t>(bytes.size())) return;
    ember::Tensor img = ember::data::decode_image(bytes, channels, "fuzz input");
    (void)ember::data::image_to_float(img);
  });
  return 0;
}
