#!/usr/bin/env python3
"""bench/torch2_ref.py: PyTorch 2.x's training steps per second on workloads of bench/workloads.h.

PyTorch's side of bench/compare_torch.sh beside bench/step_rate (Ember) and bench/torch_ref
(libtorch 1.13): the same models layer for layer (layer types, shapes, bias, batch norm, dropout),
batches, optimizers, data and step as bench/ember_steps.cpp, timed as bench/step_rate_main.h times
them (one warm-up run of the workload's steps, then --reps timed runs) and printed in its line:
  <workload> <threads> <median steps/s> <min> <max> <samples per step> <GFLOP per step>
Run it with bench/.venv-torch/bin/python (bench/setup_torch.sh installs the pinned torch).
  torch2_ref.py --workload W[,W...] [--threads N] [--reps N] [--batch N] [--compile]
                [--device cpu|cuda] [--precision fp32|bf16] [--run-seconds S] [--any-version]
Several workloads (comma-separated) are timed one after the other in the one process, one line
each, as bench/step_rate does. --run-seconds S lengthens a timed run to about S seconds at the
warm-up's pace when the workload's own step count is shorter (GPU steps). --device cuda puts
models and data on the GPU with PyTorch's settings as its users set them for an fp32 comparison:
TF32 off for matmuls and cuDNN, cudnn.benchmark on; each timed run ends with a synchronize.
--precision bf16 runs the models' forward under torch.autocast(bfloat16) (the losses in float32:
binary_cross_entropy refuses autocast), as Ember's --precision bf16 runs its forward.
--any-version accepts any torch 2.x (the GPU machine's image has its own; its version is printed
on stderr as "# torch <version> <device name>").
--compile wraps each model in torch.compile (default mode, Inductor's C++ backend on the CPU); the
optimizer runs eagerly, as most users leave it. Compilation happens in the warm-up run, which is not
timed; a line "# compile <workload> <threads> <first step s> <graphs> <graph breaks>" on stderr
gives the first step's time (compiling included). When compiling fails the program prints
"# did not compile <workload>: <reason>" on stderr, goes on with the next workload and exits 3.
"""
import argparse
import sys
import time

TORCH_VERSION = "2.15.0"  # bench/setup_torch.sh installs this one

# bench/workloads.h's kWorkloads: name -> (samples per step, steps per timed run, GFLOP per step,
# nominal). Kept in step by bench/compare_torch.sh, which checks each line's GFLOP against Ember's.
WORKLOADS = {
    "mnist_cnn": (64, 40, 64 * 0.0168),
    "mlp_gan": (64, 100, 0.318),
    "dcgan": (64, 3, 31.8),
    "lstm_lm": (32, 5, 27.1),
    "lstm_classifier": (32, 20, 2.76),
    "bilstm": (32, 20, 0.472),
}


