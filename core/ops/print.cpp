// PyTorch-style printing: aligned columns, a shared number format chosen from the values, and a
// summary with "..." when the tensor has more than 1000 elements.
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/tensor.h"

namespace ember {

namespace {

constexpr int64_t kSummaryThreshold = 1000;
constexpr int64_t kEdgeItems = 3;

struct Formatter {
  enum Kind { Int, Fixed, Sci, Bool } kind = Fixed;
  int width = 1;

  std::string fmt(double v) const {
    char buf[64];
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    switch (kind) {
      case Bool:
        return v != 0 ? "True" : "False";
      case Int:
        std::snprintf(buf, sizeof buf, "%.0f", v);
        break;
      case Fixed:
        std::snprintf(buf, sizeof buf, "%.4f", v);
        break;
      case Sci:
        std::snprintf(buf, sizeof buf, "%.4e", v);
        break;
    }
    return buf;
  }
};

std::string pad(const std::string& s, int width) {
  return s.size() >= static_cast<size_t>(width) ? s : std::string(static_cast<size_t>(width) - s.size(), ' ') + s;
}

void print_rec(std::ostringstream& os, const Tensor& t, const std::vector<double>& vals, const Formatter& f, int64_t d,
               int64_t off, bool summarize, int indent, bool is_float_int) {
  const Shape& sh = t.shape();
  Shape st = contiguous_strides(sh);
  if (d == t.dim()) {
    std::string s = f.fmt(vals[static_cast<size_t>(off)]);
    if (is_float_int && std::isfinite(vals[static_cast<size_t>(off)])) s += ".";
    os << pad(s, f.width);
    return;
  }
  os << "[";
  const int64_t n = sh[d];
  for (int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) {
      if (d == t.dim() - 1) {
        os << "...";
      } else {
        os << "...";
      }
      os << (d == t.dim() - 1 ? ", " : ",\n" + std::string(static_cast<size_t>(indent + 1), ' '));
      i = n - kEdgeItems - 1;
      continue;
    }
    print_rec(os, t, vals, f, d + 1, off + i * st[d], summarize, indent + 1, is_float_int);
    if (i + 1 < n) {
      if (d == t.dim() - 1) {
        os << ", ";
      } else {
        os << "," << std::string(static_cast<size_t>(t.dim() - d - 1), '\n')
           << std::string(static_cast<size_t>(indent + 1), ' ');
      }
    }
  }
  os << "]";
}

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  std::ostringstream os;
  std::vector<double> vals;
  {
    NoGradGuard ng;
    vals = to(Device::cpu(), DType::Float64).contiguous().to_vector<double>();
  }
  const bool summarize = numel() > kSummaryThreshold;
  Formatter f;
  bool float_int = false;
  if (dtype() == DType::Bool) {
    f.kind = Formatter::Bool;
  } else if (!is_floating(dtype())) {
    f.kind = Formatter::Int;
  } else {
    bool all_int = true;
    double amax = 0, amin_nz = INFINITY;
    for (double v : vals) {
      if (!std::isfinite(v)) continue;
      if (v != std::round(v)) all_int = false;
      amax = std::max(amax, std::abs(v));
      if (v != 0) amin_nz = std::min(amin_nz, std::abs(v));
    }
    if (all_int && amax < 1e8) {
      f.kind = Formatter::Int;
      float_int = true;
    } else if (amax >= 1e8 || (amin_nz < 1e-4) || (amin_nz != INFINITY && amax / amin_nz > 1e3 && amin_nz < 1e-2)) {
      f.kind = Formatter::Sci;
    } else {
      f.kind = Formatter::Fixed;
    }
  }
  for (double v : vals) {
    std::string s = f.fmt(v);
    if (float_int && std::isfinite(v)) s += ".";
    f.width = std::max(f.width, static_cast<int>(s.size()));
  }
  os << "tensor(";
  if (dim() == 0) {
    std::string s = f.fmt(vals.empty() ? 0 : vals[0]);
    if (float_int) s += ".";
    os << s;
  } else if (numel() == 0) {
    os << "[]";
  } else {
    print_rec(os, *this, vals, f, 0, 0, summarize, 7, float_int);
  }
  if (numel() == 0 && dim() > 1) os << ", size=" << shape_str(shape());
  if (dtype() != DType::Float32 && dtype() != DType::Int64 && dtype() != DType::Bool)
    os << ", dtype=" << dtype_name(dtype());
  if (!device().is_cpu()) os << ", device='" << device().str() << "'";
  if (grad_fn())
    os << ", grad_fn=<" << grad_fn()->name() << ">";
  else if (requires_grad())
    os << ", requires_grad=True";
  os << ")";
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  return os << t.str();
}

}  // namespace ember
