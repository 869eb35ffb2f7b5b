#!/usr/bin/env python3
"""Compares an image made by the Windows build (under wine) with a fixture image made by diffusers.

Usage: compare_png.py OUT.png REF.png [--max-diff 1] [--max-fraction 0.01]

Passes when both are RGB images of the same size, no channel value differs by more than --max-diff (in 1/255
steps) and at most --max-fraction of the values differ at all. The defaults are the fixtures' measured tolerance
for a correct fp32 implementation: an fp32 GPU run against the CPU references differs by at most 1/255 on a few
pixels (shared fixtures README). Prints the measured maximum and mean differences either way.
"""
import argparse
import sys

import numpy as np
from PIL import Image


def load_rgb(path):
    image = Image.open(path)
    if image.mode not in ("RGB", "RGBA"):
        sys.exit(f"compare_png: {path} is {image.mode}, expected RGB")
    return np.asarray(image.convert("RGB"), dtype=np.int16)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("ref")
    parser.add_argument("--max-diff", type=int, default=1)
    parser.add_argument("--max-fraction", type=float, default=0.01)
    args = parser.parse_args()

    out, ref = load_rgb(args.out), load_rgb(args.ref)
    if out.shape != ref.shape:
        print(f"compare_png: FAIL size {out.shape[1]}x{out.shape[0]} != reference {ref.shape[1]}x{ref.shape[0]}")
        return 1
    diff = np.abs(out - ref)
    differing = int(np.count_nonzero(diff))
    fraction = differing / diff.size
    print(f"compare_png: {args.out} vs {args.ref}: max |diff| {int(diff.max())}/255, mean |diff| {diff.mean():.6f}/255, "
          f"{differing} of {diff.size} values differ ({fraction:.4%})")
    if int(diff.max()) > args.max_diff or fraction > args.max_fraction:
        print(f"compare_png: FAIL (allowed: max {args.max_diff}/255 on at most {args.max_fraction:.2%} of values)")
        return 1
    print("compare_png: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
