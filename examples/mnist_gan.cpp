// Trains the MLP GAN (models/gan.h: G = Linear(100->256)+ReLU, Linear(256->784)+Tanh;
// D = Linear(784->256)+LeakyReLU(0.2), Linear(256->1)+Sigmoid) on MNIST, or Fashion-MNIST when
// MNIST is not there, with binary cross-entropy and Adam 2e-4. After every epoch it writes a PNG
// grid of 64 samples from a fixed noise batch (checkpoint-dir/samples_epoch_NNN.png).
#include "train/gan.h"

int main(int argc, char** argv) {
  using namespace ember;
  return train::train_gan<models::MlpGenerator, models::MlpDiscriminator>(
      argc, argv, "mnist_gan",
      "Trains a multilayer-perceptron GAN on MNIST (Fashion-MNIST when --data holds no MNIST files)\n"
      "and writes a grid of samples after every epoch. Example: mnist_gan --epochs 20",
      /*logits=*/false, /*default_epochs=*/20);
}
