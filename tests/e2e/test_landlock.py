"""The native Landlock runner, end to end: every claim checked from outside. A case that is the same
for the bwrap runner is one body here, stamped out for both (harness.matrix)."""
import os
import signal
import stat
import subprocess
import time

from harness import (RUNNERS, check_inherited_fds, pty_run, DSH, SANDBOX_UNAVAILABLE, dsh, is_root, landlock_abi, main, matrix,
                     need_landlock, sh, skip, tool)

LL = ["--runner", "landlock"]


def ws_write(script, s, mode="workspace-write", **kw):
    return sh(script, s, mode=mode, root=s.ws, runner="landlock", **kw)


def test_runs_as_the_intended_user(s):
    # The harness itself: the user variant really is unprivileged.
    import harness
    assert (os.getuid() == 0) == (harness.AS == "root"), (os.getuid(), harness.AS)


def test_read_only_denies_writes_everywhere(s):
    need_landlock()
    tag = "dsh-e2e-%d" % os.getpid()
    targets = [s.p("ws", "a"), "/tmp/%s-ro" % tag, "/dev/shm/%s-ro" % tag, s.p("home", "h"), s.p("outside", "o"),
               s.p("tmpdir", "t")]
    try:
        for t in targets:
            r = sh("echo x > '%s'" % t, s, runner="landlock", cwd=s.ws)
            assert r.rc != 0, r
            assert "Permission denied" in r.err, r
            assert not os.path.exists(t), t
            c = r.rec("confinement")
            assert c["mode"] == "read-only" and c["runner"] == "landlock", r
            assert c["enforcement"] == ("full" if landlock_abi() >= 5 else "partial"), r
    finally:
        for t in targets:
            if os.path.exists(t):
                os.unlink(t)


def test_read_only_leaves_nothing_behind(s):
    need_landlock()
    before = sorted(os.listdir(s.base))
    r = sh("mkdir d; touch f; ln -s x l; mkfifo p; cp /etc/hostname c; true", s, runner="landlock", cwd=s.ws)
    assert r.rc == 0, r  # `true` at the end; the attempts themselves failed
    assert os.listdir(s.ws) == [], os.listdir(s.ws)
    assert sorted(os.listdir(s.base)) == before


def test_dev_null_is_writable(s):
    need_landlock()
    r = sh("echo x > /dev/null && echo dev-ok", s, runner="landlock")
    assert r.rc == 0 and r.out == "dev-ok\n", r
    assert r.rec("confinement")["writableFiles"] == ["/dev/null", "/dev/tty"], r


def test_workspace_write_inside_tmp_and_tmpdir_land_sibling_denied(s):
    need_landlock()
    tmpfile = "/tmp/dsh-e2e-ws-%d" % os.getpid()
    try:
        r = ws_write("printf landlock-ok > '%s' && printf t > '%s' && printf d > \"$TMPDIR/x\"; "
                     "printf no > '%s'; echo $?" % (s.p("ws", "in"), tmpfile, s.p("outside", "out")), s)
        assert r.rc == 0, r
        assert open(s.p("ws", "in")).read() == "landlock-ok"
        assert open(tmpfile).read() == "t"
        assert open(s.p("tmpdir", "x")).read() == "d"
        assert not os.path.exists(s.p("outside", "out"))
        assert r.out.strip() != "0", r
        c = r.rec("confinement")
        paths = [w["path"] for w in c["writableRoots"]]
        assert paths == [s.ws, "/tmp", s.tmpdir], c
        assert all(w["persists"] for w in c["writableRoots"]), c
    finally:
        if os.path.exists(tmpfile):
            os.unlink(tmpfile)


