#include "data/transforms.h"

#include <cmath>
#include <numbers>
#include <string>

#include "core/error.h"
#include "core/ops.h"
#include "core/philox.h"
#include "data/image.h"

namespace ember::data::transforms {

namespace {

Tensor check_chw(const Tensor& x, const char* who) {
  EMBER_CHECK(x.defined() && x.dtype() == DType::Float32 && x.dim() == 3, who,
              ": expected a float32 image [C, H, W], got ", x.defined() ? dtype_name(x.dtype()) : "undefined", " ",
              x.defined() ? shape_str(x.shape()) : "");
  return x.detach().cpu().contiguous();
}

}  // namespace

double uniform01(Generator& gen) {
  const uint64_t block = gen.reserve(1);
  Philox4x32 r = philox_block(gen.seed(), block);
  return uints_to_unit_double(r.v[0], r.v[1]);
}

Transform compose(std::vector<Transform> ts) {
  for (size_t i = 0; i < ts.size(); ++i)
    EMBER_CHECK(ts[i] != nullptr, "transforms::compose: transform ", i, " is empty");
  return [ts = std::move(ts)](const Tensor& x, Generator& g) {
    Tensor y = x;
    for (const auto& t : ts) y = t(y, g);
    return y;
  };
}

Transform to_tensor() {
  return [](const Tensor& x, Generator&) {
    if (x.dtype() == DType::Float32 && x.dim() == 3) return x;
    EMBER_CHECK(x.dtype() == DType::UInt8 && (x.dim() == 2 || x.dim() == 3),
                "transforms::to_tensor: expected uint8 [H, W] or [H, W, C], or float32 [C, H, W], got ",
                dtype_name(x.dtype()), " ", shape_str(x.shape()));
    return image_to_float(x.dim() == 2 ? x.unsqueeze(2) : x);
  };
}

Transform normalize(std::vector<double> mean, std::vector<double> stdev) {
  EMBER_CHECK(!mean.empty() && mean.size() == stdev.size(), "transforms::normalize: need as many means as stds (",
              mean.size(), " vs ", stdev.size(), "), at least one");
  for (double s : stdev) EMBER_CHECK(s > 0 && std::isfinite(s), "transforms::normalize: std must be positive, got ", s);
  return [mean = std::move(mean), stdev = std::move(stdev)](const Tensor& in, Generator&) {
    Tensor x = check_chw(in, "transforms::normalize");
    const int64_t c = x.size(0), plane = x.size(1) * x.size(2);
    EMBER_CHECK(mean.size() == 1 || static_cast<int64_t>(mean.size()) == c, "transforms::normalize: ", mean.size(),
                " means for an image with ", c, " channels");
    Tensor out = empty(x.shape(), {DType::Float32, Device::cpu()});
    const float* s = x.data_ptr<float>();
    float* d = out.data_ptr<float>();
    for (int64_t k = 0; k < c; ++k) {
      const size_t j = mean.size() == 1 ? 0 : static_cast<size_t>(k);
      const float m = static_cast<float>(mean[j]), inv = static_cast<float>(1.0 / stdev[j]);
      for (int64_t i = 0; i < plane; ++i) d[k * plane + i] = (s[k * plane + i] - m) * inv;
    }
    return out;
  };
}

Transform random_crop(int64_t height, int64_t width, int64_t padding, double fill) {
  EMBER_CHECK(height > 0 && width > 0 && padding >= 0,
              "transforms::random_crop: need a positive size and padding >= 0, got ", height, "x", width, " padding ",
              padding);
  return [=](const Tensor& in, Generator& g) {
    Tensor x = check_chw(in, "transforms::random_crop");
    const int64_t c = x.size(0), h = x.size(1), w = x.size(2), ph = h + 2 * padding, pw = w + 2 * padding;
    EMBER_CHECK(height <= ph && width <= pw, "transforms::random_crop: crop ", height, "x", width,
                " is larger than the padded image ", ph, "x", pw);
    const int64_t top =
        std::min(static_cast<int64_t>(uniform01(g) * static_cast<double>(ph - height + 1)), ph - height);
    const int64_t left = std::min(static_cast<int64_t>(uniform01(g) * static_cast<double>(pw - width + 1)), pw - width);
    Tensor out = empty({c, height, width}, {DType::Float32, Device::cpu()});
    const float* s = x.data_ptr<float>();
    float* d = out.data_ptr<float>();
    for (int64_t k = 0; k < c; ++k)
      for (int64_t y = 0; y < height; ++y)
        for (int64_t xx = 0; xx < width; ++xx) {
          const int64_t sy = y + top - padding, sx = xx + left - padding;
          *d++ = (sy >= 0 && sy < h && sx >= 0 && sx < w) ? s[(k * h + sy) * w + sx] : static_cast<float>(fill);
        }
    return out;
  };
}

Transform random_horizontal_flip(double p) {
  EMBER_CHECK(p >= 0 && p <= 1, "transforms::random_horizontal_flip: p must be in [0, 1], got ", p);
  return [p](const Tensor& in, Generator& g) {
    Tensor x = check_chw(in, "transforms::random_horizontal_flip");
    if (uniform01(g) >= p) return x;
    const int64_t rows = x.size(0) * x.size(1), w = x.size(2);
    Tensor out = empty(x.shape(), {DType::Float32, Device::cpu()});
    const float* s = x.data_ptr<float>();
    float* d = out.data_ptr<float>();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < w; ++i) d[r * w + i] = s[r * w + (w - 1 - i)];
    return out;
  };
}

