// Trains the DCGAN (models/gan.h: a generator of transposed convolutions from 100-d noise to
// 28x28 with batch normalisation, and a two-convolution discriminator with dropout that outputs a
// logit) on MNIST, or Fashion-MNIST when MNIST is not there, with BCE on logits and Adam 1e-4,
// beta1 0.5 (0.9 mode-collapsed within two epochs of 200 steps; README, Results). After every epoch it
// writes a PNG grid of 64 samples from a fixed noise batch (checkpoint-dir/samples_epoch_NNN.png).
#include "train/gan.h"

int main(int argc, char** argv) {
  using namespace ember;
  return train::train_gan<models::DcganGenerator, models::DcganDiscriminator>(
      argc, argv, "mnist_dcgan",
      "Trains a DCGAN on MNIST (Fashion-MNIST when --data holds no MNIST files) and writes a grid\n"
      "of samples after every epoch. Example: mnist_dcgan --epochs 5",
      /*logits=*/true, /*default_epochs=*/5, /*default_lr=*/1e-4, /*default_beta1=*/0.5);
}
