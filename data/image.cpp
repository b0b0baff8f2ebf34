#include "data/image.h"

#include <stb_image.h>
#include <stb_image_write.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/ops.h"

namespace ember::data {

namespace {

// The formats Ember decodes, by their signatures. stb_image reads more (PNM, TGA, PSD, HDR, PIC,
// GIF), but those paths of Debian's build crash on crafted files (fuzz_image found a 16-byte
// 16-bit PNM that makes it read far outside its buffer), and datasets come as PNG, JPEG or BMP: the
// others never reach stb.
const char* format_of(const std::string& b) {
  if (b.size() >= 8 && b.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0) return "PNG";
  if (b.size() >= 3 && static_cast<unsigned char>(b[0]) == 0xFF && static_cast<unsigned char>(b[1]) == 0xD8 &&
      static_cast<unsigned char>(b[2]) == 0xFF)
    return "JPEG";
  if (b.size() >= 2 && b[0] == 'B' && b[1] == 'M') return "BMP";
  return nullptr;
}

}  // namespace

ImageInfo image_info(const std::string& bytes, const std::string& name) {
  EMBER_CHECK(!bytes.empty(), "image '", name, "' is empty");
  EMBER_CHECK(bytes.size() <= static_cast<size_t>(INT32_MAX), "image '", name, "' is too large (", bytes.size(),
              " bytes)");
  EMBER_CHECK(format_of(bytes), "image '", name,
              "' cannot be decoded: it is not a PNG, JPEG or BMP file (its first bytes are none of their signatures)");
  ImageInfo info;
  if (!stbi_info_from_memory(reinterpret_cast<const stbi_uc*>(bytes.data()), static_cast<int>(bytes.size()),
                             &info.width, &info.height, &info.channels)) {
    const char* why = stbi_failure_reason();
    throw Error("image '" + name + "' cannot be decoded as " + format_of(bytes) + " (" +
                (why ? why : "unknown reason") + ")");
  }
  // stb reports a top-down BMP's height as negative (its header's sign says the row order); the
  // decoder makes it positive, and so must the size the limits check.
  if (info.height < 0 && info.height != INT32_MIN) info.height = -info.height;
  EMBER_CHECK(info.width > 0 && info.height > 0, "image '", name, "' declares a size of ", info.width, "x", info.height,
              " pixels (expected positive sizes)");
  return info;
}

Tensor decode_image(const std::string& bytes, int channels, const std::string& name) {
  EMBER_CHECK(channels == 0 || channels == 1 || channels == 3 || channels == 4,
              "decode_image: channels must be 0, 1, 3 or 4, got ", channels);
  EMBER_CHECK(!bytes.empty(), "image '", name, "' is empty");
  EMBER_CHECK(bytes.size() <= static_cast<size_t>(INT32_MAX), "image '", name, "' is too large (", bytes.size(),
              " bytes)");
  const ImageInfo info = image_info(bytes, name);
  EMBER_CHECK(int64_t{info.width} * info.height <= kMaxImagePixels, "image '", name, "' declares ", info.width, "x",
              info.height, " pixels, more than the ", kMaxImagePixels, " an image may have (kMaxImagePixels)");
  int w = 0, h = 0, in_file = 0;
  unsigned char* px = stbi_load_from_memory(reinterpret_cast<const stbi_uc*>(bytes.data()),
                                            static_cast<int>(bytes.size()), &w, &h, &in_file, channels);
  if (!px) {
    const char* why = stbi_failure_reason();
    throw Error("image '" + name + "' cannot be decoded as PNG, JPEG or BMP (" + (why ? why : "unknown reason") + ")");
  }
  if (w != info.width || h != info.height) {
    // The decoder went by other sizes than the header check saw: never hand that on.
    stbi_image_free(px);
    EMBER_FAIL("image '", name, "' decodes to ", w, "x", h, " pixels but its header declares ", info.width, "x",
               info.height);
  }
  const int c = channels ? channels : in_file;
  Tensor out = empty({h, w, c}, {DType::UInt8, Device::cpu()});
  std::memcpy(out.raw_data(), px, static_cast<size_t>(h) * w * c);
  stbi_image_free(px);
  return out;
}

Tensor read_image(const std::string& path, int channels) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  EMBER_CHECK(f, "image '", path, "' cannot be opened: ", std::strerror(errno));
  std::string bytes;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) bytes.append(buf, n);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  EMBER_CHECK(!failed, "image '", path, "' cannot be read");
  return decode_image(bytes, channels, path);
}

Tensor image_to_float(const Tensor& hwc) {
  EMBER_CHECK(hwc.dtype() == DType::UInt8 && hwc.dim() == 3, "image_to_float: expected uint8 [H, W, C], got ",
              dtype_name(hwc.dtype()), " ", shape_str(hwc.shape()));
  Tensor src = hwc.cpu().contiguous();
  const int64_t h = src.size(0), w = src.size(1), c = src.size(2);
  Tensor out = empty({c, h, w}, {DType::Float32, Device::cpu()});
  const uint8_t* s = src.data_ptr<uint8_t>();
  float* d = out.data_ptr<float>();
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
      for (int64_t k = 0; k < c; ++k) d[(k * h + y) * w + x] = static_cast<float>(s[(y * w + x) * c + k]) / 255.0f;
  return out;
}

Tensor read_image_resized(const std::string& path, int channels, int64_t height, int64_t width) {
  return resize_bilinear(image_to_float(read_image(path, channels)), height, width);
}