def test_grandchildren_and_background_processes_are_confined(s):
    need_landlock()
    bg = s.p("outside", "bg")
    gc = s.p("outside", "gc")
    # The background job writes once the command's shell has ended (outliving it, still confined).
    r = ws_write("sh -c 'sh -c \"echo x > %s\"'; (i=0; while kill -0 $$ 2>/dev/null && [ $i -lt 3000 ]; do "
                 "i=$((i+1)); sleep 0.01; done; echo x > %s; echo done > %s) >/dev/null 2>&1 & exit 0"
                 % (gc, bg, s.p("ws", "bg-ran")), s)
    assert r.rc == 0, r
    deadline = time.time() + 30
    while not os.path.exists(s.p("ws", "bg-ran")) and time.time() < deadline:
        time.sleep(0.02)
    assert os.path.exists(s.p("ws", "bg-ran")), "the background process did not run"
    assert not os.path.exists(bg) and not os.path.exists(gc)


def test_symlink_in_workspace_pointing_outside_is_refused(s):
    need_landlock()
    target = s.p("outside", "target")
    with open(target, "w") as f:
        f.write("orig")
    os.symlink(s.outside, s.p("ws", "dirlink"))
    os.symlink(target, s.p("ws", "filelink"))
    r = ws_write("echo x > dirlink/new; echo x > filelink; echo x >> filelink; true", s, cwd=s.ws)
    assert r.rc == 0, r
    assert not os.path.exists(s.p("outside", "new"))
    assert open(target).read() == "orig"


def test_hardlinks_and_renames_across_the_boundary_are_refused(s):
    need_landlock()
    out = s.p("outside", "o")
    inside = s.p("ws", "i")
    with open(out, "w") as f:
        f.write("out")
    with open(inside, "w") as f:
        f.write("in")
    r = ws_write("ln %s hl; ln i %s; mv i %s; mv %s moved; true"
                 % (out, s.p("outside", "hl2"), s.p("outside", "i"), out), s, cwd=s.ws)
    assert r.rc == 0, r
    assert sorted(os.listdir(s.outside)) == ["o"], os.listdir(s.outside)
    assert sorted(os.listdir(s.ws)) == ["i"], os.listdir(s.ws)
    assert open(out).read() == "out" and os.stat(out).st_nlink == 1


def test_renames_inside_the_workspace_work(s):
    need_landlock()
    r = ws_write("mkdir -p a b && echo x > a/f && mv a/f b/f && ln b/f b/g && cat b/g", s, cwd=s.ws)
    assert r.rc == 0 and r.out == "x\n", r
    assert os.stat(s.p("ws", "b", "f")).st_nlink == 2


def test_truncate_outside_is_refused(s):
    need_landlock()
    if landlock_abi() < 3:
        skip("truncate is governed from Landlock ABI 3")
    out = s.p("outside", "f")
    with open(out, "w") as f:
        f.write("keep")
    r = ws_write("truncate -s 0 %s" % out, s)
    assert r.rc != 0, r
    assert open(out).read() == "keep"


def test_metadata_read_only_refused_workspace_write_reported(s):
    need_landlock()
    out = s.p("outside", "f")
    with open(out, "w") as f:
        f.write("x")
    os.chmod(out, 0o644)
    os.utime(out, (1000000, 1000000))
    r = sh("chmod 600 %s; touch -m %s; python3 -c 'import os; os.setxattr(\"%s\", \"user.k\", b\"v\")'; true"
           % (out, out, out), s, runner="landlock")
    assert r.rc == 0, r
    st = os.stat(out)
    assert stat.S_IMODE(st.st_mode) == 0o644 and int(st.st_mtime) == 1000000, st
    try:
        assert os.listxattr(out) == []
    except OSError:
        pass
    assert r.rec("confinement")["enforcement"] == ("full" if landlock_abi() >= 5 else "partial")
    # workspace-write: Landlock alone cannot tell paths apart for chmod; the
    # report must say so instead of claiming full.
    r = ws_write("chmod 600 %s; true" % out, s)
    c = r.rec("confinement")
    assert c["enforcement"] == "partial", c
    assert "metadata" in [g["effect"] for g in c["gaps"] if g["ownEffect"]], c
    # ...and inside the workspace metadata changes keep working.
    r = ws_write("touch f && chmod 600 f && stat -c %a f", s, cwd=s.ws)
    assert r.rc == 0 and r.out == "600\n", r


