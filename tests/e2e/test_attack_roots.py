#!/usr/bin/env python3
"""Issue 13, roots: a writable root never comes from a place the command controls.

Each attack runs under both runners (bwrap, landlock), and the world is checked from
outside: the file outside the roots was not written, the kernel file could not be opened
for writing (it is never written: the probe opens and closes it), the report names what
was granted and lists what was not.
"""
import ctypes
import os
import subprocess
import threading

from harness import DSH, dsh, is_root, main, need_bwrap, need_landlock, sh

RUNNERS = ("bwrap", "landlock")

# Opens PATH for writing and closes it at once: never writes (no real sysctl changes).
OPEN_PROBE = ("import os,sys\n"
              "try:\n"
              "    os.close(os.open(sys.argv[1], os.O_WRONLY))\n"
              "    print('opened')\n"
              "except OSError as e:\n"
              "    print('refused', e.errno)\n")


def need(runner):
    if runner == "bwrap":
        need_bwrap()
    need_landlock()


def ws_run(s, runner, script, env=None, root=None, extra=(), mode="workspace-write", **kw):
    return dsh(["--mode", mode, "--root", root or s.ws, "--runner", runner] + list(extra) +
               ["--", "sh", "-c", script], s, env=env, **kw)


def probe_open(s, runner, path, env=None):
    r = dsh(["--mode", "workspace-write", "--root", s.ws, "--runner", runner, "--", "python3", "-c", OPEN_PROBE,
             path], s, env=env)
    return r


def not_granted(r):
    return {n["path"]: n["reason"] for n in r.rec("confinement")["notGranted"]}


def granted(r):
    return [w["path"] for w in r.rec("confinement")["writableRoots"]]


# -- TMPDIR is an optional grant, under every rule a root obeys -------------------------------------

def test_tmpdir_slash_grants_nothing(s):
    for runner in RUNNERS:
        need(runner)
        target = s.p("outside", "f-" + runner)
        r = ws_run(s, runner, "echo x > '%s'" % target, env={"TMPDIR": "/"})
        assert r.rc != 0 and not os.path.exists(target), r
        assert not_granted(r)["/"] == "not granted: it is / (that would make every path writable)", r
        assert "/" not in granted(r), r


def test_tmpdir_kernel_interfaces_are_not_granted(s):
    cases = [("/proc/sys", "/proc/sys/kernel/core_pattern"),
             ("/proc/sys/kernel", "/proc/sys/kernel/core_pattern"),
             ("/proc/self", "/proc/sys/kernel/core_pattern"),
             ("/sys/kernel", "/sys/kernel/uevent_helper"),
             ("/sys", "/sys/kernel/uevent_helper"),
             ("/dev/shm", None),
             ("/dev", None)]
    for runner in RUNNERS:
        need(runner)
        for tmpdir, knob in cases:
            if not os.path.exists(tmpdir):
                continue
            if knob:
                r = probe_open(s, runner, knob, env={"TMPDIR": tmpdir})
                assert r.rc == 0 and r.out.startswith("refused"), (tmpdir, r)
            else:
                made = os.path.join(tmpdir, "dsh-e2e-never-%d" % os.getpid())
                r = ws_run(s, runner, "echo x > '%s'" % made, env={"TMPDIR": tmpdir})
                landed = os.path.exists(made)
                if landed:
                    os.unlink(made)
                # Under bwrap /dev/shm is the sandbox's own tmpfs (issue 42): the write succeeds there
                # and never reaches the host's.
                private = runner == "bwrap" and tmpdir == "/dev/shm"
                assert (r.rc == 0 if private else r.rc != 0) and not landed, (tmpdir, r)
            reasons = not_granted(r)
            assert reasons[tmpdir].startswith("not granted: it is under /"), r
            # What the report promises still holds: /proc/sys stays read-only.
            if runner == "bwrap":
                assert "proc-sys-read-only" in r.rec("confinement")["hardening"], r


def test_explicit_kernel_roots_are_errors(s):
    for runner in RUNNERS:
        need(runner)
        for bad in ("/proc/sys", "/sys/kernel", "/dev/shm", "/proc/self/cwd"):
            if not os.path.exists(bad):
                continue
            mark = s.p("outside", "ran")
            r = ws_run(s, runner, "echo ran > '%s'" % mark, root=bad)
            assert r.rc == 125 and not os.path.exists(mark), r
            assert r.rec("error")["code"] == "INVALID_WORKSPACE_ROOT", r
            assert r.rec("confinement") is None, r
            r = ws_run(s, runner, "echo ran > '%s'" % mark, extra=["--writable", bad])
            assert r.rc == 125 and not os.path.exists(mark), r
            assert r.rec("error")["code"] == "INVALID_WRITABLE_PATH", r
        r = ws_run(s, runner, "true", root="/proc/sys")
        assert r.err == ("dsh-confine: workspace root /proc/sys cannot be granted: it is under /proc, a kernel "
                         "interface; choose another path\n"), r


def test_root_with_a_kernel_file_system_mounted_under_it(s):
    # Only root can mount; as the user the same rule is covered by the unit tests.
    if not is_root():
        return
    need_landlock()
    inner = s.p("ws", "p")
    os.mkdir(inner)
    subprocess.run(["mount", "-t", "proc", "proc", inner], check=True)
    try:
        for runner in RUNNERS:
            need(runner)
            r = ws_run(s, runner, "true")
            assert r.rc == 125, r
            assert r.err == ("dsh-confine: workspace root %s cannot be granted: a proc file system is mounted "
                             "at %s; choose another path\n" % (s.ws, inner)), r
    finally:
        subprocess.run(["umount", inner], check=True)


