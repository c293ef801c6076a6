#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""snapshot_fuzz: a randomized differential tester of ovl-snapshot.

Seeded workers run random operations on a live tree of a few hundred
entries while the controller, with the workers paused, takes snapshots
with ovl-snapshot and records a manifest of the tree at each moment (path,
type, mode, owner, size, content hash, symlink target, device number,
user xattrs, mtime, hard-link groups).  At random points and at the end
every snapshot is mounted and compared with its manifest: right after the
mount, warm after more live changes, after drop_caches and after a
remount; random snapshots (oldest and middle) are deleted and the rest
checked again, and the space of a deleted oldest one must come back.
The method of unionmount-testsuite's snapshot mode runs beside the
manifests: at every take a "cp -a" backup of the tree is made, and every
snapshot, mounted again with cold caches while takes go on, must equal its
backup by "diff -qr --no-dereference".  Views that stay mounted across a
take must show their moment or fail loudly: every name and attribute they
still return must be their moment's, and the only error allowed is ESTALE
(the tool's documented limit: a take outdates mounted older snapshots).
Any errno a native filesystem would not give for the operation (EBUSY,
EFAULT, EIO, ESTALE, ...) is a failure too.

One worker makes a run a pure function of its seed.  A failure prints the
seed, the first difference and the tail of the operation log, and saves
the whole log (--log-dir); --replay LOG runs a log again on one worker,
--shrink then removes operations while the run still fails.

Runs in the guest (qemu/boot.sh), as root, with the scratch disks of
qemu/x86_64.conf; prints KTAP, exit 0 when every run passed.
"""
import argparse
import ctypes
import errno
import hashlib
import json
import mmap
import os
import shlex
import random
import re
import shutil
import stat
import subprocess
import sys
import threading
import time

SCRATCH_BASE = "/tmp/ovl-selftests"
MKFS = {"ext4": "mkfs.ext4 -q -F", "xfs": "mkfs.xfs -q -f",
        "btrfs": "mkfs.btrfs -q -f", "tmpfs": None}
HERE = os.path.dirname(os.path.abspath(__file__))

RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2
FALLOC_KEEP_SIZE, FALLOC_PUNCH_HOLE = 0x01, 0x02
FALLOC_COLLAPSE_RANGE, FALLOC_ZERO_RANGE, FALLOC_INSERT_RANGE = 0x08, 0x10, 0x20

# What a native filesystem may answer to the operations below when the
# tree changed under them or they do not apply; anything else fails a run.
EXPECTED = {errno.ENOENT, errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR,
            errno.EISDIR, errno.EINVAL, errno.EOPNOTSUPP, errno.EPERM,
            errno.ENODATA, errno.ELOOP, errno.EMLINK, errno.ENXIO,
            errno.ENAMETOOLONG, errno.E2BIG, errno.ERANGE}

libc = ctypes.CDLL(None, use_errno=True)
libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int,
                           ctypes.c_char_p, ctypes.c_uint]
libc.linkat.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int,
                        ctypes.c_char_p, ctypes.c_int]
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_longlong,
                           ctypes.c_longlong]
AT_FDCWD, AT_SYMLINK_FOLLOW = -100, 0x400
SAME_SPECIAL = re.compile(r"^File .* is a (character special file|block special file|fifo)"
                          r" while file .* is a \1$")


def sh(cmd, check=True):
    r = subprocess.run(cmd, shell=True, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if check and r.returncode:
        raise RuntimeError("'%s' exited %d: %s" % (cmd, r.returncode,
                                                    r.stdout.strip()))
    return r


def renameat2(a, b, flags):
    if libc.renameat2(AT_FDCWD, a.encode(), AT_FDCWD, b.encode(), flags):
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), a)


def linkat_fd(fd, dst):
    """linkat() of an open file (O_TMPFILE) to @dst, through /proc"""
    if libc.linkat(AT_FDCWD, b"/proc/self/fd/%d" % fd, AT_FDCWD, dst.encode(),
                   AT_SYMLINK_FOLLOW):
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), dst)


def fallocate(fd, mode, off, length):
    if libc.fallocate(fd, mode, off, length):
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def data(dseed, n):
    return random.Random(dseed).randbytes(n)


class Failure(Exception):
    pass


# -- scratch filesystems ---------------------------------------------------

def umount_tree(top):
    """Unmount everything at or below @top, deepest first."""
    while True:
        deepest = ""
        with open("/proc/self/mountinfo") as f:
            for line in f:
                mp = line.split()[4].encode().decode("unicode_escape")
                if (mp == top or mp.startswith(top + "/")) and \
                        len(mp) > len(deepest):
                    deepest = mp
        if not deepest:
            return
        if sh("umount '%s'" % deepest, check=False).returncode and \
                sh("umount -l '%s'" % deepest, check=False).returncode:
            return


def umount_fs(fs):
    """Unmount whatever a test on @fs left mounted: everything at or below
    a SCRATCH_BASE/TAG-@fs directory.  Only @fs's: the tests of the other
    filesystems may be running at the same time (qemu/guest-selftests.sh)."""
    tops = set()
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = line.split()[4].encode().decode("unicode_escape")
            if mp.startswith(SCRATCH_BASE + "/"):
                top = mp[len(SCRATCH_BASE) + 1:].split("/")[0]
                if top.endswith("-" + fs) and len(top) > len(fs) + 1:
                    tops.add(os.path.join(SCRATCH_BASE, top))
    for top in tops:
        umount_tree(top)


def find_disk(serial):
    for d in sorted(os.listdir("/sys/block")):
        try:
            with open("/sys/block/%s/serial" % d) as f:
                if f.read().strip() == serial:
                    return "/dev/" + d
        except OSError:
            pass
    return None


def scratch(fs, mnt):
    """A fresh @fs on @mnt; None when its disk is missing."""
    umount_fs(fs)
    os.makedirs(mnt, exist_ok=True)
    if MKFS[fs] is None:
        sh("mount -t tmpfs -o size=1g tmpfs %s" % mnt)
        return mnt
    dev = find_disk(fs)
    if not dev:
        return None
    for _ in range(600):
        try:
            os.close(os.open(dev, os.O_RDONLY | os.O_EXCL))
            break
        except OSError as e:
            if e.errno != errno.EBUSY:
                raise
            time.sleep(0.1)
    sh("%s %s" % (MKFS[fs], dev))
    sh("mount %s %s" % (dev, mnt))
    return mnt


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3")


# -- manifests -------------------------------------------------------------

def entry(path, st):
    e = {"mode": st.st_mode, "uid": st.st_uid, "gid": st.st_gid}
    if stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode):
        e["mtime"] = st.st_mtime_ns
    if stat.S_ISREG(st.st_mode):
        e["size"] = st.st_size
        h = hashlib.sha1()
        with open(path, "rb") as f:
            while True:
                b = f.read(1 << 20)
                if not b:
                    break
                h.update(b)
        e["sha1"] = h.hexdigest()
    elif stat.S_ISLNK(st.st_mode):
        e["target"] = os.readlink(path)
        e["mtime"] = st.st_mtime_ns
    elif stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
        e["rdev"] = st.st_rdev
    x = {}
    if not stat.S_ISLNK(st.st_mode):
        for name in os.listxattr(path, follow_symlinks=False):
            if name.startswith("user."):
                v = os.getxattr(path, name, follow_symlinks=False)
                x[name] = hashlib.sha1(v).hexdigest()
    if x:
        e["xattrs"] = x
    return e


def manifest(root):
    """{relative path: attributes}, plus the hard-link groups."""
    m, inos = {}, {}

    def walk(rel):
        d = os.path.join(root, rel) if rel else root
        for name in sorted(os.listdir(d)):
            r = os.path.join(rel, name) if rel else name
            p = os.path.join(root, r)
            st = os.lstat(p)
            m[r] = entry(p, st)
            if not stat.S_ISDIR(st.st_mode):
                inos.setdefault((st.st_dev, st.st_ino), []).append(r)
            else:
                walk(r)
    walk("")
    groups = sorted(sorted(g) for g in inos.values() if len(g) > 1)
    return {"entries": m, "links": groups}


def describe(e):
    if e is None:
        return "(absent)"
    return " ".join("%s=%s" % (k, oct(v) if k == "mode" else v)
                    for k, v in sorted(e.items()))


def compare(ref, got):
    """The first difference of @got from @ref, or None."""
    a, b = ref["entries"], got["entries"]
    for p in sorted(set(a) | set(b)):
        if a.get(p) != b.get(p):
            return "%s: snapshot has %s; its moment had %s" % (
                p, describe(b.get(p)), describe(a.get(p)))
    if ref["links"] != got["links"]:
        return "hard-link groups: snapshot has %s; its moment had %s" % (
            got["links"], ref["links"])
    return None


# -- the operations ----------------------------------------------------------

class Tree:
    """The live tree and what the workers keep open in it."""

    def __init__(self, live):
        self.live = live
        self.fds = {}		# (worker, slot) -> fd
        self.maps = {}		# (worker, slot) -> (fd, mmap)
        # Stores through mappings and everything that can shrink a file
        # take this lock, so that no store lands beyond EOF (SIGBUS).
        self.size_lock = threading.Lock()
        self.count = 0		# entries, counted while the workers pause

    def p(self, rel):
        return os.path.join(self.live, rel)

    # Random choices, by a walk from the root.
    def pick(self, rng, want="any"):
        rel = ""
        for _ in range(10):
            try:
                names = sorted(os.listdir(self.p(rel)))
            except OSError:
                return None
            if not names:
                break
            name = rng.choice(names)
            r = os.path.join(rel, name) if rel else name
            try:
                st = os.lstat(self.p(r))
            except OSError:
                return None
            isdir = stat.S_ISDIR(st.st_mode)
            if isdir and (want in ("dir", "any")) and rng.random() < 0.35:
                return r
            if isdir:
                rel = r
                continue
            if want == "any" or (want == "nondir") or \
                    (want == "file" and stat.S_ISREG(st.st_mode)):
                return r
            if want == "dir":
                break
            return None
        if want in ("dir", "any") and rel:
            return rel
        return "" if want == "dir" else None

    def newname(self, rng, w):
        d = self.pick(rng, "dir")
        if d is None:
            d = ""
        n = "w%d_%d" % (w, rng.randrange(100000))
        return os.path.join(d, n) if d else n

    def gen(self, rng, w):
        """A concrete operation of worker @w, chosen with @rng."""
        k = rng.random()
        F = lambda: self.pick(rng, "file")
        # Keep the tree at a few hundred entries: past 400, most of the
        # operations that add a name remove one instead.
        if self.count > 400 and 0.33 <= k < 0.53 and rng.random() < 0.8:
            k = 0.53 + rng.random() * 0.09
        if k < 0.12:
            return ("write", F(), rng.randrange(1 << 18), rng.randrange(1, 1 << 15),
                    rng.randrange(1 << 30))
        if k < 0.17:
            return ("trunc", F(), rng.randrange(1 << 18))
        if k < 0.21:
            mode = rng.choice([FALLOC_KEEP_SIZE | FALLOC_PUNCH_HOLE, FALLOC_ZERO_RANGE,
                               FALLOC_COLLAPSE_RANGE, FALLOC_INSERT_RANGE, 0])
            return ("falloc", F(), mode, rng.randrange(64) * 4096,
                    rng.randrange(1, 16) * 4096)
        if k < 0.24:
            return ("chmod", self.pick(rng), rng.choice([0o644, 0o600, 0o755, 0o4755, 0o1777]))
        if k < 0.26:
            return ("chown", self.pick(rng), rng.choice([0, 1, 1000]), rng.choice([0, 2, 1000]))
        if k < 0.29:
            return ("utime", self.pick(rng), rng.randrange(1 << 31) * 10**9 + rng.randrange(10**9),
                    rng.randrange(1 << 31) * 10**9 + rng.randrange(10**9))
        if k < 0.32:
            return ("setx", self.pick(rng), "user.x%d" % rng.randrange(4),
                    rng.randrange(1 << 30), rng.randrange(1, 200))
        if k < 0.33:
            return ("rmx", self.pick(rng), "user.x%d" % rng.randrange(4))
        if k < 0.40:
            return ("create", self.newname(rng, w), rng.randrange(1 << 16), rng.randrange(1 << 30))
        if k < 0.44:
            return ("mkdir", self.newname(rng, w))
        if k < 0.45:
            return ("mknod", self.newname(rng, w), rng.choice(["fifo", "chr"]))
        if k < 0.47:
            return ("symlink", rng.choice(["x", "../y", "/abs/z", self.pick(rng) or "q"]),
                    self.newname(rng, w))
        if k < 0.53:
            return ("link", self.pick(rng, "nondir"), self.newname(rng, w))
        if k < 0.59:
            return ("unlink", self.pick(rng, "nondir"))
        if k < 0.61:
            return ("rmdir", self.pick(rng, "dir"))
        if k < 0.62:
            return ("rmtree", self.pick(rng, "dir"))
        if k < 0.70:
            src = self.pick(rng)
            dst = self.pick(rng) if rng.random() < 0.4 else self.newname(rng, w)
            return ("rename", src, dst, rng.choice([0, 0, 0, RENAME_NOREPLACE]))
        if k < 0.73:
            return ("rename", self.pick(rng), self.pick(rng), RENAME_EXCHANGE)
        if k < 0.75:
            return ("tmpfile", self.newname(rng, w), rng.randrange(1 << 15), rng.randrange(1 << 30))
        if k < 0.76:
            return ("otrunc", F())
        slot = rng.randrange(3)
        if k < 0.79:
            return ("fdopen", w, slot, F())
        if k < 0.86:
            return ("fdwrite", w, slot, rng.randrange(1 << 18), rng.randrange(1, 1 << 14),
                    rng.randrange(1 << 30))
        if k < 0.87:
            return ("fdtrunc", w, slot, rng.randrange(1 << 18))
        if k < 0.89:
            return ("map", w, slot, F())
        if k < 0.97:
            return ("mstore", w, slot, rng.random(), rng.randrange(1, 1 << 13),
                    rng.randrange(1 << 30))
        return ("fdclose", w, slot)

    def run(self, op):
        """Execute @op; None, or the errno it failed with."""
        try:
            self._run(op)
            return None
        except OSError as e:
            return e.errno or errno.EIO

    def _run(self, op):
        o, a = op[0], op[1:]
        P = self.p
        if None in a:		# nothing of that kind was found
            return
        if o == "write":
            fd = os.open(P(a[0]), os.O_WRONLY | os.O_NOFOLLOW)
            try:
                os.pwrite(fd, data(a[3], a[2]), a[1])
            finally:
                os.close(fd)
        elif o in ("trunc", "otrunc"):
            with self.size_lock:
                if o == "trunc":
                    os.truncate(P(a[0]), a[1])
                else:
                    os.close(os.open(P(a[0]), os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW))
        elif o == "falloc":
            fd = os.open(P(a[0]), os.O_WRONLY | os.O_NOFOLLOW)
            try:
                with self.size_lock:
                    fallocate(fd, a[1], a[2], a[3])
            finally:
                os.close(fd)
        elif o == "chmod":
            if not os.path.islink(P(a[0])):
                os.chmod(P(a[0]), a[1])
        elif o == "chown":
            os.chown(P(a[0]), a[1], a[2], follow_symlinks=False)
        elif o == "utime":
            os.utime(P(a[0]), ns=(a[1], a[2]), follow_symlinks=False)
        elif o == "setx":
            os.setxattr(P(a[0]), a[1], data(a[2], a[3]), follow_symlinks=False)
        elif o == "rmx":
            os.removexattr(P(a[0]), a[1], follow_symlinks=False)
        elif o == "create":
            fd = os.open(P(a[0]), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                os.write(fd, data(a[2], a[1]))
            finally:
                os.close(fd)
        elif o == "mkdir":
            os.mkdir(P(a[0]), 0o755)
        elif o == "mknod":
            if a[1] == "fifo":
                os.mkfifo(P(a[0]), 0o644)
            else:
                os.mknod(P(a[0]), 0o644 | stat.S_IFCHR, os.makedev(1, 3))
        elif o == "symlink":
            os.symlink(a[0], P(a[1]))
        elif o == "link":
            os.link(P(a[0]), P(a[1]), follow_symlinks=False)
        elif o == "unlink":
            os.unlink(P(a[0]))
        elif o == "rmdir":
            if a[0]:
                os.rmdir(P(a[0]))
        elif o == "rmtree":
            if a[0]:
                shutil.rmtree(P(a[0]))
        elif o == "rename":
            if a[0] and a[1]:
                renameat2(P(a[0]), P(a[1]), a[2])
        elif o == "tmpfile":
            d = os.path.dirname(P(a[0]))
            fd = os.open(d, os.O_TMPFILE | os.O_RDWR, 0o640)
            try:
                os.write(fd, data(a[2], a[1]))
                linkat_fd(fd, P(a[0]))
            finally:
                os.close(fd)
        elif o == "fdopen":
            key = (a[0], a[1])
            fd = os.open(P(a[2]), os.O_RDWR | os.O_NOFOLLOW)
            old = self.fds.pop(key, None)
            self.fds[key] = fd
            if old is not None:
                os.close(old)
        elif o in ("fdwrite", "fdtrunc"):
            fd = self.fds.get((a[0], a[1]))
            if fd is None:
                return
            if o == "fdwrite":
                os.pwrite(fd, data(a[4], a[3]), a[2])
            else:
                with self.size_lock:
                    os.ftruncate(fd, a[2])
        elif o == "fdclose":
            fd = self.fds.pop((a[0], a[1]), None)
            if fd is not None:
                os.close(fd)
        elif o == "map":
            key = (a[0], a[1])
            fd = os.open(P(a[2]), os.O_RDWR | os.O_NOFOLLOW)
            try:
                with self.size_lock:
                    n = min(os.fstat(fd).st_size, 1 << 18)
                    if not n:
                        raise OSError(errno.EINVAL, "empty")
                    m = mmap.mmap(fd, n, mmap.MAP_SHARED,
                                  mmap.PROT_READ | mmap.PROT_WRITE)
            except BaseException:
                os.close(fd)
                raise
            old = self.maps.pop(key, None)
            self.maps[key] = (fd, m)
            if old:
                old[1].close()
                os.close(old[0])
        elif o == "mstore":
            ent = self.maps.get((a[0], a[1]))
            if not ent:
                return
            fd, m = ent
            with self.size_lock:
                n = min(len(m), os.fstat(fd).st_size)
                if n <= 0:
                    return
                off = int(a[2] * n)
                b = data(a[4], min(a[3], n - off))
                m[off:off + len(b)] = b
        else:
            raise ValueError("unknown operation %r" % (op,))

    def close_all(self):
        for fd, m in self.maps.values():
            m.close()
            os.close(fd)
        for fd in self.fds.values():
            os.close(fd)
        self.maps.clear()
        self.fds.clear()


def initial_tree(live, rng, entries=300):
    """A deterministic tree of about @entries entries, 5 levels deep."""
    dirs = [""]
    made = 0
    while made < entries:
        d = rng.choice(dirs)
        depth = d.count("/") + (1 if d else 0)
        r = rng.random()
        name = os.path.join(d, "i%d" % made) if d else "i%d" % made
        p = os.path.join(live, name)
        if r < 0.2 and depth < 5:
            os.mkdir(p)
            dirs.append(name)
        elif r < 0.85:
            with open(p, "wb") as f:
                f.write(data(rng.randrange(1 << 30), rng.choice([0, 10, 4096, 30000, 200000])))
            if rng.random() < 0.2:
                os.setxattr(p, "user.x0", b"init")
        elif r < 0.92:
            os.symlink("t%d" % made, p)
        else:
            files = [n for n in os.listdir(os.path.join(live, d))
                     if os.path.isfile(os.path.join(live, d, n))
                     and not os.path.islink(os.path.join(live, d, n))]
            if files:
                os.link(os.path.join(live, d, rng.choice(files)), p)
            else:
                os.mkfifo(p)
        made += 1


# -- one run -----------------------------------------------------------------

class Run:
    def __init__(self, args, fs, seed, log=None):
        self.args, self.fs, self.seed = args, fs, seed
        self.mnt = os.path.join(SCRATCH_BASE, "fuzz-" + fs)
        self.live = os.path.join(self.mnt, "live")
        self.store = os.path.join(self.mnt, "store")
        self.views = os.path.join(self.mnt, "views")
        self.backups = os.path.join(self.mnt, "backup")
        self.replay = log
        self.log = []		# [worker, op, errno or None]
        self.manifests = {}	# snapshot id -> manifest
        self.mounted = set()
        self.ctl = random.Random(seed)
        self.lock = threading.Lock()
        self.stats = {"ops": 0, "takes": 0, "checks": 0, "deletes": 0, "failed_ops": 0,
                      "diffs": 0, "held": 0, "stale": 0}

    def tool(self, *argv, check=True):
        cmd = [self.args.tool, "--store", self.store] + [str(x) for x in argv]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if check and r.returncode:
            raise Failure("ovl-snapshot %s exited %d: %s" % (
                " ".join(str(x) for x in argv), r.returncode, r.stdout.strip()))
        return r

    def note(self, w, op, err):
        with self.lock:
            self.log.append([w, list(op), err])
            self.stats["ops"] += 1
            if err is not None:
                self.stats["failed_ops"] += 1
        if err is not None and err not in EXPECTED:
            raise Failure("%s failed with %s, which the native filesystem does not give" % (
                op, errno.errorcode.get(err, err)))

    # Control actions: the workers are paused.
    def take(self):
        held = sorted(self.mounted)
        r = self.tool("take", self.live)
        sid = int(r.stdout.split()[-1])
        self.record(sid)
        self.stats["takes"] += 1
        self.log.append([-1, ["take", sid], None])
        # Views mounted before the take: their moment, or ESTALE.
        for v in held:
            self.read_held(v)
        self.umount_views()

    def record(self, sid):
        """The reference of snapshot @sid: a manifest and a cp -a backup."""
        self.manifests[sid] = manifest(self.live)
        os.makedirs(self.backups, exist_ok=True)
        # A full copy: a reflinked one would share extents with the
        # snapshot's cloned copy-ups, and deleting the snapshot would free
        # less than delete() checks that it frees.
        sh("cp -a %s %s/%d" % (self.live, self.backups, sid))

    def read_held(self, sid):
        """Read view @sid, mounted before a take, against its manifest.

        Every directory listing and every entry it returns must be its
        moment's; ESTALE is the only error allowed, and it is counted."""
        ref = self.manifests[sid]["entries"]
        kids = {}
        for r in ref:
            kids.setdefault(os.path.dirname(r), set()).add(os.path.basename(r))
        root = os.path.join(self.views, str(sid))
        self.stats["held"] += 1
        todo = [""]
        while todo:
            rel = todo.pop()
            try:
                names = set(os.listdir(os.path.join(root, rel) if rel else root))
            except OSError as e:
                self.held_error(sid, "listing '%s'" % rel, e)
                continue
            if names != kids.get(rel, set()):
                raise Failure("snapshot %d (held across a take): '%s' lists %s; "
                              "its moment had %s" % (sid, rel, sorted(names),
                                                     sorted(kids.get(rel, set()))))
            for name in sorted(names):
                r = os.path.join(rel, name) if rel else name
                p = os.path.join(root, r)
                try:
                    got = entry(p, os.lstat(p))
                except OSError as e:
                    self.held_error(sid, r, e)
                    continue
                if got != ref[r]:
                    raise Failure("snapshot %d (held across a take): %s: snapshot has %s; "
                                  "its moment had %s" % (sid, r, describe(got),
                                                         describe(ref[r])))
                if stat.S_ISDIR(ref[r]["mode"]):
                    todo.append(r)

    def held_error(self, sid, what, e):
        """ESTALE from a view held across a take is counted; anything else fails."""
        if e.errno != errno.ESTALE:
            raise Failure("snapshot %d (held across a take): %s: %s" % (sid, what, e))
        self.stats["stale"] += 1

    def diff_backups(self, how):
        """unionmount-testsuite's check: each view equals its cp -a backup."""
        for sid in sorted(self.mounted):
            self.stats["diffs"] += 1
            r = sh("diff -qr --no-dereference %s/%d %s/%d" % (
                self.backups, sid, self.views, sid), check=False)
            # diff cannot compare two devices or two FIFOs and says so; the
            # manifest compares their type, mode and device number.
            out = [x for x in r.stdout.splitlines() if not SAME_SPECIAL.match(x)]
            if r.returncode not in (0, 1) or out:
                raise Failure("snapshot %d (%s) differs from the cp -a backup of its "
                              "moment: %s" % (sid, how, "\n".join(out)[:2000]))

    def ids(self):
        return sorted(self.manifests)

    def rearm(self):
        """Disarm the active snapshot (unmount its overlay) and arm it again,
        as at a reboot: nothing changed meanwhile, so arm must find nothing."""
        self.umount_views()
        self.log.append([-1, ["rearm"], None])
        sh("umount %s/%d/root" % (self.store, self.ids()[-1]))
        r = self.tool("arm", self.live, check=False)
        if r.returncode:
            raise Failure("arm after an unmount with no change exited %d: %s" % (
                r.returncode, r.stdout.strip()))

    def mount_views(self):
        for sid in self.ids():
            if sid in self.mounted:
                continue
            d = os.path.join(self.views, str(sid))
            os.makedirs(d, exist_ok=True)
            self.tool("mount", self.live, sid, d)
            self.mounted.add(sid)

    def umount_views(self):
        for sid in sorted(self.mounted):
            self.tool("umount", os.path.join(self.views, str(sid)))
        self.mounted.clear()

    def check(self, how):
        self.stats["checks"] += 1
        for sid in sorted(self.mounted):
            try:
                got = manifest(os.path.join(self.views, str(sid)))
            except OSError as e:
                raise Failure("snapshot %d (%s): reading it failed: %s" % (sid, how, e))
            diff = compare(self.manifests[sid], got)
            if diff:
                raise Failure("snapshot %d (%s): %s" % (sid, how, diff))

    def verify(self, keep_mounted):
        self.log.append([-1, ["verify"], None])
        warm = bool(self.mounted)
        self.mount_views()
        self.check("warm, after live changes" if warm else "fresh mount")
        drop_caches()
        self.check("after drop_caches")
        self.umount_views()
        drop_caches()
        self.mount_views()
        self.check("remounted cold")
        self.diff_backups("remounted cold")
        if not keep_mounted:
            self.umount_views()

    def used_blocks(self, path):
        """Bytes allocated to the inodes below @path, each inode once."""
        seen = {}
        for dp, dns, fns in os.walk(path):
            for x in dns + fns:
                try:
                    st = os.lstat(os.path.join(dp, x))
                except OSError:
                    continue
                seen[(st.st_dev, st.st_ino)] = st.st_blocks
        return sum(seen.values()) * 512

    def delete(self, sid=None):
        ids = self.ids()
        if len(ids) < 2:
            return
        if sid is None:
            sid = self.ctl.choice(ids[:-1])
        self.umount_views()
        oldest = sid == ids[0]
        used = self.used_blocks(os.path.join(self.store, str(sid)))
        os.sync()
        before = os.statvfs(self.mnt)
        self.tool("delete", self.live, sid)
        self.log.append([-1, ["delete", sid], None])
        del self.manifests[sid]
        shutil.rmtree(os.path.join(self.backups, str(sid)))
        self.stats["deletes"] += 1
        if os.path.exists(os.path.join(self.store, str(sid))):
            raise Failure("delete %d left %s/%d" % (sid, self.store, sid))
        if self.fs == "btrfs":
            sh("btrfs filesystem sync %s" % self.mnt, check=False)
        os.sync()
        after = os.statvfs(self.mnt)
        freed = (after.f_bfree - before.f_bfree) * after.f_frsize
        # The oldest snapshot's copies are read by no other snapshot: its
        # space must come back (half of it at least: metadata and block
        # sharing make the two counts differ).
        if oldest and used > (4 << 20) and freed < used // 2:
            raise Failure("delete of the oldest snapshot %d freed %d bytes of its %d" % (
                sid, freed, used))

    # Workers
    def phase(self, nops, rngs):
        tree = self.tree
        errors = []

        def worker(w, n):
            try:
                for _ in range(n):
                    op = tree.gen(rngs[w], w)
                    self.note(w, op, tree.run(op))
            except BaseException as e:		# noqa: B036 (reported below)
                errors.append(e)
        nw = len(rngs)
        if nw == 1:
            worker(0, nops)
        else:
            ts = [threading.Thread(target=worker, args=(w, nops // nw + (w < nops % nw)))
                  for w in range(nw)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
        if errors:
            raise errors[0]

    def setup(self):
        if scratch(self.fs, self.mnt) is None:
            return False
        os.mkdir(self.live)
        os.makedirs(self.views)
        initial_tree(self.live, random.Random(self.seed))
        self.tree = Tree(self.live)
        r = self.tool("init", self.live)
        self.record(int(r.stdout.split()[-1]))
        return True

    def teardown(self):
        try:
            self.tree.close_all()
        except Exception:
            pass
        umount_fs(self.fs)

    def generate(self):
        rngs = [random.Random(self.seed * 1000 + w + 1) for w in range(self.args.workers)]
        done = 0
        while done < self.args.ops:
            n = min(self.ctl.randint(10, 60), self.args.ops - done)
            self.tree.count = sum(len(d) + len(f) for _, d, f in os.walk(self.live))
            self.phase(n, rngs)
            done += n
            a = self.ctl.random()
            if a < 0.35:
                self.take()
            elif a < 0.55:
                self.verify(keep_mounted=self.ctl.random() < 0.6)
            elif a < 0.62:
                self.delete()
            elif a < 0.67:
                self.rearm()
            elif self.mounted:
                self.check("warm, after live changes")
        self.final()

    def final(self):
        self.tree.close_all()
        self.rearm()
        self.verify(keep_mounted=False)
        # Delete the oldest and a middle one, checking the rest each time.
        for _ in range(2):
            ids = self.ids()
            if len(ids) < 3:
                break
            self.delete(ids[0] if _ == 0 else self.ctl.choice(ids[1:-1]))
            self.verify(keep_mounted=False)

    def replay_log(self, log):
        for w, op, _ in log:
            if w >= 0:
                op = tuple(op)
                self.note(w, op, self.tree.run(op))
            elif op[0] == "take":
                self.take()
            elif op[0] == "verify":
                self.verify(keep_mounted=False)
            elif op[0] == "rearm":
                self.rearm()
            elif op[0] == "delete":
                if op[1] in self.manifests and op[1] != self.ids()[-1]:
                    self.delete(op[1])
        self.final()

    def go(self):
        """None when it passed, else the failure's text."""
        try:
            if not self.setup():
                return "skip"
            if self.replay is not None:
                self.replay_log(self.replay)
            else:
                self.generate()
            return None
        except Failure as e:
            return str(e)
        except Exception as e:		# an unexpected error is a failure too
            return "%s: %s" % (type(e).__name__, e)
        finally:
            self.teardown()


def shrink(args, fs, seed, log, why):
    """Remove chunks of operations while the replay still fails."""
    ops = list(log)
    chunk = max(1, len(ops) // 2)
    while chunk >= 1:
        i, changed = 0, False
        while i < len(ops):
            trial = ops[:i] + ops[i + chunk:]
            r = Run(args, fs, seed, log=trial).go()
            if r and r != "skip":
                ops, why, changed = trial, r, True
                print("# shrink: %d operations still fail: %s" % (len(ops), r), flush=True)
            else:
                i += chunk
        if not changed:
            chunk //= 2
    return ops, why


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fs", default="ext4,xfs,btrfs,tmpfs")
    ap.add_argument("--seed", type=int, default=1, help="first seed")
    ap.add_argument("--seeds", type=int, default=2, help="seeds per filesystem")
    ap.add_argument("--ops", type=int, default=300, help="operations per seed")
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--tool", default=os.path.join(HERE, "ovl-snapshot"))
    ap.add_argument("--log-dir", help="save the log of a failed run here")
    ap.add_argument("--replay", help="run this saved log (one worker)")
    ap.add_argument("--shrink", action="store_true",
                    help="minimize a failing log (with --replay, or a failing seed)")
    # make soak passes its settings in the environment (qemu/guest-soak.sh)
    args = ap.parse_args(shlex.split(os.environ.get("SNAPSHOT_FUZZ_ARGS", "")) + sys.argv[1:])
    fss = args.fs.split(",")
    replay = None
    if args.replay:
        with open(args.replay) as f:
            saved = json.load(f)
        replay, args.seed, args.seeds = saved["log"], saved["seed"], 1
        fss, args.workers = [saved["fs"]], 1
    runs = [(fs, args.seed + i) for fs in fss for i in range(args.seeds)]
    print("TAP version 13")
    print("1..%d" % len(runs), flush=True)
    failed = skipped = 0
    for n, (fs, seed) in enumerate(runs, 1):
        t0 = time.time()
        run = Run(args, fs, seed, log=replay)
        why = run.go()
        name = "%s.seed%d" % (fs, seed)
        s = run.stats
        print("# %s: %d ops (%d failed as expected), %d takes, %d checks, %d deletes, "
              "%d diffs with cp -a, %d views read across a take (%d ESTALE), %.0f s" % (
                  name, s["ops"], s["failed_ops"], s["takes"], s["checks"], s["deletes"],
                  s["diffs"], s["held"], s["stale"], time.time() - t0), flush=True)
        if why == "skip":
            skipped += 1
            print("ok %d %s # SKIP no scratch disk with serial '%s'" % (n, name, fs))
            continue
        if why is None:
            print("ok %d %s" % (n, name), flush=True)
            continue
        failed += 1
        print("# FAIL %s (workers %d): %s" % (name, args.workers, why))
        print("# replay: selftests/snapshot_fuzz.py --fs %s --seed %d --ops %d --workers 1" % (
            fs, seed, args.ops))
        for w, op, err in run.log[-40:]:
            print("#   w%d %s%s" % (w, op, " -> " + errno.errorcode.get(err, str(err))
                                      if err else ""))
        log = run.log
        if args.shrink:
            log, why = shrink(args, fs, seed, run.log, why)
            print("# shrunk to %d operations: %s" % (len(log), why))
            for w, op, err in log:
                print("#   w%d %s" % (w, op))
        if args.log_dir:
            os.makedirs(args.log_dir, exist_ok=True)
            path = os.path.join(args.log_dir, "%s.json" % name)
            with open(path, "w") as f:
                json.dump({"fs": fs, "seed": seed, "why": why, "log": log}, f)
            print("# log: %s (--replay it)" % path)
        print("not ok %d %s" % (n, name), flush=True)
    print("# Totals: pass:%d fail:%d skip:%d" % (len(runs) - failed - skipped, failed, skipped))
    sys.exit(1 if failed else (4 if skipped == len(runs) else 0))


if __name__ == "__main__":
    main()
