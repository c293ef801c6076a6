#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Tests of qemu/ktap.py: the summary must fail whenever a test did."""

import io
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ktap  # noqa: E402

PASS = """TAP version 13
1..1
# selftests: ovl-snapshots: smoke
# TAP version 13
# 1..2
# #  RUN           ovl.ext4.a ...
# #            OK  ovl.ext4.a
# ok 1 ovl.ext4.a
# ok 2 ovl.tmpfs.b
# # Totals: pass:2 fail:0 xfail:0 xpass:0 skip:0 error:0
# ovl-exit:0
ok 1 selftests: ovl-snapshots: smoke
"""

BOOT = ["[    0.000000] Linux version 6.12.95\n",
        "[    0.100000] Lock dependency validator: Copyright (c) 2006 Red Hat, Inc.\n",
        "[    0.200000] kasan: KernelAddressSanitizer initialized\n",
        "[    0.000000] rcu: \tRCU lockdep checking is enabled.\n"]


def run(output, console=BOOT, allow_skip=False):
    out = io.StringIO()
    rc = ktap.summarise(io.StringIO(output).readlines(), console, allow_skip, out)
    return rc, out.getvalue()


class TestSummary(unittest.TestCase):
    def test_all_pass(self):
        rc, text = run(PASS)
        self.assertEqual(0, rc, text)
        self.assertIn('Totals: 2 passed, 0 failed, 0 skipped', text)
        self.assertIn('console: clean', text)

    def test_times(self):
        """guest-selftests.sh's time lines: a binary's in its summary line,
        a subtest's never taken for a failure's diagnostics"""
        out = (PASS.replace('# ok 1 ovl.ext4.a\n', '# ok 1 ovl.ext4.a\n# # time: ovl.ext4.a 3 s\n')
               .replace('# ovl-exit:0\n', '# ovl-exit:0\n# smoke: 42s\n')
               .replace('# ok 2 ovl.tmpfs.b', '# not ok 2 ovl.tmpfs.b')
               .replace('ok 1 selftests', 'not ok 1 selftests'))
        rc, text = run(out)
        self.assertEqual(1, rc)
        self.assertIn('smoke: 1 passed, 1 failed, 0 skipped (42 s)', text)
        self.assertNotIn('time:', text)

    def test_failed_subtest(self):
        rc, text = run(PASS.replace('# ok 2 ovl.tmpfs.b', '# not ok 2 ovl.tmpfs.b')
                       .replace('ok 1 selftests', 'not ok 1 selftests'))
        self.assertEqual(1, rc)
        self.assertIn('FAIL ovl.tmpfs.b', text)
        self.assertIn('1 passed, 1 failed', text)

    def test_failed_subtest_diagnostics(self):
        rc, text = run(PASS.replace('# ok 2 ovl.tmpfs.b',
                                    '# #  RUN           ovl.tmpfs.b ...\n'
                                    '# # t.c:12:b:Expected 0 (0) == x (1)\n'
                                    '# # t.c:12:b:snapshot 1, cold\n'
                                    '# #          FAIL  ovl.tmpfs.b\n'
                                    '# not ok 2 ovl.tmpfs.b')
                       .replace('ok 1 selftests', 'not ok 1 selftests'))
        self.assertEqual(1, rc)
        lines = text.splitlines()
        i = lines.index('  FAIL ovl.tmpfs.b')
        self.assertEqual(['    | # t.c:12:b:Expected 0 (0) == x (1)',
                          '    | # t.c:12:b:snapshot 1, cold'], lines[i + 1:i + 3])
        self.assertNotIn('RUN', text)
        self.assertNotIn('ovl.ext4.a', text)

    def test_missing_subtests(self):
        rc, text = run(PASS.replace('# ok 2 ovl.tmpfs.b\n', ''))
        self.assertEqual(1, rc)
        self.assertIn('1 planned subtests never reported', text)

    def test_binary_crashed_without_results(self):
        rc, text = run("TAP version 13\n1..1\n# selftests: ovl-snapshots: smoke\n"
                       "# ovl-exit:139\nnot ok 1 selftests: ovl-snapshots: smoke # exit=139\n")
        self.assertEqual(1, rc)
        self.assertIn('binary exited non-zero', text)

    def test_run_stopped_inside_test(self):
        rc, text = run(PASS.split('# ok 2')[0])
        self.assertEqual(1, rc)
        self.assertIn('the run stopped inside this test', text)

    def test_stream_names(self):
        """a binary run in a stream: NAME[FS,FS], its time line too"""
        out = (PASS.replace('smoke', 'smoke[btrfs,tmpfs]')
               .replace('# ovl-exit:0\n', '# ovl-exit:0\n# smoke[btrfs,tmpfs]: 7s\n'))
        rc, text = run(out)
        self.assertEqual(0, rc, text)
        self.assertIn('smoke[btrfs,tmpfs]: 2 passed, 0 failed, 0 skipped (7 s)', text)

    def test_binaries_never_reported(self):
        """the top-level plan counts: a run that stopped between binaries fails"""
        rc, text = run(PASS.replace('1..1\n# selftests', '1..3\n# selftests', 1))
        self.assertEqual(1, rc)
        self.assertIn('2 of 3 test binaries never reported', text)

    def test_no_results(self):
        rc, text = run('')
        self.assertEqual(1, rc)
        self.assertIn('no selftest results', text)

    def test_skip_fails_unless_allowed(self):
        skipped = PASS.replace('# ok 2 ovl.tmpfs.b', '# ok 2 ovl.tmpfs.b # SKIP no disk')
        rc, text = run(skipped)
        self.assertEqual(1, rc)
        self.assertIn('SKIP ovl.tmpfs.b: no disk', text)
        self.assertIn('1 passed, 0 failed, 1 skipped', text)
        rc, _ = run(skipped, allow_skip=True)
        self.assertEqual(0, rc)

    def test_console_warning_fails(self):
        for bad in ['[  5.1] WARNING: CPU: 0 PID: 1 at fs/x.c:1 f+0x1/0x2\n',
                    '[  5.1] BUG: KASAN: slab-use-after-free in f+0x1\n',
                    '[  5.1] WARNING: possible circular locking dependency detected\n',
                    '[  5.1] Call Trace:\n',
                    '[  5.1] WARNING: suspicious RCU usage\n',
                    '[  5.1] UBSAN: shift-out-of-bounds in fs/x.c:1:2\n',
                    '[  5.1] Kernel panic - not syncing: Attempted to kill init!\n']:
            rc, text = run(PASS, BOOT + [bad])
            self.assertEqual(1, rc, bad)
            self.assertIn('suspicious kernel lines', text)
            self.assertIn('Totals: 2 passed, 1 failed', text)


if __name__ == '__main__':
    unittest.main()
