#include "train/accumulate.h"

#include <algorithm>
#include <optional>

#include "core/autograd/grad_mode.h"
#include "train/precision.h"

namespace ember::train {

int64_t& run_accumulation() {
  static int64_t n = 1;
  return n;
}

std::vector<std::pair<int64_t, int64_t>> micro_batch_ranges(int64_t rows, int64_t n) {
  EMBER_CHECK(n >= 1, "micro_batch_ranges: expected at least one micro-batch, got ", n);
  const int64_t pieces = std::max<int64_t>(1, std::min(n, rows));
  std::vector<std::pair<int64_t, int64_t>> r;
  r.reserve(static_cast<size_t>(pieces));
  const int64_t base = rows / pieces, extra = rows % pieces;
  int64_t begin = 0;
  for (int64_t i = 0; i < pieces; ++i) {
    const int64_t end = begin + base + (i < extra ? 1 : 0);
    r.emplace_back(begin, end);
    begin = end;
  }
  return r;
}

double cross_entropy_divisor(const Tensor& target, const CrossEntropyOptions& opts) {
  EMBER_CHECK(target.defined() && target.dtype() == DType::Int64,
              "cross_entropy_divisor: expected int64 class targets");
  const std::vector<int64_t> t = target.cpu().to_vector<int64_t>();
  std::vector<double> w;
  if (opts.weight.defined()) w = opts.weight.cpu().to_vector<double>();
  double d = 0;
  for (int64_t c : t) {
    if (c == opts.ignore_index) continue;
    // A target outside the classes adds nothing here: cross_entropy refuses it by name.
    if (w.empty())
      d += 1;
    else if (c >= 0 && c < static_cast<int64_t>(w.size()))
      d += w[static_cast<size_t>(c)];
  }
  return d;
}

namespace {
// Releases a data-parallel job's held gradients however the step ends (an error in a piece must
// not leave the next step's backward unsynchronised).
struct ReleaseOnExit {
  ParallelJob* job;
  ~ReleaseOnExit() {
    if (job) job->release_gradients();
  }
};
}  // namespace

StepPasses forward_backward(nn::Module& net, ParallelJob* job, Device dev, const Tensor& x, const Tensor& y,
                            const CrossEntropyOptions& criterion, const PieceLoss& loss, const PieceCorrect& correct) {
  const auto pieces = micro_batch_ranges(x.size(0), run_accumulation());
  const bool split = pieces.size() > 1;
  CrossEntropyOptions piece_opts = criterion;
  double scale = 1;  // each piece's summed loss over the whole batch's divisor: the batch mean's gradients
  if (split) piece_opts.reduction = Reduction::Sum, scale = 1.0 / cross_entropy_divisor(y, criterion);
  // Every piece's backward but the last only accumulates; the last one's all-reduces the sum.
  ReleaseOnExit release{split ? job : nullptr};
  if (release.job) release.job->hold_gradients();
  Tensor loss_sum, correct_sum;  // on the device, read once at the end
  for (size_t i = 0; i < pieces.size(); ++i) {
    const auto [begin, end] = pieces[i];
    if (release.job && i + 1 == pieces.size()) release.job->release_gradients();
    const Tensor xi = (split ? x.narrow(0, begin, end - begin) : x).to(dev);
    const Tensor yi = (split ? y.narrow(0, begin, end - begin) : y).to(dev);
    Tensor logits, l;
    {
      std::optional<autocast> amp;  // --precision bf16/fp16: the forward and the loss
      run_precision().enter_autocast(amp, dev);
      logits = job ? job->forward(net, xi) : net(xi);
      l = loss(logits, yi, piece_opts);
      if (split) l = mul(l, scale);
      // Data-parallel: weighted so that the ranks' averaged gradient is the global batch's.
      if (job) l = job->weight(l);
    }
    run_precision().backward(l);
    NoGradGuard ng;
    const Tensor lv = l.detach(), cv = correct(logits.detach(), yi);
    loss_sum = loss_sum.defined() ? add(loss_sum, lv) : lv;
    correct_sum = correct_sum.defined() ? add(correct_sum, cv) : cv;
  }
  return {loss_sum.item() / (job ? job->loss_weight() : 1.0), correct_sum.item()};
}

}  // namespace ember::train