# -- Symlinks planted by an earlier run ---------------------------------------------------------------

def test_planted_tmpdir_symlink_does_not_widen_the_next_run(s):
    need_landlock()
    link = "/tmp/dsh-e2e-u-tmp-%d" % os.getpid()
    os.mkdir(link)
    try:
        # Run 1 (Landlock: /tmp is the host's) replaces its $TMPDIR by a link to outside.
        r = ws_run(s, "landlock", "rm -rf '%s' && ln -s '%s' '%s'" % (link, s.outside, link),
                   env={"TMPDIR": link})
        assert r.rc == 0 and os.path.islink(link), r
        for runner in RUNNERS:
            need(runner)
            target = s.p("outside", "f-" + runner)
            for mode_extra in ([], ["--supervise"]):
                r = ws_run(s, runner, "echo x > '%s'" % target, env={"TMPDIR": link}, extra=mode_extra)
                assert r.rc != 0 and not os.path.exists(target), r
                assert not_granted(r)[link].startswith("not granted: it passes through the symlink %s" % link), r
                assert s.outside not in granted(r), r
    finally:
        if os.path.islink(link):
            os.unlink(link)
        elif os.path.isdir(link):
            os.rmdir(link)


def test_planted_root_symlink_is_refused(s):
    for runner in RUNNERS:
        need(runner)
        # An earlier run with the root at base could have replaced base/ws2 by this link.
        link = s.p("base", "ws2")
        if not os.path.islink(link):
            os.symlink(s.outside, link)
        mark = s.p("outside", "f")
        r = ws_run(s, runner, "echo x > '%s'" % mark, root=link)
        assert r.rc == 125 and not os.path.exists(mark), r
        assert r.err == ("dsh-confine: workspace root %s passes through the symlink %s, in a directory the caller "
                         "can write (an earlier confined run could have planted it); give the path it points to "
                         "instead\n" % (link, link)), r
        # An ancestor is the same: base/lnk/.. would resolve through it.
        r = ws_run(s, runner, "echo x > '%s'" % mark, extra=["--writable", link + "/.."])
        assert r.rc == 125 and r.rec("error")["code"] == "INVALID_WRITABLE_PATH", r


def _renameat2_exchange():
    libc = ctypes.CDLL(None, use_errno=True)
    nr = {"x86_64": 316, "aarch64": 276}.get(os.uname().machine)
    assert nr, "renameat2's number on this machine"
    AT_FDCWD, RENAME_EXCHANGE = -100, 2

    def exchange(a, b):
        return libc.syscall(ctypes.c_long(nr), AT_FDCWD, a.encode(), AT_FDCWD, b.encode(), RENAME_EXCHANGE)
    return exchange


def test_race_root_swapped_with_a_symlink_100_times(s):
    exchange = _renameat2_exchange()
    root = s.p("base", "racy")
    other = s.p("base", "racy-link")
    os.mkdir(root)
    os.symlink(s.outside, other)
    stop = threading.Event()

    def racer():
        while not stop.is_set():
            exchange(root, other)

    for runner in RUNNERS:
        need(runner)
        t = threading.Thread(target=racer, daemon=True)
        stop.clear()
        t.start()
        outcomes = set()
        try:
            for i in range(100):
                r = ws_run(s, runner, "echo x > '%s/f%d' 2>/dev/null; true" % (root, i), root=root, timeout=30)
                # 1: bwrap itself gave up (its mount point moved under it): nothing ran.
                assert r.rc in (0, 125) or (r.rc == 1 and r.err.startswith("bwrap: ")), r
                if r.rc == 0:
                    # Whatever was granted is what the report names, and it is never outside.
                    assert granted(r)[0] == root, r
                outcomes.add(r.rc)
        finally:
            stop.set()
            t.join()
        assert os.listdir(s.outside) == [], (runner, os.listdir(s.outside))
        if os.path.islink(root):
            exchange(root, other)


# -- The current directory ---------------------------------------------------------------------------

def test_deleted_cwd_is_an_error_not_slash(s):
    need_landlock()
    gone = s.p("base", "gone")
    os.mkdir(gone)
    script = "cd '%s' && rmdir '%s' && exec '%s' --mode workspace-write --root etc -- touch x" % (gone, gone, DSH)
    p = subprocess.run(["sh", "-c", script], env=s.env(), capture_output=True, text=True, timeout=30)
    assert p.returncode == 125, p
    assert p.stderr == ("dsh-confine: the current directory cannot be determined (deleted, or deeper than the "
                        "system allows); change to an existing directory and run again\n"), p
    assert not os.path.exists("/etc/x")


# -- The report names what was granted, byte for byte ---------------------------------------------

def test_non_utf8_roots_are_reported_losslessly(s):
    need_landlock()
    base = os.fsencode(s.base)
    a, b = base + b"/w\xfe", base + b"/w\xff"
    for p in (a, b):
        os.mkdir(p)
    seen = []
    for p in (a, b):
        r = dsh(["--mode", "workspace-write", "--root", os.fsdecode(p), "--runner", "landlock", "--", "true"], s)
        assert r.rc == 0, r
        c = r.rec("confinement")
        assert bytes.fromhex(c["workspaceRootBytes"]) == p, c
        assert bytes.fromhex(c["writableRoots"][0]["pathBytes"]) == p, c
        seen.append(c["workspaceRootBytes"])
        # Valid UTF-8 carries no Bytes member.
        assert "pathBytes" not in c["writableRoots"][1], c
    assert seen[0] != seen[1]


if __name__ == "__main__":
    main()
