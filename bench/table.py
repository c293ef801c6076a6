#!/usr/bin/env python3
"""Turn the RESULT lines of 'make bench' into the markdown table of
docs/performance.md: ns/op per operation, one column per kernel/setting,
with the overhead against vanilla in parentheses."""
import sys
from collections import OrderedDict

rows = OrderedDict()
cols = []
for path in sys.argv[1:]:
    for line in open(path, errors="replace"):
        f = line.split()
        if len(f) != 6 or f[0] != "RESULT":
            continue
        _, kernel, fs, setting, op, ns = f
        col = f"{kernel} {setting}"
        if col not in cols:
            cols.append(col)
        rows.setdefault((fs, op), {})[col] = float(ns)

if not rows:
    sys.exit("table.py: no RESULT lines")
print("| fs | operation | " + " | ".join(cols) + " |")
print("|---|---|" + "---:|" * len(cols))
for (fs, op), vals in rows.items():
    base = vals.get("vanilla none")
    cells = []
    for c in cols:
        v = vals.get(c)
        if v is None:
            cells.append("")
        elif base and c != "vanilla none":
            cells.append(f"{v:.0f} ({(v - base) / base * 100:+.1f}%)")
        else:
            cells.append(f"{v:.0f}")
    print(f"| {fs} | {op} | " + " | ".join(cells) + " |")
