// What the kill-at-random-moments harness (kill_resume.sh) asks of checkpoints:
//   ckpt_verify read FILE...   every file reads back as a checkpoint (checksums included);
//   ckpt_verify same A B       A and B hold bit-identical tensors (parameters, buffers, every
//                              optimizer state) and the same training position.
// Exit status 0 when so; 1 with a message naming the file and what differs otherwise.
#include <cstdio>
#include <cstring>
#include <string>

#include "layers/checkpoint.h"

namespace {

using namespace ember;

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor ca = a.cpu().contiguous(), cb = b.cpu().contiguous();
  return std::memcmp(ca.raw_data(), cb.raw_data(), static_cast<size_t>(ca.numel()) * ca.itemsize()) == 0;
}

std::string compare_named(const char* what, const std::vector<std::pair<std::string, Tensor>>& a,
                          const std::vector<std::pair<std::string, Tensor>>& b) {
  if (a.size() != b.size())
    return std::string(what) + ": " + std::to_string(a.size()) + " vs " + std::to_string(b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].first != b[i].first) return std::string(what) + " " + a[i].first + " vs " + b[i].first;
    if (!same_bits(a[i].second, b[i].second)) return std::string(what) + " " + a[i].first + " differs";
  }
  return {};
}

std::string compare(const CheckpointContents& a, const CheckpointContents& b) {
  if (std::string d = compare_named("parameter", a.model_parameters, b.model_parameters); !d.empty()) return d;
  if (std::string d = compare_named("buffer", a.model_buffers, b.model_buffers); !d.empty()) return d;
  if (a.optimizers.size() != b.optimizers.size()) return "number of optimizers";
  for (size_t o = 0; o < a.optimizers.size(); ++o) {
    const auto &pa = a.optimizers[o].params, &pb = b.optimizers[o].params;
    if (pa.size() != pb.size()) return "optimizer " + std::to_string(o) + ": groups";
    for (size_t g = 0; g < pa.size(); ++g) {
      if (pa[g].size() != pb[g].size()) return "optimizer " + std::to_string(o) + ": parameters";
      for (size_t p = 0; p < pa[g].size(); ++p) {
        if (pa[g][p].step != pb[g][p].step) return "optimizer " + std::to_string(o) + ": step";
        if (std::string d = compare_named("optimizer state", pa[g][p].tensors, pb[g][p].tensors); !d.empty()) return d;
      }
    }
  }
  const auto &x = a.position, &y = b.position;
  if (x.epoch != y.epoch || x.step != y.step || x.loader_epoch != y.loader_epoch || x.loader_batch != y.loader_batch)
    return "training position: step " + std::to_string(x.step) + " vs " + std::to_string(y.step);
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "read" && argc > 2) {
      for (int i = 2; i < argc; ++i) (void)read_checkpoint(argv[i]);
      return 0;
    }
    if (mode == "same" && argc == 4) {
      const std::string d = compare(read_checkpoint(argv[2]), read_checkpoint(argv[3]));
      if (d.empty()) return 0;
      std::fprintf(stderr, "ckpt_verify: %s and %s differ: %s\n", argv[2], argv[3], d.c_str());
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ckpt_verify: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "usage: ckpt_verify read FILE... | ckpt_verify same A B\n");
  return 2;
}