Tensor resize_bilinear(const Tensor& chw, int64_t height, int64_t width) {
  EMBER_CHECK(chw.dtype() == DType::Float32 && chw.dim() == 3, "resize_bilinear: expected float32 [C, H, W], got ",
              dtype_name(chw.dtype()), " ", shape_str(chw.shape()));
  EMBER_CHECK(height > 0 && width > 0, "resize_bilinear: target size must be positive, got ", height, "x", width);
  Tensor src = chw.cpu().contiguous();
  const int64_t c = src.size(0), h = src.size(1), w = src.size(2);
  EMBER_CHECK(h > 0 && w > 0, "resize_bilinear: empty source image ", shape_str(src.shape()));
  if (h == height && w == width) return src;
  // Source coordinate of each destination row/column (pixel centres), its two neighbours and weight.
  auto axis = [](int64_t in, int64_t out, std::vector<int64_t>& i0, std::vector<int64_t>& i1, std::vector<float>& t) {
    const double scale = static_cast<double>(in) / static_cast<double>(out);
    for (int64_t o = 0; o < out; ++o) {
      double s = std::max(0.0, (static_cast<double>(o) + 0.5) * scale - 0.5);
      int64_t a = std::min(static_cast<int64_t>(s), in - 1);
      i0.push_back(a);
      i1.push_back(std::min(a + 1, in - 1));
      t.push_back(static_cast<float>(s - static_cast<double>(a)));
    }
  };
  std::vector<int64_t> y0, y1, x0, x1;
  std::vector<float> ty, tx;
  axis(h, height, y0, y1, ty);
  axis(w, width, x0, x1, tx);
  Tensor out = empty({c, height, width}, {DType::Float32, Device::cpu()});
  const float* s = src.data_ptr<float>();
  float* d = out.data_ptr<float>();
  for (int64_t k = 0; k < c; ++k) {
    const float* plane = s + k * h * w;
    for (int64_t y = 0; y < height; ++y) {
      const float* r0 = plane + y0[y] * w;
      const float* r1 = plane + y1[y] * w;
      for (int64_t x = 0; x < width; ++x) {
        float top = r0[x0[x]] + (r0[x1[x]] - r0[x0[x]]) * tx[x];
        float bot = r1[x0[x]] + (r1[x1[x]] - r1[x0[x]]) * tx[x];
        *d++ = top + (bot - top) * ty[y];
      }
    }
  }
  return out;
}

std::string encode_png(const Tensor& hwc, const std::string& what) {
  EMBER_CHECK(hwc.dtype() == DType::UInt8 && (hwc.dim() == 2 || hwc.dim() == 3), what,
              ": expected uint8 [H, W] or [H, W, C], got ", dtype_name(hwc.dtype()), " ", shape_str(hwc.shape()));
  Tensor img = hwc.cpu().contiguous();
  const int64_t h = img.size(0), w = img.size(1), c = img.dim() == 3 ? img.size(2) : 1;
  EMBER_CHECK(c == 1 || c == 3 || c == 4, what, ": expected 1, 3 or 4 channels, got ", c);
  EMBER_CHECK(h > 0 && w > 0 && h < (1 << 24) && w < (1 << 24), what, ": bad image size ", h, "x", w);
  std::string png;
  auto sink = [](void* ctx, void* data, int size) {
    static_cast<std::string*>(ctx)->append(static_cast<char*>(data), size);
  };
  int ok = stbi_write_png_to_func(sink, &png, static_cast<int>(w), static_cast<int>(h), static_cast<int>(c),
                                  img.raw_data(), static_cast<int>(w * c));
  EMBER_CHECK(ok && !png.empty(), what, ": the PNG encoder failed");
  return png;
}

void write_png(const std::string& path, const Tensor& hwc) {
  const std::string png = encode_png(hwc, "write_png('" + path + "')");
  write_file_atomic(path, [&](std::FILE* f) { write_all(f, png.data(), png.size(), path); });
}

Tensor make_grid(const Tensor& images, int64_t nrow, double lo, double hi, int64_t padding) {
  EMBER_CHECK(images.dim() == 4 && (images.size(1) == 1 || images.size(1) == 3) && images.size(0) > 0,
              "make_grid: expected images [N, C, H, W] with N >= 1 and C = 1 or 3, got ", shape_str(images.shape()));
  EMBER_CHECK(nrow > 0 && padding >= 0 && hi > lo, "make_grid: need nrow > 0, padding >= 0 and hi > lo, got nrow ",
              nrow, ", padding ", padding, ", range [", lo, ", ", hi, "]");
  Tensor src = images.detach().cpu().to(DType::Float32).contiguous();
  const int64_t n = src.size(0), c = src.size(1), h = src.size(2), w = src.size(3);
  const int64_t cols = std::min(nrow, n), rows = (n + cols - 1) / cols;
  const int64_t gh = rows * h + (rows + 1) * padding, gw = cols * w + (cols + 1) * padding;
  Tensor grid = zeros({gh, gw, c}, {DType::UInt8, Device::cpu()});
  const float* s = src.data_ptr<float>();
  uint8_t* g = grid.data_ptr<uint8_t>();
  const double scale = 255.0 / (hi - lo);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t oy = padding + (i / cols) * (h + padding), ox = padding + (i % cols) * (w + padding);
    for (int64_t k = 0; k < c; ++k)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x) {
          double v = (static_cast<double>(s[((i * c + k) * h + y) * w + x]) - lo) * scale;
          v = std::isfinite(v) ? std::clamp(v, 0.0, 255.0) : 0.0;
          g[((oy + y) * gw + ox + x) * c + k] = static_cast<uint8_t>(std::lround(v));
        }
  }
  return grid;
}

void save_image_grid(const Tensor& images, const std::string& path, int64_t nrow, double lo, double hi) {
  write_png(path, make_grid(images, nrow, lo, hi));
}

}  // namespace ember::data
