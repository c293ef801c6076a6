#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""live_loads: third-party loads on the live tree against the native fs.

Each load (fio with crc32c verification on four engines, stress-ng's
filesystem stressors, dbench, fs_mark, the kernel's own selftests that
run in a directory) runs twice per filesystem, each
time on a fresh filesystem: once in a plain directory, once in a live tree
with an armed snapshot while "ovl-snapshot take" runs every few seconds in
the background.  Both runs must give the same result, item by item (a fio
job, a stressor, ...).  After the snapshot run every snapshot taken during
it must mount and read whole without an error, and a last snapshot taken
with the tree quiet must equal a "cp -a" copy of its moment, by
"diff -qr --no-dereference" and by a manifest of every attribute, after a
cold remount, while the live tree changes further (the method of
unionmount-testsuite's snapshot mode).

--long runs the long form (make soak): bigger fio jobs, every stressor of
stress-ng's filesystem class, longer dbench and fs_mark runs.
"""
import argparse
import importlib.util
import os
import re
import shlex
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def load_fuzz():
    """snapshot_fuzz's scratch and manifest helpers (installed next to us)."""
    for name in ("snapshot_fuzz", "snapshot_fuzz.py"):
        p = os.path.join(HERE, name)
        if os.path.exists(p):
            from importlib.machinery import SourceFileLoader
            loader = SourceFileLoader("snapshot_fuzz", p)
            spec = importlib.util.spec_from_loader("snapshot_fuzz", loader)
            mod = importlib.util.module_from_spec(spec)
            loader.exec_module(mod)
            return mod
    sys.exit("live_loads: snapshot_fuzz not found next to " + HERE)


fz = load_fuzz()

# stress-ng's filesystem stressors for the bounded form: the ones that
# change data, metadata and names (and verify with --verify where they can)
STRESS_SHORT = ["hdd", "fpunch", "link", "rename", "xattr"]
# Not run: they need devices, mounts or kernel features that are not
# about the tree (binderfs, bind-mount, verity), or report timing only.
STRESS_NOT = {"binderfs", "bind-mount", "verity"}


def sh(cmd, cwd=None, timeout=None):
    r = subprocess.run(cmd, shell=True, cwd=cwd, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=timeout)
    if r.returncode:
        # what a failing tool said, for the log
        lines = r.stdout.strip().splitlines()
        tail = lines if len(lines) <= 8 else lines[:4] + ["..."] + lines[-4:]
        print("#     '%s' exited %d:" % (cmd[:120], r.returncode))
        for ln in tail:
            print("#       " + ln[:200])
    return r.returncode, r.stdout


class Loads:
    def __init__(self, fs, long):
        self.fs, self.long = fs, long

    # Each load runs in @d and returns {item: outcome}.
    def fio(self, d):
        size = "64m" if self.long else "2m"
        jobs = [("psync-rand", "ioengine=psync\nrw=randwrite\nbs=4k"),
                ("libaio-direct", "ioengine=libaio\niodepth=8\ndirect=1\nrw=randwrite\nbs=4k"),
                ("mmap", "ioengine=mmap\nrw=randwrite\nbs=4k"),
                ("io_uring", "ioengine=io_uring\niodepth=8\nrw=randwrite\nbs=8k"),
                # fio 3.33 has no trim for files but through this engine:
                # fallocate(PUNCH_HOLE), nothing to verify
                ("falloc-trim", "ioengine=falloc\nrw=randtrim\nbs=64k\nverify=0")]
        if self.long:
            jobs += [("psync-seq", "ioengine=psync\nrw=write\nbs=64k"),
                     ("fsync-heavy", "ioengine=psync\nrw=randwrite\nbs=4k\nfsync=4")]
        numjobs = 2 if self.long else 1
        out = {}
        for name, spec in jobs:
            job = os.path.join(d, name + ".fio")
            with open(job, "w") as f:
                f.write("[global]\ndirectory=%s\nsize=%s\nnumjobs=%d\n"
                        "verify=crc32c\nverify_backlog=64\nverify_fatal=1\n"
                        "do_verify=1\nfilename_format=$jobname.$jobnum\n"
                        "[%s]\n%s\n" % (d, size, numjobs, name, spec))
            rc, text = sh("fio --output-format=terse --terse-version=3 %s" % job,
                          timeout=1800)
            errs = sorted({ln.split(";")[4] for ln in text.splitlines()
                           if ln.startswith("3;")})
            bad = "verify: bad" in text or "bad magic" in text
            out["fio." + name] = "exit=%d err=%s%s" % (rc, ",".join(errs) or "-",
                                                        " VERIFY-FAILED" if bad else "")
            os.unlink(job)
        return out

    def stress_ng(self, d):
        if self.long:
            rc, text = sh("stress-ng --class filesystem?")
            names = [n for n in text.split(":", 1)[1].split() if n not in STRESS_NOT]
        else:
            names = STRESS_SHORT
        t = 10 if self.long else 2
        out = {}
        for n in names:
            rc, text = sh("stress-ng --%s %d --timeout %d --temp-path %s --verify "
                          "--hdd-bytes 8m --iomix-bytes 8m --fallocate-bytes 8m "
                          "--oomable 2>&1" % (n, 2 if self.long else 1, t, d),
                          timeout=600)
            fails = [ln for ln in text.splitlines() if " fail:" in ln or "FAILED" in ln]
            out["stress-ng." + n] = "exit=%d%s" % (rc, " fail-lines" if fails else "")
        return out

    def dbench(self, d):
        t = 60 if self.long else 3
        rc, text = sh("dbench -D %s -t %d %d 2>&1" % (d, t, 4 if self.long else 2),
                      timeout=900)
        errors = [ln for ln in text.splitlines() if "ERROR" in ln]
        return {"dbench": "exit=%d%s" % (rc, " errors" if errors else "")}

    def fs_mark(self, d):
        n = 2000 if self.long else 200
        # fs_mark wants a directory name of less than 40 bytes: ".", from
        # @d; its log goes next to @d
        rc, text = sh("fs_mark -d . -l ../fs_mark.log -n %d -s 4096 -L %d -t 2 -S 0 -k 2>&1"
                      % (n, 3 if self.long else 2), cwd=d, timeout=900)
        errors = [ln for ln in text.splitlines() if re.search(r"error|failed", ln, re.I)]
        for f in os.listdir(os.path.dirname(d)):
            if f.startswith("fs_mark.log"):
                os.unlink(os.path.join(os.path.dirname(d), f))
        return {"fs_mark": "exit=%d%s" % (rc, " errors" if errors else "")}

    def kselftest(self, d):
        """The kernel's own selftests under tools/testing/selftests/
        filesystems/ that run in a directory of a local filesystem, built
        by selftests/Makefile, pointed at @d."""
        bin_ = os.path.join(HERE, "kselftest")
        out = {}
        # filesystems/fat/run_fat_tests.sh's two cases, on @d instead of
        # a FAT image: exchange two files, in one directory and across two
        for case, new in (("rename_exchange", "new_file"),
                          ("rename_exchange_subdir", "subdir/new_file")):
            c = os.path.join(d, case)
            os.makedirs(os.path.join(c, "subdir"))
            old, new = os.path.join(c, "old_file"), os.path.join(c, new)
            for p, text in ((old, "old\n"), (new, "new\n")):
                with open(p, "w") as f:
                    f.write(text)
            rc, _ = sh("%s/rename_exchange %s %s && sync -f %s && grep -q new %s && "
                       "grep -q old %s" % (bin_, old, new, c, old, new))
            out["kselftest.fat." + case] = "exit=%d" % rc
        # filesystems/dnotify_test watches "." for good and prints a line
        # per signal: a file created in @d every half second until one
        # is reported (or 20 s: none is a failure)
        log = os.path.join(os.path.dirname(d), "dnotify.log")
        with open(log, "w") as f:
            p = subprocess.Popen(["stdbuf", "-oL", os.path.join(bin_, "dnotify_test")],
                                 cwd=d, stdout=f, stderr=subprocess.STDOUT)
        events = 0
        try:
            for i in range(40):
                time.sleep(0.5)
                with open(os.path.join(d, "dn%d" % i), "w") as f:
                    f.write("x")
                with open(log) as f:
                    events = sum(1 for ln in f if ln.startswith("Got event on fd="))
                if events:
                    break
        finally:
            p.terminate()
            p.wait()
        os.unlink(log)
        out["kselftest.filesystems.dnotify_test"] = "events=%s" % ("yes" if events else "none")
        return out

    def all(self):
        return [("fio", self.fio), ("stress-ng", self.stress_ng),
                ("dbench", self.dbench), ("fs_mark", self.fs_mark),
                ("kselftest", self.kselftest)]


def native_ok(item, outcome):
    """A plain run's outcome that makes the comparison mean something."""
    if item == "kselftest.filesystems.dnotify_test":
        return outcome == "events=yes"
    if item.startswith("stress-ng."):
        # 3: no resources for it here, 4: not implemented here (a skip)
        return outcome in ("exit=0", "exit=3", "exit=4")
    return outcome.startswith("exit=0") and outcome.split()[1:] in ([], ["err=0"])


class Taker(threading.Thread):
    """ovl-snapshot take every @period seconds until stopped."""

    def __init__(self, tool, period):
        super().__init__(daemon=True)
        self.tool, self.period = tool, period
        self.stop = threading.Event()
        self.ids, self.errors = [], []

    def run(self):
        while not self.stop.wait(self.period):
            r = self.tool("take", check=False)
            if r.returncode:
                self.errors.append(r.stdout.strip())
            else:
                self.ids.append(int(r.stdout.split()[-1]))


class FsRun:
    def __init__(self, args, fs):
        self.args, self.fs = args, fs
        self.mnt = os.path.join(fz.SCRATCH_BASE, "loads-" + fs)
        self.live = os.path.join(self.mnt, "live")
        self.store = os.path.join(self.mnt, "store")

    def tool(self, *argv, check=True):
        cmd = [self.args.tool, "--store", self.store, argv[0], self.live] + \
            [str(x) for x in argv[1:]]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if check and r.returncode:
            raise RuntimeError("ovl-snapshot %s: exit %d: %s" % (
                " ".join(map(str, argv)), r.returncode, r.stdout.strip()))
        return r

    def umount_view(self, d):
        subprocess.run([self.args.tool, "umount", d], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)

    def fresh(self):
        if fz.scratch(self.fs, self.mnt) is None:
            return False
        os.mkdir(self.live)
        return True

    def loads(self, which):
        res = {}
        for name, fn in Loads(self.fs, self.args.long).all():
            if which and name not in which:
                continue
            d = os.path.join(self.live, name)
            os.mkdir(d)
            t0 = time.time()
            res.update(fn(d))
            print("#   %s %.0f s" % (name, time.time() - t0), flush=True)
        return res

    def plain(self, which):
        if not self.fresh():
            return None
        try:
            return self.loads(which)
        finally:
            fz.umount_fs(self.fs)

    def snapshot(self, which, problems):
        if not self.fresh():
            return None
        try:
            self.tool("init")
            taker = Taker(self.tool, self.args.period)
            taker.start()
            try:
                res = self.loads(which)
            finally:
                taker.stop.set()
                taker.join()
            print("#   %d snapshots taken during the loads" % len(taker.ids), flush=True)
            for e in taker.errors:
                problems.append("take failed: " + e)
            self.read_all([1] + taker.ids, problems)
            self.last_moment(problems)
            return res
        finally:
            fz.umount_fs(self.fs)

    def read_all(self, ids, problems):
        """Every snapshot mounts and reads whole, without an error."""
        view = os.path.join(self.mnt, "view")
        os.makedirs(view, exist_ok=True)
        for sid in ids:
            r = self.tool("mount", sid, view, check=False)
            if r.returncode:
                problems.append("mount of snapshot %d: %s" % (sid, r.stdout.strip()))
                continue
            try:
                fz.manifest(view)
            except OSError as e:
                problems.append("reading snapshot %d: %s" % (sid, e))
            finally:
                self.umount_view(view)

    def last_moment(self, problems):
        """A snapshot of a quiet tree equals cp -a of its moment."""
        ref = os.path.join(self.mnt, "ref")
        view = os.path.join(self.mnt, "view")
        sid = int(self.tool("take").stdout.split()[-1])
        rc, text = sh("cp -a %s %s" % (self.live, ref))
        if rc:
            problems.append("cp -a: " + text)
            return
        want = fz.manifest(self.live)
        # The live tree changes on: remove half of it, rewrite the rest.
        sh("find %s -type f | sort | awk 'NR %% 2' | xargs -r rm -f" % self.live)
        sh("find %s -type f | head -50 | while read -r f; do "
           "echo changed >>\"$f\"; chmod 600 \"$f\"; done" % self.live)
        self.tool("mount", sid, view)
        try:
            for how in ("warm", "cold"):
                if how == "cold":
                    self.umount_view(view)
                    fz.drop_caches()
                    self.tool("mount", sid, view)
                rc, text = sh("diff -qr --no-dereference %s %s" % (ref, view))
                if rc:
                    problems.append("snapshot %d (%s) differs from cp -a of its moment: %s"
                                    % (sid, how, text.strip()[:2000]))
                diff = fz.compare(want, fz.manifest(view))
                if diff:
                    problems.append("snapshot %d (%s): %s" % (sid, how, diff))
        finally:
            self.umount_view(view)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fs", default="ext4,xfs,btrfs,tmpfs")
    ap.add_argument("--loads", default="", help="comma list: fio,stress-ng,dbench,kselftest,fs_mark")
    ap.add_argument("--long", action="store_true", help="the long form (make soak)")
    ap.add_argument("--period", type=float, default=3.0, help="seconds between takes")
    ap.add_argument("--tool", default=os.path.join(HERE, "ovl-snapshot"))
    # make soak passes its settings in the environment (qemu/guest-soak.sh)
    args = ap.parse_args(shlex.split(os.environ.get("LIVE_LOADS_ARGS", "")) + sys.argv[1:])
    which = [x for x in args.loads.split(",") if x]
    fss = args.fs.split(",")
    print("TAP version 13")
    print("1..%d" % len(fss), flush=True)
    failed = skipped = 0
    for n, fs in enumerate(fss, 1):
        run = FsRun(args, fs)
        print("# %s: plain directory" % fs, flush=True)
        plain = run.plain(which)
        if plain is None:
            skipped += 1
            print("ok %d %s # SKIP no scratch disk with serial '%s'" % (n, fs, fs))
            continue
        print("# %s: live tree, snapshot taken every %g s" % (fs, args.period), flush=True)
        problems = []
        try:
            snap = run.snapshot(which, problems)
        except Exception as e:
            snap, problems = {}, problems + ["%s: %s" % (type(e).__name__, e)]
        print("# %-28s %-28s %s" % ("item", "plain", "snapshot"))
        for item in sorted(set(plain) | set(snap)):
            a, b = plain.get(item, "(not run)"), snap.get(item, "(not run)")
            print("# %-28s %-28s %s%s" % (item, a, b, "" if a == b else "   DIFFERS"))
            if a != b:
                problems.append("%s: plain %s, snapshot %s" % (item, a, b))
            elif not native_ok(item, a):
                problems.append("%s: fails on the native filesystem too (%s): "
                                "the load is broken here, it proves nothing" % (item, a))
        for p in problems:
            print("# FAIL %s: %s" % (fs, p))
        if problems:
            failed += 1
            print("not ok %d %s" % (n, fs), flush=True)
        else:
            print("ok %d %s" % (n, fs), flush=True)
    print("# Totals: pass:%d fail:%d skip:%d" % (len(fss) - failed - skipped, failed, skipped))
    sys.exit(1 if failed else (4 if skipped == len(fss) else 0))


if __name__ == "__main__":
    main()
