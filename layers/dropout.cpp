#include "layers/dropout.h"

#include <sstream>

#include "layers/functional.h"

namespace ember::nn {

Dropout::Dropout(double p, Generator* generator) : p(p), generator(generator) {
  EMBER_CHECK(p >= 0.0 && p <= 1.0, "Dropout: probability p must be in [0, 1], got ", p);
}

Tensor Dropout::forward(const Tensor& input) {
  return F::dropout(input, p, is_training(), generator);
}

std::string Dropout::extra_repr() const {
  std::ostringstream os;
  os << "p=" << p;
  return os.str();
}

}  // namespace ember::nn
