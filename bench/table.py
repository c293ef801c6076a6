#!/usr/bin/env python3
"""Turn the RESULT lines of 'make bench' into the markdown table of
docs/performance.md: ns/op per operation, the best (lowest) of the rounds,
since the noise of a TCG guest only ever adds time; one column per
kernel/setting, the difference against vanilla in parentheses, and how far
the median of the rounds lies above the best."""
import statistics
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
        rows.setdefault((fs, op), {}).setdefault(col, []).append(float(ns))

if not rows:
    sys.exit("table.py: no RESULT lines")
# Consumers against no consumer, within the same boot of the patched kernel
same = [s for s in ("idle", "snapshot")
        if "patched none" in cols and f"patched {s}" in cols]
print("| fs | operation | " + " | ".join(cols) +
      "".join(f" | {s} vs none, same kernel" for s in same) + " |")
print("|---|---|" + "---:|" * (len(cols) + len(same)))
for (fs, op), vals in rows.items():
    med = {c: min(v) for c, v in vals.items()}
    base = med.get("vanilla none")
    cells = []
    for c in cols:
        v = med.get(c)
        if v is None:
            cells.append("")
            continue
        above = (statistics.median(vals[c]) - v) / v * 100
        cell = f"{v:.0f}"
        if base and c != "vanilla none":
            cell += f" ({(v - base) / base * 100:+.1f}%)"
        cells.append(cell + f" [med +{above:.0f}%]")
    for s in same:
        n, i = med.get("patched none"), med.get(f"patched {s}")
        cells.append(f"{(i - n) / n * 100:+.1f}%" if n and i else "")
    print(f"| {fs} | {op} | " + " | ".join(cells) + " |")
