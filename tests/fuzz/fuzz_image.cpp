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
    // Pictures of more than a million pixels are legitimate but take stb seconds to decode under
    // the sanitizers (a few header bytes can declare them): only their refusal above
    // kMaxImagePixels is fuzzed, not their decoding.
    const ember::data::ImageInfo info = ember::data::image_info(bytes, "fuzz input");
    const int64_t pixels = int64_t{info.width} * info.height;
    if (pixels > (1 << 20) && pixels <= ember::data::kMaxImagePixels) return;
    ember::Tensor img = ember::data::decode_image(bytes, channels, "fuzz input");
    (void)ember::data::image_to_float(img);
  });
  return 0;
}
