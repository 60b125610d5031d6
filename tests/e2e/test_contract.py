#!/usr/bin/env python3
"""The seed contract where a conformance pass found deviations (issue 16).

A runner that cannot be started is SANDBOX_UNAVAILABLE with the seed's exact text and
" Runner failure: <detail>", exit 125, `runnerFailed: true` in supervise mode: never the
command's 126/127 ("your command does not exist" when the sandbox never started).
"""
import json
import os
import shutil
import socket
import subprocess
import time

from harness import DSH, SANDBOX_UNAVAILABLE, dsh, main, need_bwrap, need_landlock


def _config(s, runner_command):
    # runnerCommand: only from a sealed config (issue 37).
    return s.sealed_config({"runnerCommand": runner_command, "runnerFailureSignatures": ["bwrap: "]})


def _runner_cases(s):
    missing = s.p("base", "no-such-runner")
    not_exec = s.p("base", "not-executable")
    with open(not_exec, "w") as f:
        f.write("#!/bin/sh\nexec \"$@\"\n")
    os.chmod(not_exec, 0o644)
    bad_interp = s.p("base", "bad-interpreter")
    with open(bad_interp, "w") as f:
        f.write("#!/nonexistent/dsh-e2e-interpreter\n")
    os.chmod(bad_interp, 0o755)
    return [
        (missing, "cannot start the runner %s: command not found" % missing),
        (not_exec, "cannot start the runner %s: permission denied" % not_exec),
        (bad_interp, "cannot start the runner %s: No such file or directory" % bad_interp),
    ]


def test_custom_runner_that_cannot_start_is_sandbox_unavailable(s):
    mark = s.p("outside", "ran")
    for runner, detail in _runner_cases(s):
        cfg = _config(s, [runner])
        for extra in ([], ["--supervise"]):
            r = dsh(["--config", cfg, "--mode", "read-only"] + extra + ["--", "sh", "-c", "echo ran > '%s'" % mark],
                    s)
            message = SANDBOX_UNAVAILABLE.format(mode="read-only") + " Runner failure: " + detail
            assert r.rc == 125, r
            assert r.err.endswith("dsh-confine: %s\n" % message), r
            assert not os.path.exists(mark), r
            err = r.rec("error")
            assert err is not None and err["code"] == "SANDBOX_UNAVAILABLE" and err["message"] == message, r
            # Supervise: a runner refused before the spawn leaves only the error
            # record (nothing ran); one that fails at exec leaves a result too.
            res = r.rec("result")
            if res is not None:
                assert extra and res["runnerFailed"] is True and res["exitCode"] == 125, r
                assert res["runnerFailure"] == detail and res["denied"] is False, r


def test_metadata_refusals_are_denials(s):
    """Read-only: the seccomp layer's metadata refusals are denials (marker, escalation hint), under
    both runners; they say what a read-only mount says (EROFS), so that a bare EPERM (a signal, a
    keyring) is never read as one (issue 38)."""
    target = s.p("outside", "f")
    with open(target, "w") as f:
        f.write("x")
    os.chmod(target, 0o644)
    for runner in ("bwrap", "landlock"):
        if runner == "bwrap":
            need_bwrap()
        need_landlock()
        for cmd in ("chmod 600 '%s'" % target, "touch -d 2001-01-01 '%s'" % target):
            r = dsh(["--mode", "read-only", "--runner", runner, "--supervise", "--markers", "--", "sh", "-c", cmd], s)
            assert r.rc != 0, r
            res = r.rec("result")
            assert res["denied"] is True and res["runnerFailed"] is False, r
            assert "[sandbox: file access denied under read-only mode]" in r.err, r
            # chmod meets the filter (EROFS); touch under Landlock alone meets Landlock's open first.
            assert "Operation not permitted" not in r.err, r
            if cmd.startswith("chmod"):
                assert "Read-only file system" in r.err, r
            assert "read-only file system" in r.rec("confinement")["denialSignatures"], r
            assert "operation not permitted" not in r.rec("confinement")["denialSignatures"], r
            st = os.stat(target)
            assert st.st_mode & 0o777 == 0o644 and st.st_mtime > 1e9 + 1e8, r
        # workspace-write has no seccomp metadata layer: no such signature to misread.
        r = dsh(["--mode", "workspace-write", "--root", s.ws, "--runner", runner, "--", "true"], s)
        assert "operation not permitted" not in r.rec("confinement")["denialSignatures"], r