def test_capabilities_are_gone_mount_mknod_modules_fail(s):
    need_landlock()
    r = sh("grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status; grep NoNewPrivs /proc/self/status",
           s, runner="landlock")
    assert r.rc == 0, r
    for line in r.out.splitlines():
        k, v = line.split(":")
        if k.startswith("Cap"):
            assert int(v.strip(), 16) == 0, r.out
        else:
            assert v.strip() == "1", r.out
    os.mkdir(s.p("ws", "m"))
    r = ws_write("mount -t tmpfs none %s; mknod %s c 1 3; echo $?"
                 % (s.p("ws", "m"), s.p("ws", "nod")), s)
    assert not os.path.exists(s.p("ws", "nod")), r
    assert not os.path.ismount(s.p("ws", "m")), r
    # finit_module without CAP_SYS_MODULE: EPERM (ENOSYS where the kernel has no modules).
    r = ws_write("python3 -c 'import ctypes,os; l=ctypes.CDLL(None,use_errno=True); "
                 "fd=os.open(\"/dev/null\",0); rc=l.syscall(313,fd,b\"\",0); print(rc, ctypes.get_errno())'", s)
    rc, err = r.out.split()
    assert rc == "-1" and int(err) in (1, 38), r


def test_exit_statuses(s):
    need_landlock()
    for code in (0, 7, 125):
        r = sh("exit %d" % code, s, runner="landlock")
        assert r.rc == code, r
        assert r.rec("confinement") is not None and r.rec("error") is None, r
    r = dsh(LL + ["--", "no-such-command-dsh"], s)
    assert r.rc == 127 and r.rec("error")["code"] == "COMMAND_NOT_FOUND", r
    assert r.rec("confinement") is None
    noexec = s.p("ws", "noexec")
    with open(noexec, "w") as f:
        f.write("#!/bin/sh\necho ran > %s\n" % s.p("ws", "ran"))
    os.chmod(noexec, 0o644)
    r = dsh(LL + ["--", noexec], s)
    assert r.rc == 126 and r.rec("error")["code"] == "COMMAND_NOT_EXECUTABLE", r
    r = dsh(LL + ["--", s.ws], s)
    assert r.rc == 126, r
    assert not os.path.exists(s.p("ws", "ran"))
    assert r.err.startswith("dsh-confine: ") and r.err.count("\n") == 1, r


def test_report_fields_match_what_happened(s):
    need_landlock()
    r = dsh(["--mode", "workspace-write", "--root", s.ws + "/", "--runner", "landlock", "--", "true"], s)
    assert r.rc == 0, r
    assert len(r.report) == 1, r
    c = r.report[0]
    assert list(c)[:2] == ["type", "version"] and c["version"] == 1
    assert c["mode"] == "workspace-write" and c["modeSource"] == "flag"
    assert c["workspaceRoot"] == s.ws and c["rootSource"] == "flag"
    assert c["runner"] == "landlock" and c["landlockAbi"] == landlock_abi()
    assert c["command"] == "/usr/bin/true" and c["argv"] == ["true"]
    assert c["layers"][0]["name"] == "landlock"
    assert c["denialSignatures"] == ["permission denied"]
    assert "capabilities-dropped" in c["hardening"] and "inherited-fds-closed" in c["hardening"]
    assert c["keptFds"] == []


ABI_PROBE = r"""
import os, signal, sys
out, ws, target = sys.argv[1], sys.argv[2], int(sys.argv[3])
res = {}
def attempt(name, fn):
    try:
        fn()
        res[name] = "ok"
    except OSError as e:
        res[name] = e.errno
attempt("truncate", lambda: os.truncate(os.path.join(out, "f"), 0))
attempt("rename", lambda: os.rename(os.path.join(ws, "a", "f"), os.path.join(ws, "b", "f")))
attempt("signal", lambda: os.kill(target, 0))
print(res)
"""


