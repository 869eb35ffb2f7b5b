#!/usr/bin/env python3
# The main loop of one kernel in a `cuobjdump -sass` listing: the backward branch that encloses the most FFMA/HMMA,
# its length and its instructions by opcode. Usage: sass_loop.py LISTING KERNEL [FROM TO] (FROM/TO: hex addresses
# of a range to print instead).
import collections
import re
import sys


def load(path, kernel):
    code, take = [], False
    for line in open(path):
        m = re.match(r"\s+Function : (\S+)", line)
        if m:
            take = m.group(1) == kernel
            continue
        m = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?);", line) if take else None
        if m:
            code.append((int(m.group(1), 16), m.group(2).strip()))
    return code


def opcode(ins):
    return re.sub(r"^@!?U?P[T0-9]+\s+", "", ins).split()[0]


code = load(sys.argv[1], sys.argv[2])
if len(sys.argv) == 5:
    lo, hi = int(sys.argv[3], 16), int(sys.argv[4], 16)
    for a, i in code:
        if lo <= a < hi:
            print(f"{a:#06x}  {i}")
    sys.exit(0)
best = None
for addr, ins in code:
    m = re.search(r"BRA (?:!?U?P\d, )?0x([0-9a-f]+)", ins)
    if m and int(m.group(1), 16) < addr:
        start = int(m.group(1), 16)
        body = [i for a, i in code if start <= a <= addr]
        mma = sum(1 for i in body if "FFMA" in i or "HMMA" in i)
        if best is None or mma > best[2]:
            best = (start, addr, mma, body)
start, end, mma, body = best
counts = collections.Counter(opcode(i) for i in body)
print(f"{sys.argv[2]}: loop {start:#x}-{end:#x}, {len(body)} instructions")
print("  " + ", ".join(f"{k} {v}" for k, v in counts.most_common()))
