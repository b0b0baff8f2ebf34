"""Checks that a training run's TensorBoard folder holds every tag named, read with TensorBoard's own
reader. Usage: tensorboard_tags_check.py DIR TAG [TAG ...]; a TAG ending in '*' matches any tag
with that beginning. Exits 1 naming the tags that are missing."""
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def main():
    acc = EventAccumulator(sys.argv[1], size_guidance={"scalars": 0, "images": 0, "histograms": 0, "tensors": 0})
    acc.Reload()
    tags = acc.Tags()
    have = {kind: list(tags.get(kind, [])) for kind in ("scalars", "images", "histograms", "tensors")}
    every = [t for ts in have.values() for t in ts]
    missing = [w for w in sys.argv[2:] if not any(t == w or (w.endswith("*") and t.startswith(w[:-1])) for t in every)]
    print({k: len(v) for k, v in have.items()}, "tags:", ", ".join(sorted(every)))
    if missing:
        print("missing:", ", ".join(missing))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
