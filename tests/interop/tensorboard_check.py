"""Reads the event files tests/interop/roundtrip/tensorboard_cases.cpp wrote with TensorBoard's own
reader (EventAccumulator, which checks every record's CRC-32C) and checks tags, steps, values,
image sizes, the histogram and the text; then that a truncated copy gives every complete record and
a corrupted one stops at the corruption. Exits 1 on the first mismatch.
Usage: tensorboard_check.py DIR"""
import math
import shutil
import sys
from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader


def load(path):
    acc = EventAccumulator(str(path), size_guidance={"scalars": 0, "images": 0, "histograms": 0, "tensors": 0})
    acc.Reload()
    return acc


def expect(cond, what):
    if not cond:
        print("FAIL:", what)
        sys.exit(1)


def main():
    folder = Path(sys.argv[1])
    acc = load(folder)
    tags = acc.Tags()
    expect(tags["scalars"] == ["train/loss"], f"scalar tags {tags['scalars']}")
    loss = acc.Scalars("train/loss")
    expect([e.step for e in loss] == list(range(20)), "steps 0..19")
    expect(all(abs(e.value - 2.0 / (1 + e.step)) < 1e-6 for e in loss), "loss values")
    expect(all(e.wall_time == 1000.0 + e.step for e in loss), "wall times")
    for name, want in (("g", lambda s: 1e-3 * s), ("d", lambda s: 2e-3)):
        run = load(folder / f"lr_{name}")
        got = run.Scalars("lr")
        expect(len(got) == 20 and all(abs(e.value - want(e.step)) < 1e-7 for e in got), f"add_scalars run lr_{name}")
    expect(sorted(tags["images"]) == ["grey", "samples"], f"image tags {tags['images']}")
    (img,) = acc.Images("samples")
    expect((img.step, img.width, img.height) == (3, 7, 5), f"image step/size {img.step} {img.width}x{img.height}")
    from PIL import Image
    import io
    pixels = Image.open(io.BytesIO(img.encoded_image_string))
    expect(pixels.mode == "RGB" and pixels.getpixel((3, 2)) == (0, 128, 255), f"pixel {pixels.getpixel((3, 2))}")
    (grey,) = acc.Images("grey")
    expect((grey.width, grey.height) == (4, 9), "grey image size")
    expect(tags["histograms"] == ["weights/fc"], f"histogram tags {tags['histograms']}")
    (h,) = acc.Histograms("weights/fc")
    hv = h.histogram_value
    expect(h.step == 5 and hv.num == 999 and hv.min == -3 and hv.max == 7, f"histogram stats {hv.num} {hv.min} {hv.max}")
    expect(sum(hv.bucket) == 999, "bucket counts add up to the finite values")
    expect(abs(hv.sum - (sum(0.001 * (i + 1) for i in range(897)) + 50 + 4)) < 1e-9, "histogram sum")
    # 0.5 falls in the bucket whose upper limit is the first edge at or above it.
    edges = list(hv.bucket_limit)
    k = next(i for i, e in enumerate(edges) if e >= 0.5)
    expect(hv.bucket[k] >= 100, "the hundred 0.5s in one bucket")
    expect(all(b > a for a, b in zip(edges, edges[1:])), "ascending bucket limits")
    expect(tags["tensors"] == ["notes"], f"text tags {tags['tensors']}")
    (t,) = acc.Tensors("notes")
    expect(t.step == 6 and t.tensor_proto.string_val == [b"**Ember** run, seed 1"], "text")

    # A file cut off mid-record (a killed run) still gives every complete record.
    (events,) = [p for p in folder.iterdir() if p.name.startswith("events.out.tfevents.")]
    records = list(EventFileLoader(str(events)).Load())
    cut = folder / "cut"
    cut.mkdir()
    data = events.read_bytes()
    (cut / events.name).write_bytes(data[:-7])
    expect(len(list(EventFileLoader(str(cut / events.name)).Load())) == len(records) - 1, "truncated file")
    # A flipped byte inside a record's data fails its checksum: the reader stops there.
    bad = folder / "bad"
    bad.mkdir()
    middle = bytearray(data)
    middle[len(data) // 2] ^= 0xFF
    (bad / events.name).write_bytes(bytes(middle))
    got = len(list(EventFileLoader(str(bad / events.name)).Load()))
    expect(got < len(records), f"corrupted file: {got} of {len(records)} records read")
    shutil.rmtree(cut)
    shutil.rmtree(bad)
    print(f"tensorboard_check: {len(records)} records read back by TensorBoard's reader; the truncated copy gave "
          f"{len(records) - 1}, the corrupted one stopped after {got}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