def test_an_older_landlock_abi_the_report_and_the_world_agree(s):
    # The kernel's answer to the ABI query is replaced by 1..6 (tests/helpers/
    # landlock_abi.c, a seccomp user notification; everything else reaches the
    # real kernel), so dsh-confine handles only that ABI's rights, and the real
    # kernel enforces exactly those. At each ABI, under Landlock alone and
    # stacked under bwrap, in both confined modes: the report's landlockAbi,
    # gaps and enforcement say what the world then shows. A gap that is not
    # listed must be closed; one that is listed is real (Landlock alone).
    need_landlock()
    real = landlock_abi()
    import ast
    import harness
    runners = ["landlock"] + (["bwrap"] if harness.bwrap_works() else [])
    for d in ("a", "b"):
        os.mkdir(s.p("ws", d))
    outside_proc = subprocess.Popen(["sleep", "600"])
    try:
        for runner in runners:
            for abi in range(1, 7):
                if abi > real:
                    continue
                for mode in ("read-only", "workspace-write"):
                    with open(s.p("outside", "f"), "w") as f:
                        f.write("data")
                    open(s.p("ws", "a", "f"), "w").close()
                    r = dsh(["--runner", runner, "--mode", mode, "--root", s.ws, "--", "python3", "-c", ABI_PROBE,
                             s.outside, s.ws, str(outside_proc.pid)], s, pre=[tool("landlock-abi"), str(abi), "--"])
                    what = (runner, abi, mode, r)
                    assert r.rc == 0, what
                    world = ast.literal_eval(r.out.strip())
                    c = r.rec("confinement")
                    assert c["landlockAbi"] == abi, what
                    own = {g["effect"] for g in c["gaps"] if g["ownEffect"]}
                    other = {g["effect"] for g in c["gaps"] if not g["ownEffect"]}
                    assert c["enforcement"] == ("partial" if own else "full"), what
                    if runner == "landlock":
                        expected = set()
                        if abi < 2:
                            expected.add("refer")
                        if abi < 3:
                            expected.add("truncate")
                        if abi < 5:
                            expected.add("ioctl-dev")
                        if mode == "workspace-write":
                            expected.add("metadata")
                        assert own == expected, what
                        assert ("signals" in other) == (abi < 6), what
                        # Listed gaps are real, unlisted ones closed.
                        assert (world["truncate"] == "ok") == ("truncate" in own), what
                        assert (world["signal"] == "ok") == ("signals" in other), what
                        if mode == "workspace-write":
                            # ABI 1 cannot allow a rename across directories at all.
                            assert (world["rename"] == "ok") == (abi >= 2), what
                    else:
                        # bwrap's read-only binds close what the old ABI leaves
                        # open, and its PID namespace hides the host's processes.
                        assert "truncate" not in own and "refer" not in own, what
                        assert world["truncate"] != "ok" and world["signal"] != "ok", what
                    assert open(s.p("outside", "f")).read() == ("" if world["truncate"] == "ok" else "data"), what
                    if os.path.exists(s.p("ws", "b", "f")):
                        os.unlink(s.p("ws", "b", "f"))
        assert outside_proc.poll() is None  # kill(pid, 0) only probes
    finally:
        outside_proc.kill()
        outside_proc.wait()

