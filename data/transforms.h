// Per-example transforms for images, composable, in the style of torchvision's. Each returns a
// data::Transform (input tensor and Generator in, tensor out). Random ones draw only from the
// Generator they are given, which the DataLoader derives from (seed, epoch, example index), so a
// seed gives the same augmented batches whatever the number of worker threads and after a
// resume. Image transforms take float32 [C, H, W] CPU tensors (what the datasets produce).
#pragma once

#include <vector>

#include "data/dataset.h"

namespace ember::data::transforms {

// Applies the transforms in order.
Transform compose(std::vector<Transform> ts);
// uint8 [H, W] or [H, W, C] (a decoded image) -> float32 [C, H, W] in [0, 1]; float32 [C, H, W]
// passes through unchanged.
Transform to_tensor();
// (x - mean[c]) / std[c] per channel; one value applies to every channel.
Transform normalize(std::vector<double> mean, std::vector<double> std);
// Pads by `padding` pixels of `fill` on every side, then crops a height x width window at a
// uniformly random position.
Transform random_crop(int64_t height, int64_t width, int64_t padding = 0, double fill = 0.0);
// Mirrors left-right with probability p.
Transform random_horizontal_flip(double p = 0.5);
// Rotates by an angle uniform in [-degrees, degrees] about the centre and shifts by up to
// translate * width (resp. height) pixels each way, sampling bilinearly; uncovered pixels get
// `fill`.
Transform random_affine(double degrees, double translate = 0.0, double fill = 0.0);

// The deterministic part of random_affine: rotates by `degrees` (counter-clockwise as displayed,
// y pointing down) about the image centre, then shifts by (tx, ty) pixels.
Tensor affine_image(const Tensor& chw, double degrees, double tx, double ty, double fill = 0.0);

// A uniform double in [0, 1) from `gen` (one Philox block).
double uniform01(Generator& gen);

}  // namespace ember::data::transforms