Transform random_affine(double degrees, double translate, double fill) {
  EMBER_CHECK(degrees >= 0 && degrees <= 180 && translate >= 0 && translate <= 1,
              "transforms::random_affine: need degrees in [0, 180] and translate in [0, 1], got ", degrees, " and ",
              translate);
  return [=](const Tensor& in, Generator& g) {
    check_chw(in, "transforms::random_affine");
    // Draw all three numbers every time so that the stream layout does not depend on the values.
    const double angle = (2 * uniform01(g) - 1) * degrees;
    const double tx = std::round((2 * uniform01(g) - 1) * translate * static_cast<double>(in.size(2)));
    const double ty = std::round((2 * uniform01(g) - 1) * translate * static_cast<double>(in.size(1)));
    return affine_image(in, angle, tx, ty, fill);
  };
}

Tensor affine_image(const Tensor& chw, double degrees, double tx, double ty, double fill) {
  Tensor x = check_chw(chw, "transforms::affine_image");
  const int64_t c = x.size(0), h = x.size(1), w = x.size(2);
  const double angle = degrees * std::numbers::pi / 180.0;
  const double cx = (static_cast<double>(w) - 1) / 2, cy = (static_cast<double>(h) - 1) / 2;
  // With y pointing down, a counter-clockwise turn on screen maps (x, y) to
  // (cos*x + sin*y, -sin*x + cos*y); sampling needs the inverse of that.
  const double cs = std::cos(angle), sn = std::sin(angle);
  Tensor out = empty(x.shape(), {DType::Float32, Device::cpu()});
  const float* s = x.data_ptr<float>();
  float* d = out.data_ptr<float>();
  const float f = static_cast<float>(fill);
  for (int64_t y = 0; y < h; ++y)
    for (int64_t xx = 0; xx < w; ++xx) {
      const double ox = static_cast<double>(xx) - cx - tx, oy = static_cast<double>(y) - cy - ty;
      double sx = cs * ox - sn * oy + cx, sy = sn * ox + cs * oy + cy;
      // Snap values within rounding noise of a pixel so exact turns (90 degrees) stay exact.
      if (std::abs(sx - std::round(sx)) < 1e-9) sx = std::round(sx);
      if (std::abs(sy - std::round(sy)) < 1e-9) sy = std::round(sy);
      const double fx = std::floor(sx), fy = std::floor(sy);
      const int64_t x0 = static_cast<int64_t>(fx), y0 = static_cast<int64_t>(fy);
      const float ax = static_cast<float>(sx - fx), ay = static_cast<float>(sy - fy);
      for (int64_t k = 0; k < c; ++k) {
        const float* plane = s + k * h * w;
        auto at = [&](int64_t yy, int64_t xq) {
          return (yy >= 0 && yy < h && xq >= 0 && xq < w) ? plane[yy * w + xq] : f;
        };
        // Skip the far neighbours when their weight is zero so an exact hit on the last row or
        // column does not blend in the fill value.
        const float p00 = at(y0, x0), p01 = ax > 0 ? at(y0, x0 + 1) : p00;
        const float p10 = ay > 0 ? at(y0 + 1, x0) : p00,
                    p11 = (ax > 0 && ay > 0) ? at(y0 + 1, x0 + 1) : (ax > 0 ? p01 : p10);
        const float top = p00 + (p01 - p00) * ax, bot = p10 + (p11 - p10) * ax;
        d[(k * h + y) * w + xx] = top + (bot - top) * ay;
      }
    }
  return out;
}

}  // namespace ember::data::transforms