def test_bwrap_as_the_custom_runner_in_both_modes(s):
    """A custom runnerCommand gets only what its argv names (issue 38): /usr/bin/bwrap as the
    custom runner binds each root by its path (never /proc/self/fd/N of a descriptor it was not
    given), in both modes, exec and supervise; the command holds no directory descriptor of ours
    (one on the host's mount would reach past every bind with "..")."""
    need_bwrap()
    cfg = _config(s, ["/usr/bin/bwrap"])
    inside, outside = s.p("ws", "in.txt"), s.p("outside", "out.txt")
    # Every descriptor the shell holds that is a directory: none may be.
    dirs = 'for f in /proc/$$/fd/*; do [ -d "$f" ] && echo "dir-fd $f"; done; '
    for extra in ([], ["--supervise"]):
        for path in (inside, outside):
            if os.path.exists(path):
                os.unlink(path)
        r = dsh(["--config", cfg, "--mode", "workspace-write", "--root", s.ws] + extra +
                ["--", "sh", "-c", dirs + "printf ok > '%s' && echo landed; printf x > '%s'" % (inside, outside)], s)
        assert r.rec("confinement")["runner"] == "custom", r
        argv = r.rec("confinement")["execArgv"]
        assert not [a for a in argv if a.startswith("/proc/self/fd/")], argv
        assert "--bind" in argv and argv[argv.index(s.ws) - 1] == "--bind" and argv[argv.index(s.ws) + 1] == s.ws, argv
        assert "landed" in r.out and "dir-fd" not in r.out, r
        assert r.rc != 0 and "Read-only file system" in r.err, r  # the write outside
        with open(inside) as f:
            assert f.read() == "ok", r
        assert not os.path.exists(outside), r
        if extra:
            res = r.rec("result")
            assert res["runnerFailed"] is False and res["denied"] is True, r
        # read-only: nothing lands, the workspace included.
        os.unlink(inside)
        r = dsh(["--config", cfg, "--mode", "read-only", "--root", s.ws] + extra +
                ["--", "sh", "-c", dirs + "printf ok > '%s'" % inside], s)
        assert r.rec("confinement")["runner"] == "custom", r
        assert r.rc != 0 and "Read-only file system" in r.err and "dir-fd" not in r.out, r
        assert not os.path.exists(inside), r
        if extra:
            assert r.rec("result")["denied"] is True and r.rec("result")["runnerFailed"] is False, r


def test_the_runner_checked_is_the_runner_run(s):
    """bwrap and the custom runner are opened and checked once, when the run is planned, and
    executed through that descriptor (issue 37): a file put at the runner's path after the check
    never runs. The test swaps it while dsh-confine waits to write its record to a report socket
    the test has filled, which is after the plan and before the exec."""
    need_bwrap()
    rdir = s.p("base", "runners")
    os.mkdir(rdir, 0o755)
    runner, impostor = os.path.join(rdir, "runner"), os.path.join(rdir, "impostor")
    shutil.copy2("/usr/bin/bwrap", runner)
    shutil.copy2("/bin/true", impostor)  # an ELF that runs nothing of the command's
    cfg = _config(s, [runner])
    mark = s.p("ws", "ran")
    ours, theirs = socket.socketpair()
    theirs.setblocking(False)
    try:
        while True:
            theirs.send(b"x" * 65536)
    except BlockingIOError:
        pass
    p = subprocess.Popen([DSH, "--report-fd", str(theirs.fileno()), "--config", cfg, "--mode", "workspace-write",
                          "--root", s.ws, "--", "touch", mark], pass_fds=[theirs.fileno()], env=s.env(), cwd=s.ws,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    theirs.close()
    try:
        # Planned: the runner's file is open in dsh-confine (its record now waits for room).
        deadline = time.monotonic() + 20
        opened = False
        while not opened and time.monotonic() < deadline and p.poll() is None:
            try:
                opened = any(os.readlink("/proc/%d/fd/%s" % (p.pid, n)) == runner
                             for n in os.listdir("/proc/%d/fd" % p.pid))
            except OSError:
                pass
            time.sleep(0.01)
        assert opened, "dsh-confine never opened the runner"
        os.rename(impostor, runner)
        ours.settimeout(30)
        while ours.recv(1 << 20):
            pass
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        ours.close()
    assert p.returncode == 0 and os.path.exists(mark), (p.returncode, err)


if __name__ == "__main__":
    main()
