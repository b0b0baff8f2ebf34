// Builds against an installed Ember: makes a tensor, computes with it, differentiates, prints.
#include <ember/ember.h>

#include <iostream>

int main() {
  using namespace ember;
  Tensor x = arange(6, {.dtype = DType::Float32}).reshape({2, 3});
  x.requires_grad_();
  Tensor y = x * 2.0 + 1.0;
  Tensor loss = (y * x).sum();
  loss.backward();
  std::cout << "ember " << EMBER_VERSION << "\n" << y << "\nsum=" << loss.item() << "\ngrad=" << x.grad() << "\n";
  return 0;
}
