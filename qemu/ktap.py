#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Summarise a guest run: KTAP results of the selftests plus the console.

usage: ktap.py OUTPUT_LOG CONSOLE_LOG [--allow-skip]

Counts every leaf test result in the kselftest-runner KTAP of OUTPUT_LOG
(a test binary that died before reporting its subtests counts as one
failure, and so does every subtest its plan announced but never reported),
scans CONSOLE_LOG for kernel warnings, and prints one line per test binary
and a closing 'Totals: N passed, N failed, N skipped'.  Each failed
subtest is listed with the last lines it printed (its TH_LOG diagnostics).  Exit status 1 if
anything failed, the console is not clean, or (without --allow-skip)
anything was skipped.
"""

import re
import sys

RESULT = re.compile(r'^(not ok|ok) (\d+) (.*?)(?: # (SKIP|skip|TODO|exit=\d+)\b ?(.*))?$')
PLAN = re.compile(r'^1\.\.(\d+)')
# The harness's own lines around a subtest, not what the subtest said.
HARNESS_NOISE = re.compile(r'^(# +(RUN|OK|FAIL|SKIP) |TAP version|# Starting |# time: )')
# guest-selftests.sh's line after each binary: "# NAME: SECONDSs" (NAME
# may carry its stream's filesystems: "snapshot_take[btrfs,tmpfs]")
BINARY_TIME = re.compile(r'^(\S+): (\d+)s$')
# How many lines of a failed subtest's output the summary repeats, so
# that the end of a long log says why it failed.
DIAG_LINES = 8
# What the kernel prints when something went wrong, whatever the test said.
CONSOLE_BAD = re.compile(
    r'WARNING:|BUG:|Oops|Kernel panic|general protection fault|Call Trace'
    r'|lockdep is turned off|DEBUG_LOCKS_WARN_ON|inconsistent lock state'
    r'|possible recursive locking|circular locking dependency'
    r'|suspicious RCU usage|UBSAN:|kmemleak: .* new suspected'
    r'|INFO: task .* blocked')


class Binary:
    def __init__(self, name):
        self.name = name
        self.passed, self.failed, self.skipped = [], [], []
        self.plan = None
        self.top = None  # ('ok'|'not ok', directive)
        self.pending = []  # what the running subtest printed so far
        self.diag = {}  # failed subtest -> its last lines of output
        self.seconds = None  # how long the binary ran

    def counts(self):
        failed = list(self.failed)
        reported = len(self.passed) + len(self.failed) + len(self.skipped)
        if self.plan is not None and reported < self.plan:
            failed += ['%d planned subtests never reported' % (self.plan - reported)]
        if reported == 0 and self.top:
            if self.top[0] == 'ok' and self.top[1] == 'SKIP':
                return 0, failed, ['(whole binary skipped)']
            if self.top[0] == 'ok':
                return 0, failed + ['(no subtest results)'], []
        if self.top is None:
            failed.append('(no result: the run stopped inside this test)')
        elif self.top[0] == 'not ok' and not failed:
            failed.append('(binary exited non-zero: %s)' % (self.top[1] or '?'))
        return len(self.passed), failed, self.skipped


def parse_output(lines, plan=None):
    """The binaries of the document; @plan, when a list, gets the top
    level's announced count."""
    binaries = []
    cur = None
    for raw in lines:
        line = raw.rstrip('\n')
        if line.startswith('# selftests: '):
            cur = Binary(line[len('# selftests: '):].split(': ')[-1])
            binaries.append(cur)
            continue
        if line.startswith('# '):
            if cur is None:
                continue
            inner = line[2:]
            m = BINARY_TIME.match(inner)
            if m and m.group(1) == cur.name:
                cur.seconds = int(m.group(2))
                continue
            m = PLAN.match(inner)
            if m and cur.plan is None:
                cur.plan = int(m.group(1))
                continue
            m = RESULT.match(inner)
            if m:
                status, _, name, directive, reason = m.groups()
                if directive and directive.upper() == 'SKIP':
                    cur.skipped.append('%s: %s' % (name, reason or 'no reason given'))
                elif status == 'ok':
                    cur.passed.append(name)
                else:
                    cur.failed.append(name)
                    cur.diag[name] = cur.pending[-DIAG_LINES:]
                cur.pending = []
            elif not HARNESS_NOISE.match(inner):
                cur.pending.append(inner)
            continue
        m = RESULT.match(line)
        if m and cur is not None:
            cur.top = (m.group(1), m.group(4))
            continue
        m = PLAN.match(line)
        if m and plan is not None and not plan:
            plan.append(int(m.group(1)))
    return binaries


def scan_console(lines):
    return [l.rstrip('\n') for l in lines if CONSOLE_BAD.search(l)]


def summarise(output_lines, console_lines, allow_skip=False, out=sys.stdout):
    plan = []
    binaries = parse_output(output_lines, plan)
    bad_console = scan_console(console_lines)
    tp = tf = ts = 0
    for b in binaries:
        p, f, s = b.counts()
        tp, tf, ts = tp + p, tf + len(f), ts + len(s)
        took = '' if b.seconds is None else ' (%d s)' % b.seconds
        print('%s: %d passed, %d failed, %d skipped%s' % (b.name, p, len(f), len(s), took),
              file=out)
        for name in f:
            print('  FAIL %s' % name, file=out)
            for diag in b.diag.get(name, []):
                print('    | %s' % diag, file=out)
        for name in s:
            print('  SKIP %s' % name, file=out)
    if not binaries:
        print('no selftest results at all', file=out)
        tf += 1
    elif plan and len(binaries) < plan[0]:
        print('%d of %d test binaries never reported (the run stopped; see the '
              'stream-*.log files next to the output)' % (plan[0] - len(binaries), plan[0]),
              file=out)
        tf += 1
    if bad_console:
        print('console: %d suspicious kernel lines:' % len(bad_console), file=out)
        for l in bad_console[:20]:
            print('  ' + l, file=out)
        tf += 1
    else:
        print('console: clean', file=out)
    print('Totals: %d passed, %d failed, %d skipped' % (tp, tf, ts), file=out)
    return 1 if tf or (ts and not allow_skip) else 0


def main(argv):
    args = [a for a in argv[1:] if not a.startswith('--')]
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(args[0], errors='replace') as o, open(args[1], errors='replace') as c:
        return summarise(o.readlines(), c.readlines(), '--allow-skip' in argv)


if __name__ == '__main__':
    sys.exit(main(sys.argv))
