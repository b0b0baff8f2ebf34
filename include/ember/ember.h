// The one header a program using Ember includes: tensors and every op, autograd (NoGradGuard,
// gradcheck), devices, generators, threads, memory statistics and streams; the training API
// (nn modules, layers, losses, initialisers, optimizers, LR schedules, checkpoints). The other
// libraries are installed beside it but not gathered here: data loading (data/: datasets, the
// DataLoader, transforms; Ember::ember_data), the model zoo (Ember::ember_models), interop
// (Ember::ember_interop), in-job parallelism (dist/, Ember::ember_dist), the training loop (train/:
// Trainer, checkpoints, progress; Ember::ember_train) and the job scheduler: include their own
// headers (e.g. "data/dataloader.h", "train/trainer.h") and link their libraries.
#pragma once

#include <ember/config.h>

#include "core/allocator.h"
#include "core/autograd/engine.h"
#include "core/autograd/grad_mode.h"
#include "core/autograd/gradcheck.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/generator.h"
#include "core/ops.h"
#include "core/parallel.h"
#include "core/stream.h"
#include "core/tensor.h"
#include "layers/checkpoint.h"
#include "layers/nn.h"
