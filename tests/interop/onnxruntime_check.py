"""Reads back the models tests/interop/roundtrip/onnx_cases.cpp exported: onnx.checker (with full
shape inference) must accept each, and onnxruntime must give Ember's outputs within 1e-4 max abs on
every case's inputs. Prints one row per model and batch; exits 1 on any failure.
Usage: onnxruntime_check.py DIR [MANIFEST]"""
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

TOLERANCE = 1e-4


def main():
    folder = Path(sys.argv[1])
    manifest = folder / (sys.argv[2] if len(sys.argv) > 2 else "manifest.txt")
    failures = 0
    checked = {}
    print(f"{'model':<28} {'inputs':<32} {'output':<16} {'max abs diff':>13}")
    for line in manifest.read_text().splitlines():
        left, out_file = line.split(" -> ")
        name, model_file, *in_files = left.split()
        path = folder / model_file
        if path not in checked:
            model = onnx.load(str(path))
            onnx.checker.check_model(model, full_check=True)
            sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
            checked[path] = sess
        sess = checked[path]
        feeds = {i.name: np.load(folder / f) for i, f in zip(sess.get_inputs(), in_files)}
        if len(feeds) != len(sess.get_inputs()):
            print(f"{name}: the model takes {len(sess.get_inputs())} inputs, the case gives {len(feeds)}")
            failures += 1
            continue
        want = np.load(folder / out_file)
        (got,) = sess.run(None, feeds)
        shapes = " ".join("x".join(map(str, v.shape)) for v in feeds.values())
        if got.shape != want.shape:
            print(f"{name:<28} {shapes:<32} {'x'.join(map(str, got.shape)):<16} shape differs from Ember's "
                  f"{want.shape}")
            failures += 1
            continue
        diff = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))) if want.size else 0.0
        verdict = "" if diff <= TOLERANCE else f"  FAIL (over {TOLERANCE})"
        failures += diff > TOLERANCE
        print(f"{name:<28} {shapes:<32} {'x'.join(map(str, got.shape)):<16} {diff:>13.3e}{verdict}")
    print(f"onnxruntime {ort.__version__}, onnx {onnx.__version__}: {len(checked)} models, "
          f"{'all within' if failures == 0 else f'{failures} case(s) over'} {TOLERANCE} max abs")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