def parse_args():
    ap = argparse.ArgumentParser(prog="torch2_ref.py", description=__doc__.split("\n")[0])
    ap.add_argument("--workload", required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--run-seconds", type=float, default=0.0)
    ap.add_argument("--any-version", action="store_true")
    a = ap.parse_args()
    a.workloads = a.workload.split(",")
    unknown = [w for w in a.workloads if w not in WORKLOADS]
    if unknown:
        ap.error(f"--workload: {','.join(unknown) or '(empty)'} is not one of {', '.join(WORKLOADS)}")
    if a.threads < 1 or a.reps < 1 or not 0 <= a.batch <= 65536 or not 0 <= a.run_seconds <= 60:
        ap.error("--threads >= 1, --reps >= 1, --batch in [0, 65536], --run-seconds in [0, 60]")
    return a


def steps_for(own, run_seconds, sec_per_step):
    """Steps per timed run: the workload's own, or enough for run_seconds (bench/step_rate_main.h)."""
    if run_seconds <= 0 or sec_per_step <= 0:
        return own
    return max(own, int(min(run_seconds / sec_per_step, 1e6)))


def main():
    a = parse_args()
    import torch

    version = torch.__version__.split("+")[0]
    if version != TORCH_VERSION and not (a.any_version and version.startswith("2.")):
        print(f"torch2_ref.py: torch {torch.__version__}, expected {TORCH_VERSION} (bench/setup_torch.sh)"
              + (" or, with --any-version, any 2.x" if a.any_version else ""), file=sys.stderr)
        return 1
    if a.device == "cuda":
        if not torch.cuda.is_available():
            print("torch2_ref.py: --device cuda, but torch sees no CUDA device", file=sys.stderr)
            return 1
        torch.backends.cuda.matmul.allow_tf32 = False  # Ember's fp32 is full fp32 (no TF32) too
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = True
        name = torch.cuda.get_device_name(0)
    else:
        name = "cpu"
    print(f"# torch {torch.__version__} {name}", file=sys.stderr)
    torch.set_num_threads(a.threads)
    failed = False
    for w in a.workloads:
        rc = time_workload(torch, w, a)
        if rc == 3:
            failed = True
        elif rc != 0:
            return rc
    return 3 if failed else 0


def time_workload(torch, w, a):
    """Times one workload and prints its line; 3 when torch.compile failed on it."""
    dev = torch.device(a.device)
    default_batch, steps_per_run, gflop_default = WORKLOADS[w]
    batch = a.batch or default_batch
    gflop = gflop_default * batch / default_batch
    step = build_step(torch, w, batch, dev, a)
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    rates = []
    steps = steps_per_run
    for r in range(a.reps + 1):
        t0 = time.perf_counter()
        for s in range(steps):
            try:
                step()
            except Exception as e:  # torch.compile's failures surface here, in the first step
                if not a.compile or r > 0 or s > 0:
                    raise
                reason = " ".join(str(e).split())[:300]
                print(f"# did not compile {w}: {type(e).__name__}: {reason}", file=sys.stderr)
                return 3
            if r == 0 and s == 0 and a.compile:
                sync()
                report_compile(w, a.threads, time.perf_counter() - t0)
        sync()
        sec = time.perf_counter() - t0
        if r > 0:
            rates.append(steps / sec)  # run 0 warms up (and compiles)
        else:
            steps = steps_for(steps_per_run, a.run_seconds, sec / steps)
    rates.sort()
    print(f"{w} {a.threads} {rates[len(rates) // 2]:.6g} {rates[0]:.6g} {rates[-1]:.6g} {batch} {gflop:.6g}",
          flush=True)
    return 0


def report_compile(w, threads, first):
    try:
        from torch._dynamo.utils import counters
        graphs = counters["stats"]["unique_graphs"]
        breaks = sum(counters["graph_break"].values())
    except Exception:
        graphs, breaks = -1, -1
    print(f"# compile {w} {threads} {first:.3f} {graphs} {breaks}", file=sys.stderr, flush=True)


def build_step(torch, w, batch, dev, a):
    """One training step of workload w on dev: the models, data and optimizers of bench/ember_steps.cpp."""
    import contextlib

    import torch.nn as nn
    import torch.nn.functional as F

    def maybe_compile(m):
        return torch.compile(m) if a.compile else m

    def fwd():  # the forward under autocast for --precision bf16; losses stay in float32
        if a.precision == "bf16":
            return torch.autocast(device_type=dev.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def adam(params, lr=1e-3, betas=(0.9, 0.999)):
        return torch.optim.Adam(params, lr=lr, betas=betas, eps=1e-8)

    class MnistCnn(nn.Module):  # models/mnist_cnn.h
        def __init__(self):
            super().__init__()
            self.c1, self.c2, self.c3 = nn.Conv2d(1, 32, 3), nn.Conv2d(32, 64, 3), nn.Conv2d(64, 64, 3)
            self.f1, self.f2 = nn.Linear(576, 64), nn.Linear(64, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.c1(x)), 2)
            x = F.max_pool2d(F.relu(self.c2(x)), 2)
            x = F.relu(self.c3(x)).flatten(1)
            return self.f2(F.relu(self.f1(x)))

    class MlpG(nn.Module):  # models/gan.h
        def __init__(self):
            super().__init__()
            self.l1, self.l2 = nn.Linear(100, 256), nn.Linear(256, 784)

        def forward(self, z):
            return torch.tanh(self.l2(F.relu(self.l1(z)))).view(z.size(0), 1, 28, 28)

    class MlpD(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1, self.l2 = nn.Linear(784, 256), nn.Linear(256, 1)

        def forward(self, x):
            return torch.sigmoid(self.l2(F.leaky_relu(self.l1(x.flatten(1)), 0.2)))

    class DcganG(nn.Module):  # DcganGenerator with its default batch_norm: BN after fc, t1, t2; no bias there
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(100, 7 * 7 * 256, bias=False)
            self.bn0 = nn.BatchNorm1d(7 * 7 * 256)
            self.t1 = nn.ConvTranspose2d(256, 128, 5, stride=1, padding=2, bias=False)
            self.bn1 = nn.BatchNorm2d(128)
            self.t2 = nn.ConvTranspose2d(128, 64, 5, stride=2, padding=2, output_padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(64)
            self.t3 = nn.ConvTranspose2d(64, 1, 5, stride=2, padding=2, output_padding=1)

        def forward(self, z):
            h = F.leaky_relu(self.bn0(self.fc(z)), 0.2).view(z.size(0), 256, 7, 7)
            h = F.leaky_relu(self.bn1(self.t1(h)), 0.2)
            h = F.leaky_relu(self.bn2(self.t2(h)), 0.2)
            return torch.tanh(self.t3(h))

    class DcganD(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(1, 64, 5, stride=2, padding=2)
            self.c2 = nn.Conv2d(64, 128, 5, stride=2, padding=2)
            self.d1, self.d2 = nn.Dropout(0.3), nn.Dropout(0.3)
            self.fc = nn.Linear(7 * 7 * 128, 1)

        def forward(self, x):
            h = self.d1(F.leaky_relu(self.c1(x), 0.2))
            h = self.d2(F.leaky_relu(self.c2(h), 0.2))
            return self.fc(h.flatten(1))

    class LstmNet(nn.Module):  # LstmLanguageModel; the LSTM classifier of bench/ember_steps.cpp; BiLstmClassifier
        def __init__(self, vocab, embed, hidden, out, kind):
            super().__init__()
            self.kind = kind
            self.embed = nn.Embedding(vocab, embed, padding_idx=0 if kind == "bi" else None)
            self.lstm = nn.LSTM(embed, hidden, batch_first=True, bidirectional=kind == "bi")
            self.head = nn.Linear(2 * hidden if kind == "bi" else hidden, out)

        def forward(self, x):
            y, (h_n, _) = self.lstm(self.embed(x))
            if self.kind == "lm":
                return self.head(y)
            if self.kind == "cls":
                return self.head(h_n[0])
            return self.head(torch.cat([h_n[0], h_n[1]], 1))

    def gan_step(G, D, logits):
        torch.manual_seed(0)
        g, d = G().to(dev), D().to(dev)
        og = adam(g.parameters(), 2e-4, (0.5, 0.999))
        od = adam(d.parameters(), 2e-4, (0.5, 0.999))
        g, d = maybe_compile(g), maybe_compile(d)
        real = torch.rand(batch, 1, 28, 28, device=dev) * 2 - 1
        ones, zeros = torch.ones(batch, 1, device=dev), torch.zeros(batch, 1, device=dev)
        bce = F.binary_cross_entropy_with_logits if logits else F.binary_cross_entropy

        def loss(out, target):
            return bce(out.float(), target)

        def step():
            with fwd():
                fake = g(torch.randn(batch, 100, device=dev))
                d_real, d_fake = d(real), d(fake.detach())
            ld = loss(d_real, ones) + loss(d_fake, zeros)
            od.zero_grad()
            ld.backward()
            od.step()
            with fwd():
                d_gen = d(fake)
            lg = loss(d_gen, ones)
            og.zero_grad()
            lg.backward()
            og.step()

        return step

    def classifier_step(net, x, y, classes):
        net = net.to(dev)
        x, y = x.to(dev), y.to(dev)
        opt = adam(net.parameters())
        net = maybe_compile(net)

        def step():
            with fwd():
                out = net(x)
            l = F.cross_entropy(out.float().reshape(-1, classes), y)
            opt.zero_grad()
            l.backward()
            opt.step()

        return step

    if w == "mnist_cnn":
        torch.manual_seed(0)
        net = MnistCnn()
        return classifier_step(net, torch.randn(batch, 1, 28, 28), torch.randint(0, 10, (batch,)), 10)
    if w == "mlp_gan":
        return gan_step(MlpG, MlpD, False)
    if w == "dcgan":
        return gan_step(DcganG, DcganD, True)
    torch.manual_seed(1)  # bench/workloads.h's shapes
    if w == "bilstm":
        vocab, embed, hidden, seq, classes = 100, 32, 64, 50, 4
        net = LstmNet(vocab, embed, hidden, classes, "bi")
        x, y = torch.randint(1, vocab, (batch, seq)), torch.randint(0, classes, (batch,))
        return classifier_step(net, x, y, classes)
    vocab, embed, hidden, seq = 10000, 128, 128, 100
    net = LstmNet(vocab, embed, hidden, vocab, "lm" if w == "lstm_lm" else "cls")
    x = torch.randint(0, vocab, (batch, seq))
    y = torch.randint(0, vocab, (batch * seq if w == "lstm_lm" else batch,))
    return classifier_step(net, x, y, vocab)


if __name__ == "__main__":
    sys.exit(main())
