#!/usr/bin/env bash
# Installs the PyTorch 2.x that bench/torch2_ref.py (PyTorch's side of bench/compare_torch.sh)
# runs: PyPI's own Linux wheel, the one `pip install torch` gives a user, into bench/.venv-torch
# (git-ignored).
#   bench/setup_torch.sh [PYTHON]     (default python3; torch 2.15 needs Python >= 3.11)
# PyPI's Linux wheel is the CUDA build: libtorch.so links libtorch_cuda.so, which links cuBLAS,
# cuDNN, cuFILE, cuSPARSELt, NVSHMEM, NCCL, ..., so `import torch` fails without the NVIDIA wheels
# even on a machine without a GPU (checked: with --no-deps alone it stops at libcufile.so.0). So
# the wheel goes in with --no-deps, then its requirements as its own metadata lists them, less the
# two that importing does not need: triton (GPU kernels; torch.compile's CPU backend generates
# C++) and cuda-bindings. That is the same libtorch_cpu.so as a plain `pip install torch`, with MKL
# and oneDNN linked in (printed by torch.__config__.show() at the end). About 5 GB, most of it the
# unused NVIDIA libraries. Re-running checks the version and installs nothing new.
set -euo pipefail
TORCH_VERSION=2.15.0
python=${1:-python3}
here=$(cd "$(dirname "$0")" && pwd)
venv=$here/.venv-torch
if [[ ! -x $venv/bin/python ]]; then
  "$python" -m venv "$venv"
fi
have=$("$venv/bin/python" -c 'import torch; print(torch.__version__)' 2>/dev/null || true)
if [[ ${have%%+*} != "$TORCH_VERSION" ]]; then
  "$venv/bin/python" -m pip install --quiet --upgrade pip
  "$venv/bin/python" -m pip install --quiet --no-deps "torch==$TORCH_VERSION"
  reqs=$("$venv/bin/python" - <<'PY'
import re
from importlib.metadata import requires
for r in requires("torch") or []:
    if "extra ==" in r or re.match(r"(triton|cuda-bindings)\b", r):
        continue
    print(r.split(";")[0].strip())
PY
)
  mapfile -t reqs <<<"$reqs"
  # numpy only so that torch does not warn about its absence.
  "$venv/bin/python" -m pip install --quiet "${reqs[@]}" numpy
fi
"$venv/bin/python" - <<'PY'
import torch
print("torch", torch.__version__, "at", torch.__file__)
print(torch.__config__.show())
x = torch.randn(8, 4, requires_grad=True)
(x @ torch.randn(4, 2)).sum().backward()
print("CPU autograd works; CUDA available:", torch.cuda.is_available())
PY
du -sh "$venv" | sed 's/^/installed size: /'
