// Images in and out: decoding PNG, JPEG and BMP (through stb_image), bilinear resizing, and
// writing PNG files, including a grid of a batch of generated samples (what the GAN examples
// save after every epoch). Decoded images are uint8 [H, W, C] as files store them; the datasets
// hand models float32 [C, H, W] in [0, 1] (image_to_float).
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace ember::data {

// An image's size as its header declares it, without decoding it. PNG, JPEG and BMP only (by their
// signatures): stb_image's other formats are refused, not decoded (data/image.cpp says why).
// Throws ember::Error naming `name` when the file is none of the three or its header is broken.
struct ImageInfo {
  int width = 0, height = 0, channels = 0;
};
ImageInfo image_info(const std::string& bytes, const std::string& name);

// The most pixels decode_image accepts (2^28, e.g. 16384 x 16384): a few bytes of header can
// declare a picture of gigabytes, which would otherwise be allocated and decoded before anything
// could object.
inline constexpr int64_t kMaxImagePixels = int64_t{1} << 28;

// Decodes an image held in memory. `channels` is 1 (grey), 3 (RGB), 4 (RGBA) or 0 (as stored);
// stb converts between them. A file stb cannot decode is an ember::Error naming `name` and the
// decoder's reason, as is one whose header declares more than kMaxImagePixels.
Tensor decode_image(const std::string& bytes, int channels, const std::string& name);
// Reads and decodes the file at `path`.
Tensor read_image(const std::string& path, int channels = 0);

// uint8 [H, W, C] -> float32 [C, H, W] scaled to [0, 1].
Tensor image_to_float(const Tensor& hwc);
// Bilinear resize of float32 [C, H, W] to [C, height, width], sampling pixel centres as
// PyTorch's interpolate(mode="bilinear", align_corners=False) does (no anti-aliasing).
Tensor resize_bilinear(const Tensor& chw, int64_t height, int64_t width);
// The file at `path` as an image data set hands it out before its transform: decoded to
// `channels`, float32 [channels, height, width] in [0, 1], resized bilinearly (ImageFolder, and
// `ember predict` on the images of a model trained on one).
Tensor read_image_resized(const std::string& path, int channels, int64_t height, int64_t width);

// uint8 [H, W] or [H, W, C] (C = 1, 3 or 4) as the bytes of a PNG file; `what` names the image in
// errors.
std::string encode_png(const Tensor& hwc, const std::string& what);
// Writes encode_png(hwc) to `path`, atomically.
void write_png(const std::string& path, const Tensor& hwc);
// Tiles float images [N, C, H, W] (C = 1 or 3) into one uint8 [H', W', C] image, `nrow` images
// per row with `padding` pixels between them; values are mapped from [lo, hi] to [0, 255] and
// clamped.
Tensor make_grid(const Tensor& images, int64_t nrow, double lo = 0.0, double hi = 1.0, int64_t padding = 2);
// make_grid + write_png.
void save_image_grid(const Tensor& images, const std::string& path, int64_t nrow, double lo = 0.0, double hi = 1.0);

}  // namespace ember::data
