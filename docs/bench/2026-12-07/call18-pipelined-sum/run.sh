#!/usr/bin/env bash
# Call 18: the in-kernel split-K sum issues the next slice's loads before adding the one before
# (pipelined-sum-unmeasured.patch beside this script), against the commit it applies to. The same A/B as call 16's
# script, which this runs: the bundle's sdturbo-bench built with the patch, sdturbo-bench-old without it; both sides
# in turns (three rounds, medians of 20, fp16 on the tensor cores), a profile of each (the text encoder's products
# are what it is for), GPU tests of the tensor-core products (new binary) first. Its files come back as e83.tgz.
exec bash "$(dirname "$0")/../call16-eight-warp-round/run.sh" "$@"
