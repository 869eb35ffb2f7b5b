#!/usr/bin/env python3
"""Checks on PNG files for scripts/test-windows-installer.sh (the desktop app under wine).

  png_checks.py parameters IMAGE.png --prompt TEXT [--size WxH] [--model NAME]
      The image carries its generation parameters: the A1111-style "parameters" text starts with the prompt and
      names the steps, seed and size, and the "sdturbo" JSON chunk holds the same prompt. Prints the text.
  png_checks.py colour SCREENSHOT.png RRGGBB
      Prints how many pixels have exactly that colour (the app's message bars have fixed background colours).
"""
import argparse
import json
import sys

from PIL import Image


def check_parameters(args):
    image = Image.open(args.image)
    image.load()
    texts = getattr(image, "text", {}) or {}
    problems = []
    parameters = texts.get("parameters")
    if parameters is None:
        sys.exit(f"png_checks: {args.image} has no 'parameters' text chunk (chunks: {sorted(texts)})")
    print(parameters)
    if not parameters.startswith(args.prompt):
        problems.append(f"'parameters' does not start with the prompt {args.prompt!r}")
    for field in ("Steps: ", "Seed: ", "Size: "):
        if field not in parameters:
            problems.append(f"'parameters' lacks '{field.strip()}'")
    if args.size and f"Size: {args.size}" not in parameters:
        problems.append(f"'parameters' does not say 'Size: {args.size}'")
    if args.size and "x".join(map(str, image.size)) != args.size:
        problems.append(f"the image is {image.size[0]}x{image.size[1]}, expected {args.size}")
    if args.model and args.model not in parameters:
        problems.append(f"'parameters' does not name the model {args.model!r}")
    ours = texts.get("sdturbo")
    if ours is None:
        problems.append("no 'sdturbo' JSON chunk")
    else:
        try:
            prompt = json.loads(ours).get("prompt")
        except ValueError as error:
            prompt = None
            problems.append(f"the 'sdturbo' chunk is not JSON: {error}")
        if prompt is not None and prompt != args.prompt:
            problems.append(f"the 'sdturbo' chunk's prompt is {prompt!r}")
    if problems:
        sys.exit("png_checks: " + "; ".join(problems))


def count_colour(args):
    target = tuple(int(args.rgb[i:i + 2], 16) for i in (0, 2, 4))
    image = Image.open(args.image).convert("RGB")
    print(sum(count for count, rgb in image.getcolors(image.width * image.height) if rgb == target))


def main():
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("parameters")
    p.add_argument("image")
    p.add_argument("--prompt", required=True)
    p.add_argument("--size")
    p.add_argument("--model")
    p.set_defaults(run=check_parameters)
    c = commands.add_parser("colour")
    c.add_argument("image")
    c.add_argument("rgb")
    c.set_defaults(run=count_colour)
    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
