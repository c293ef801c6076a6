#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Indent a test binary's TAP under the runner's (a "# " before each line),
line by line as it comes, and after each of its results ("ok N name",
"not ok N name") a comment with the seconds that test took, so that a log
says where the time of a run went."""
import re
import sys
import time

RESULT = re.compile(r"^(not )?ok \d+ (\S+)")


def main():
    last = time.monotonic()
    for line in sys.stdin:
        line = line.rstrip("\n")
        sys.stdout.write("# %s\n" % line)
        m = RESULT.match(line)
        if m:
            now = time.monotonic()
            sys.stdout.write("# # time: %s %.0f s\n" % (m.group(2), now - last))
            last = now
        sys.stdout.flush()


if __name__ == "__main__":
    main()