def test_fail_closed_when_landlock_syscalls_are_missing(s):
    need_landlock()
    for errno_name, calls in (("ENOSYS", "444,445,446"), ("EOPNOTSUPP", "444"), ("EPERM", "446")):
        r = dsh(["--mode", "workspace-write", "--root", s.ws, "--runner", "landlock", "--", "sh", "-c",
                 "echo ran > %s" % s.p("ws", "ran")], s, pre=[tool("sysfault"), errno_name, calls, "--"])
        assert r.rc == 125, r
        if calls == "446":  # restrict_self: found at exec time, the contract's text
            assert SANDBOX_UNAVAILABLE.format(mode="workspace-write") in r.err, r
        else:  # found before anything runs: the forced runner's reason and the fix (issue 42)
            assert r.err.startswith("dsh-confine: --runner landlock: Landlock is not available: "), r
            assert "use --runner bwrap or auto" in r.err, r
        assert r.rec("error")["code"] == "SANDBOX_UNAVAILABLE" and r.rec("confinement") is None, r
        assert not os.path.exists(s.p("ws", "ran")), errno_name
    # Same under auto: no runner left means nothing runs.
    r = dsh(["--", "sh", "-c", "echo ran > %s" % s.p("ws", "ran")], s,
            pre=[tool("sysfault"), "ENOSYS", "444,445,446", "--"], env={"DSH_CONFINE_BWRAP": None})
    if r.rc == 125:
        assert not os.path.exists(s.p("ws", "ran"))


@matrix(runner=RUNNERS)
def test_inherited_fds_are_closed_unless_kept(s, runner):
    check_inherited_fds(s, runner)


def test_reopening_stdin_through_proc_is_refused(s):
    need_landlock()
    out = s.p("outside", "stdin-file")
    with open(out, "w") as f:
        f.write("orig")
    with open(out, "rb") as stdin:
        e = s.env()
        p = subprocess.run([DSH, "--mode", "workspace-write", "--root", s.ws, "--runner", "landlock", "--", "sh",
                            "-c", "echo pwned > /proc/self/fd/0"], stdin=stdin, env=e, capture_output=True)
    assert p.returncode != 0, p
    assert open(out).read() == "orig"


def test_proc_1_root_and_dev_shm_writes_are_refused(s):
    need_landlock()
    shm = "/dev/shm/dsh-e2e-%d" % os.getpid()
    r = ws_write("echo x > /proc/1/root%s; echo x > /proc/self/root%s; echo x > %s; true"
                 % (s.p("outside", "a"), s.p("outside", "b"), shm), s)
    assert r.rc == 0, r
    assert os.listdir(s.outside) == [] and not os.path.exists(shm)


def test_nested_dsh_confine_cannot_widen(s):
    need_landlock()
    r = ws_write("'%s' --mode danger-full-access -- sh -c 'echo x > %s'" % (DSH, s.p("outside", "n")), s)
    assert r.rc != 0, r
    assert not os.path.exists(s.p("outside", "n"))


@matrix(runner=RUNNERS)
def test_device_nodes_cannot_be_made_in_writable_roots(s, runner):
    r = sh("mknod c c 1 3; mknod b b 7 0; mkfifo f; ls", s, mode="workspace-write", root=s.ws, runner=runner, cwd=s.ws)
    assert sorted(os.listdir(s.ws)) == ["f"], r




def test_tiocsti_is_refused_but_ctrl_c_still_works(s):
    need_landlock()
    rc, out = pty_run(["--mode", "danger-full-access", "--", tool("tiocsti")], s)
    if "tiocsti=ok" not in out:
        skip("TIOCSTI does not work on this host even unconfined: %r" % out)
    rc, out = pty_run(["--runner", "landlock", "--", tool("tiocsti")], s)
    assert rc == 0, out
    assert "tiocsti=Operation not permitted" in out and "tiocsti-high-bits=Operation not permitted" in out, out
    assert "tioclinux=Operation not permitted" in out, out
    rc, out = pty_run(["--runner", "landlock", "--", "sleep", "30"], s, send=b"\x03", wait=10, when="sleep")
    assert rc == -signal.SIGINT, (rc, out)
    # A kernel without seccomp(2): the filter goes in through prctl and holds.
    rc, out = pty_run(["--runner", "landlock", "--", tool("tiocsti")], s, pre=[tool("sysfault"), "ENOSYS", "317", "--"])
    assert rc == 0, out
    assert "tiocsti=Operation not permitted" in out and "tioclinux=Operation not permitted" in out, out


if __name__ == "__main__":
    main()
