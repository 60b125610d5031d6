"""--supervise end to end: the result record, classification, statuses, signals,
stdio pass-through and markers, for each Linux runner. Verified from outside."""
import fcntl
import hashlib
import json
import os
import pty
import re
import select
import shutil
import signal
import subprocess
import tempfile
import termios
import threading
import time

from harness import (DSH, SANDBOX_UNAVAILABLE, check_records, dsh, main, matrix, need_runner, need, need_bwrap, need_landlock,
                     processes_naming, sh, skip, tool)

DENIAL_MARKER = "[sandbox: file access denied under {mode} mode]"
HINT = ("[sandbox: escalation available \u2014 retry this exact command once with sandbox_permissions "
        "(the narrowest wider mode that suffices) + justification; the approval prompt asks the user]")
RUNNER_FAILURE_MARKER = ("[sandbox: the sandbox runner itself failed under {mode} mode \u2014 the command did "
                         "not run; this is a sandbox problem, not a command failure]")

RUNNERS = ["landlock", "bwrap"]


def sup(script, s, runner, mode="read-only", extra=(), **kw):
    return sh(script, s, mode=mode, root=s.ws, runner=runner, extra=["--supervise"] + list(extra), **kw)


def result_of(r):
    res = r.rec("result")
    assert res is not None, r
    assert res["version"] == 1, r
    return res


def spawn(args, s, **kw):
    """Starts dsh-confine without waiting; the report comes through a pipe read in a thread."""
    rfd, wfd = os.pipe()
    cmd = [DSH, "--report-fd", str(wfd)] + list(args)
    proc = subprocess.Popen(cmd, cwd=s.ws, env=s.env(), pass_fds=[wfd], **kw)
    os.close(wfd)
    chunks = []

    def reader():
        while True:
            b = os.read(rfd, 65536)
            if not b:
                break
            chunks.append(b)
        os.close(rfd)

    t = threading.Thread(target=reader, daemon=True)
    t.start()

    def report():
        t.join(timeout=30)
        records = [json.loads(x) for x in b"".join(chunks).decode().splitlines()]
        check_records(records)
        return records
    return proc, report


def sleep_mark():
    """An argument for `sleep` no other process on the host has (processes_naming of sleep\\0MARK\\0)."""
    global _marks
    _marks += 1
    return "300.%d%04d" % (os.getpid(), _marks)


_marks = 0


def wait_for(pred, what, limit=30.0):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.02)
    raise AssertionError("gave up waiting for " + what)


def gone(pid):
    """Dead: no /proc entry, or a zombie waiting for its new parent to reap it."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("State:"):
                    return line.split()[1] == "Z"
    except FileNotFoundError:
        return True
    return False


# ---- per-runner cases -------------------------------------------------------------------------------------

@matrix(runner=RUNNERS)
def test_denied_write_is_a_denial(s, runner):
    need_runner(runner)
    r = sup("echo x > '%s'" % s.p("ws", "denied.txt"), s, runner)
    assert r.rc != 0, r
    assert not os.path.exists(s.p("ws", "denied.txt"))
    res = result_of(r)
    assert res["denied"] is True and res["runnerFailed"] is False, r
    assert res["runner"] == runner and res["mode"] == "read-only", r
    assert res["exitCode"] == r.rc and res["signal"] is None, r
    assert r.rec("confinement")["runner"] == runner, r
    assert r.rec("error") is None, r


@matrix(runner=RUNNERS)
def test_allowed_write_is_not_a_denial(s, runner):
    need_runner(runner)
    r = sup("printf ok > '%s'" % s.p("ws", "allowed.txt"), s, runner, mode="workspace-write")
    assert r.rc == 0, r
    with open(s.p("ws", "allowed.txt")) as f:
        assert f.read() == "ok"
    res = result_of(r)
    assert res["denied"] is False and res["runnerFailed"] is False and res["exitCode"] == 0, r


@matrix(runner=RUNNERS)
def test_outside_write_in_workspace_write_is_a_denial(s, runner):
    need_runner(runner)
    r = sup("printf no > '%s'" % s.p("outside", "o.txt"), s, runner, mode="workspace-write")
    assert r.rc != 0, r
    assert not os.path.exists(s.p("outside", "o.txt"))
    assert result_of(r)["denied"] is True, r


@matrix(runner=RUNNERS)
def test_denial_words_with_exit_0_are_not_a_denial(s, runner):
    need_runner(runner)
    r = sup("echo 'Permission denied' >&2; echo 'Read-only file system' >&2; exit 0", s, runner)
    assert r.rc == 0, r
    res = result_of(r)
    assert res["denied"] is False and res["runnerFailed"] is False, r


@matrix(runner=RUNNERS)
def test_exit_statuses_are_reported_exactly(s, runner):
    need_runner(runner)
    for code in (0, 1, 7, 125, 126, 127):
        r = sup("exit %d" % code, s, runner)
        assert r.rc == code, r
        res = result_of(r)
        assert res["exitCode"] == code and res["signal"] is None, r
        assert res["denied"] is False and res["runnerFailed"] is False and res["runnerFailure"] is None, r
        assert r.rec("error") is None, r  # the command's 125 is its own, not ours


@matrix(runner=RUNNERS)
def test_death_by_sigkill_is_137(s, runner):
    need_runner(runner)
    r = sup("kill -KILL $$", s, runner)
    assert r.rc == 137, r
    res = result_of(r)
    assert res["exitCode"] is None and res["signal"] == 9, r
    assert res["denied"] is False, r


@matrix(runner=RUNNERS)
def test_sigterm_reaches_the_command(s, runner):
    need_runner(runner)
    ready, got = s.p("ws", "ready"), s.p("ws", "got-term")
    script = ("trap 'echo term > \"%s\"; exit 42' TERM; : > \"%s\"; while :; do sleep 0.05; done" % (got, ready))
    proc, report = spawn(["--supervise", "--mode", "workspace-write", "--root", s.ws, "--runner", runner,
                          "--", "sh", "-c", script], s, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: os.path.exists(ready), "the command to set its trap")
        os.kill(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    with open(got) as f:
        assert f.read() == "term\n"
    assert proc.returncode == 42, err
    res = [x for x in report() if x["type"] == "result"][0]
    assert res["exitCode"] == 42 and 15 in res["forwardedSignals"], res


@matrix(runner=RUNNERS)
def test_sigterm_kills_an_untrapping_command(s, runner):
    need_runner(runner)
    # A TERM before `exec sleep` would end sh the same way: sent once the sleep runs, found by its
    # argument, a number no other process on the host sleeps.
    mark = sleep_mark()
    proc, report = spawn(["--supervise", "--mode", "workspace-write", "--root", s.ws, "--runner", runner,
                          "--", "sh", "-c", "exec sleep " + mark], s,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: processes_naming("sleep\x00%s\x00" % mark), "the command to exec sleep")
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + 15
    res = [x for x in report() if x["type"] == "result"][0]
    assert res["signal"] == 15 and res["exitCode"] is None and res["forwardedSignals"] == [15], res


@matrix(runner=RUNNERS)
def test_sigkill_of_the_supervisor_kills_the_command(s, runner):
    need_runner(runner)
    pidfile = s.p("ws", "pid")
    # The command records its own pid; `exec` keeps it, so that pid is the
    # command itself (under bwrap, its pid in the host namespace is looked up).
    mark = sleep_mark()
    proc, _ = spawn(["--supervise", "--mode", "workspace-write", "--root", s.ws, "--runner", runner,
                     "--", "sh", "-c", "echo $$ > '%s'; exec sleep %s" % (pidfile, mark)], s,
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: os.path.exists(pidfile) and os.path.getsize(pidfile) > 0, "the command's pid")
        wait_for(lambda: processes_naming("sleep\x00%s\x00" % mark), "the command to exec sleep")
        pids = command_pids(proc.pid)
        assert pids, "no process under dsh-confine"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    for pid in pids:
        wait_for(lambda: gone(pid), "process %d of the command to die" % pid)


def command_pids(root):
    """Every descendant of `root` (from /proc/<pid>/task/<tid>/children)."""
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        try:
            tids = os.listdir("/proc/%d/task" % p)
        except FileNotFoundError:
            continue
        for tid in tids:
            try:
                with open("/proc/%d/task/%s/children" % (p, tid)) as f:
                    kids = [int(x) for x in f.read().split()]
            except FileNotFoundError:
                kids = []
            out += kids
            todo += kids
    return out


@matrix(runner=RUNNERS)
def test_fifty_megabytes_pass_through_byte_identical(s, runner):
    need_runner(runner)
    data = os.urandom(50 * 1000 * 1000)
    src = s.p("ws", "big")
    with open(src, "wb") as f:
        f.write(data)
    want = hashlib.sha256(data).hexdigest()
    proc, report = spawn(["--supervise", "--runner", runner, "--", "sh", "-c", "cat big; cat big >&2; exit 3"], s,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 3, err[-500:]
    assert hashlib.sha256(out).hexdigest() == want
    assert hashlib.sha256(err).hexdigest() == want
    res = [x for x in report() if x["type"] == "result"][0]
    assert res["exitCode"] == 3 and res["stderrCaptured"] is True, res


@matrix(runner=RUNNERS)
def test_stdout_and_stderr_on_one_pipe_keep_their_order(s, runner):
    need_runner(runner)
    script = "i=0; while [ $i -lt 3000 ]; do echo out$i; echo err$i >&2; i=$((i+1)); done"
    proc, report = spawn(["--supervise", "--runner", runner, "--", "sh", "-c", script], s,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0
    want = "".join("out%d\nerr%d\n" % (i, i) for i in range(3000))
    assert out.decode() == want


@matrix(runner=RUNNERS)
def test_stdin_passes_through(s, runner):
    need_runner(runner)
    r = sup("cat; exit 4", s, runner, input=b"to the command\n")
    assert r.rc == 4 and r.out == "to the command\n", r


@matrix(runner=RUNNERS)
def test_a_terminal_stays_a_terminal(s, runner):
    need_runner(runner)
    master, slave = pty.openpty()
    try:
        proc, report = spawn(["--supervise", "--runner", runner, "--", "sh", "-c",
                              "test -t 0 && test -t 1 && test -t 2 && echo all-ttys"], s,
                             stdin=slave, stdout=slave, stderr=slave)
        os.close(slave)
        slave = -1
        out = b""
        while True:
            rl, _, _ = select.select([master], [], [], 30)
            if not rl:
                break
            try:
                b = os.read(master, 4096)
            except OSError:  # EIO: every slave fd closed
                break
            if not b:
                break
            out += b
        proc.wait(timeout=30)
    finally:
        os.close(master)
        if slave >= 0:
            os.close(slave)
    assert proc.returncode == 0, out
    assert b"all-ttys" in out, out
    res = [x for x in report() if x["type"] == "result"][0]
    assert res["stderrCaptured"] is False, res


@matrix(runner=RUNNERS)
def test_ctrl_c_at_a_terminal_reaches_the_command(s, runner):
    # The terminal's SIGINT goes to the foreground process group, which the
    # command shares with dsh-confine; dsh-confine does not forward that one
    # again (it may coalesce with the first, so a duplicate is not reliably
    # visible: this checks that exactly one trap ran and that it ran at all).
    need_runner(runner)
    master, slave = pty.openpty()
    ready, count = s.p("ws", "ready"), s.p("ws", "ints")
    script = ("trap 'echo int >> \"%s\"' INT; trap 'exit 0' TERM; : > \"%s\"; while :; do sleep 0.05; done"
              % (count, ready))

    def controlling_tty():
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    try:
        proc, _ = spawn(["--supervise", "--mode", "workspace-write", "--root", s.ws, "--runner", runner,
                         "--", "sh", "-c", script], s, stdin=slave, stdout=slave, stderr=slave,
                        preexec_fn=controlling_tty)
        os.close(slave)
        slave = -1
        wait_for(lambda: os.path.exists(ready), "the command to set its traps")
        os.write(master, b"\x03")  # the terminal's VINTR: SIGINT to the foreground group
        wait_for(lambda: os.path.exists(count), "the trap to run")
        # No window for a duplicate: this TERM flushes it. dsh-confine could only send one SIGINT
        # of its own before this TERM's forward: from its handler for the terminal's SIGINT (which
        # runs with the forwarded signals blocked, so TERM's handler comes after it), or from the
        # signals it held until the command was found (sent in ascending order, INT first). A
        # signal is pending at the command when the sending call returns, and sh runs pending traps
        # in signal-number order: a duplicate INT writes its line before TERM's trap exits.
        os.kill(proc.pid, signal.SIGTERM)
        drain = threading.Thread(target=lambda: _drain(master), daemon=True)
        drain.start()
        proc.wait(timeout=30)
    finally:
        if slave >= 0:
            os.close(slave)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    with open(count) as f:
        assert f.read() == "int\n"


def _drain(fd):
    try:
        while os.read(fd, 4096):
            pass
    except OSError:
        pass


@matrix(runner=RUNNERS)
def test_markers_denial_and_hint(s, runner):
    need_runner(runner)
    target = s.p("ws", "m.txt")
    r = sup("echo x > '%s'" % target, s, runner, extra=["--markers"])
    assert r.rc != 0, r
    lines = r.err.splitlines()
    assert lines[-1] == DENIAL_MARKER.format(mode="read-only"), r
    assert HINT not in r.err, r  # no approver: escalation is not advertised
    r = sup("echo x > '%s'" % target, s, runner, extra=["--markers", "--approver", "tty"])
    lines = r.err.splitlines()
    assert lines[-2:] == [DENIAL_MARKER.format(mode="read-only"), HINT], r
    assert not os.path.exists(target)
    # No denial, no marker.
    r = sup("echo fine >&2; exit 1", s, runner, extra=["--markers", "--approver", "tty"])
    assert r.rc == 1 and "[sandbox:" not in r.err, r
    # Without --markers, nothing is added.
    r = sup("echo x > '%s'" % target, s, runner)
    assert "[sandbox:" not in r.err, r


NET_MARKER = "[sandbox: network access refused under --net {net}]"
NET_HINT = ("[sandbox: network escalation available \u2014 retry this exact command once with --escalate-net {wider} "
            "+ --justification; the approval prompt asks the user]")
NET_HINT_NO_APPROVER = "[sandbox: the command ran with --net {net}; run it again with --net {wider} if it needs the network]"
# keyctl(KEYCTL_GET_KEYRING_ID) (x86_64 250): the seccomp layer's EPERM under every runner, mode and user;
# not a file operation.
KEYCTL = ("import ctypes, os, sys; l = ctypes.CDLL(None, use_errno=True); "
          "sys.exit('keyctl: ' + os.strerror(ctypes.get_errno()) if l.syscall(250, 0, -3, 0) < 0 else 0)")


@matrix(runner=RUNNERS)
def test_read_only_eperm_is_a_file_denial_only_from_a_file_operation(s, runner):
    """Issue 38: in read-only an "Operation not permitted" that no file operation gave (a keyring,
    a signal) is no denial and gets no marker; the seccomp layer's metadata refusals say what a
    read-only mount says (EROFS) and stay denials."""
    need_runner(runner)
    r = sup("python3 -c \"%s\"" % KEYCTL, s, runner, extra=["--markers", "--approver", "tty"])
    assert r.rc == 1 and "keyctl: Operation not permitted" in r.err, r
    res = result_of(r)
    assert res["denied"] is False and res["networkDenied"] is False, r
    assert "[sandbox:" not in r.err, r
    # The issue's own case: kill -0 sends nothing; it fails where the command may not signal pid 1.
    r = sup("kill -0 1", s, runner, extra=["--markers", "--approver", "tty"])
    assert result_of(r)["denied"] is False and "[sandbox:" not in r.err, r
    assert "operation not permitted" not in r.rec("confinement")["denialSignatures"], r
    target = s.p("outside", "meta")
    with open(target, "w") as f:
        f.write("x")
    os.chmod(target, 0o644)
    r = sup("chmod 600 '%s'" % target, s, runner, extra=["--markers", "--approver", "tty"])
    assert r.rc != 0 and "Read-only file system" in r.err, r
    assert result_of(r)["denied"] is True, r
    assert r.err.splitlines()[-2:] == [DENIAL_MARKER.format(mode="read-only"), HINT], r
    assert os.stat(target).st_mode & 0o777 == 0o644


@matrix(runner=RUNNERS)
def test_a_network_refusal_is_not_a_file_denial(s, runner):
    """Issue 38: under --net off (and loopback) a refused socket is a network refusal: its own
    marker and the --escalate-net / --net hint, never the file marker and the mode hint, which
    cannot help."""
    need_runner(runner)
    make = "python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, 1)'"
    for net, wider in (("off", "loopback or host"), ("loopback", "host")):
        for approver, hint in ((["--approver", "tty"], NET_HINT), ([], NET_HINT_NO_APPROVER)):
            r = sup(make, s, runner, extra=["--net", net, "--markers"] + approver)
            assert r.rc == 1 and "Network is unreachable" in r.err, r
            res = result_of(r)
            assert res["networkDenied"] is True and res["denied"] is False, r
            assert r.rec("confinement")["network"]["denialSignatures"] == ["network is unreachable"], r
            assert r.err.splitlines()[-2:] == [NET_MARKER.format(net=net),
                                               hint.format(net=net, wider=wider)], r
            assert "file access denied" not in r.err and HINT not in r.err, r
    # --net host: no network words to read, and a file denial is still one.
    r = sup("echo x > '%s'" % s.p("ws", "n.txt"), s, runner, extra=["--markers"])
    assert result_of(r)["networkDenied"] is False and r.rec("confinement")["network"]["denialSignatures"] == [], r
    assert r.err.splitlines()[-1] == DENIAL_MARKER.format(mode="read-only"), r


@matrix(runner=RUNNERS)
def test_danger_full_access_has_no_enforcement(s, runner):
    target = s.p("outside", "free.txt")
    r = sup("printf free > '%s'; echo 'permission denied' >&2; exit 1" % target, s, runner,
            mode="danger-full-access", extra=["--markers"])
    assert r.rc == 1, r
    with open(target) as f:
        assert f.read() == "free"
    res = result_of(r)
    assert res["denied"] is False and res["runnerFailed"] is False and res["mode"] == "danger-full-access", r
    assert "[sandbox:" not in r.err, r


# ---- runner-independent ----------------------------------------------------------------------------------

def test_landlock_setup_failure_is_a_runner_failure(s):
    # A setup step inside the child fails (landlock_restrict_self refused by a
    # seccomp filter the test installs; the parent's ABI query still works):
    # the exec pipe says the command never ran, so this is SANDBOX_UNAVAILABLE.
    need_landlock()
    r = dsh(["--supervise", "--markers", "--runner", "landlock", "--", "sh", "-c",
             "echo ran > '%s'" % s.p("ws", "ran")], s, pre=[tool("sysfault"), "EPERM", "446", "--"])
    assert r.rc == 125, r
    assert not os.path.exists(s.p("ws", "ran"))
    res = result_of(r)
    assert res["runnerFailed"] is True and res["denied"] is False, r
    assert res["runnerFailure"] == "landlock_restrict_self: Operation not permitted", r
    assert res["evidence"] == "exec-pipe", r
    err = r.rec("error")
    assert err["code"] == "SANDBOX_UNAVAILABLE", r
    assert err["message"] == SANDBOX_UNAVAILABLE.format(mode="read-only") + " Runner failure: " + \
        res["runnerFailure"], r
    assert r.err.splitlines()[-1] == RUNNER_FAILURE_MARKER.format(mode="read-only"), r


BWRAP_LINE = "bwrap: Can't mkdir parents for /nope/x: Read-only file system"


def custom_runner(s, body):
    """A fake custom runner (config runnerCommand): a shell script, then its config file."""
    path = s.p("base", "fake-runner")
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + body)
    os.chmod(path, 0o755)
    cfg = s.sealed_config({"runnerCommand": [path], "runnerFailureSignatures": ["bwrap: "]})
    return ["--config", cfg, "--runner", "custom"]


def run_custom(s, body, script, extra=()):
    r = dsh(custom_runner(s, body) + ["--supervise"] + list(extra) + ["--", "sh", "-c", script], s, cwd=s.ws)
    if r.rec("result") is None:
        skip("no custom runner from a config file in this build: %s" % r.err.strip()[-200:])
    return r


# The fake runner execs what follows its bwrap-shaped profile and "--".
PASS_THROUGH = 'while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do shift; done; shift; exec "$@"\n'


def test_custom_runner_own_line_is_a_runner_failure_not_a_denial(s):
    # bwrap's line matches both the runner's fatal signature and the EROFS
    # denial dialect: runner failure is checked first.
    r = run_custom(s, "echo \"%s\" >&2; exit 1\n" % BWRAP_LINE, "echo ran > '%s'" % s.p("ws", "ran"),
                   extra=["--markers"])
    assert r.rc == 125, r
    assert not os.path.exists(s.p("ws", "ran"))
    res = result_of(r)
    assert res["runnerFailed"] is True and res["denied"] is False, r
    assert res["runnerFailure"] == BWRAP_LINE and res["evidence"] == "stderr", r
    err = r.rec("error")
    assert err["code"] == "SANDBOX_UNAVAILABLE", r
    assert err["message"] == SANDBOX_UNAVAILABLE.format(mode="read-only") + " Runner failure: " + BWRAP_LINE, r
    assert r.err.splitlines()[-1] == RUNNER_FAILURE_MARKER.format(mode="read-only"), r


def test_custom_runner_denial_by_either_dialect(s):
    for line in ("touch: cannot touch 'x': Read-only file system", "sh: 1: cannot create x: Permission denied"):
        r = run_custom(s, PASS_THROUGH, "echo \"%s\" >&2; exit 1" % line)
        assert r.rc == 1, r
        res = result_of(r)
        assert res["denied"] is True and res["runnerFailed"] is False, r
    # Seatbelt's EPERM dialect is not a custom runner's.
    r = run_custom(s, PASS_THROUGH, "echo 'Operation not permitted' >&2; exit 1")
    assert result_of(r)["denied"] is False, r


def test_custom_runner_exit_0_is_never_a_runner_failure(s):
    r = run_custom(s, PASS_THROUGH, "echo '%s' >&2; exit 0" % BWRAP_LINE.replace("'", ""))
    assert r.rc == 0, r
    res = result_of(r)
    assert res["runnerFailed"] is False and res["denied"] is False, r


# -- The report on the command's own stream (issue 38) -----------------------------------------------

def ours(text):
    """A reader of a stream the report shares with the command: the first record's nonce ("run"),
    and the lines that carry it. Anything else (the command's lines, forged or not) is dropped."""
    run, recs = None, []
    for line in text.splitlines():
        try:
            j = json.loads(line)
        except ValueError:
            continue
        if not isinstance(j, dict):
            continue
        if run is None and isinstance(j.get("run"), str):
            run = j["run"]
        if run is not None and j.get("run") == run:
            recs.append(j)
    check_records(recs)
    return run, recs


def json_lines(text):
    """Every JSON object line of a stream (ours and the command's alike)."""
    out = []
    for line in text.splitlines():
        try:
            j = json.loads(line)
        except ValueError:
            continue
        if isinstance(j, dict):
            out.append(j)
    return out


def shared_run(args, s, merged=False):
    """dsh-confine with the report on its own stderr (merged: on stdout, with 2>&1), stdio captured."""
    rep = "1" if merged else "2"
    p = subprocess.run([DSH, "--report-fd", rep] + list(args), cwd=s.ws, env=s.env(), stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT if merged else subprocess.PIPE, timeout=60)
    return p, (p.stdout if merged else p.stderr).decode()


def usable_runners():
    out = []
    for runner in RUNNERS:
        try:
            need_runner(runner)
        except BaseException:
            continue
        out.append(runner)
    if not out:
        skip("no Linux runner here")
    return out


def test_report_on_stderr_is_never_read_back_as_the_commands_stderr(s):
    # With the report on fd 2 (or fd 1 with 2>&1), the confinement record went
    # through the pipe that captures the command's stderr: its denialSignatures
    # made any failing command a denial.
    for runner in usable_runners():
        for merged in (False, True):
            p, stream = shared_run(["--supervise", "--markers", "--runner", runner, "--mode", "read-only", "--",
                                    "sh", "-c", "echo plain >&2; exit 3"], s, merged)
            assert p.returncode == 3, (runner, merged, stream)
            recs = json_lines(stream)  # the command prints none
            assert [r["type"] for r in recs] == ["confinement", "result"], (runner, merged, stream)
            res = recs[1]
            assert (res["exitCode"], res["denied"], res["runnerFailed"]) == (3, False, False), (runner, merged, res)
            assert "plain" in stream.splitlines(), stream
            assert "[sandbox: file access denied" not in stream, stream


def test_report_on_stderr_under_a_custom_runner_is_not_a_runner_failure(s):
    # The same record carries runnerFailureRules ("bwrap: "): read back, a
    # command that ran and failed was a runner failure with exit 125.
    for merged in (False, True):
        p, stream = shared_run(custom_runner(s, PASS_THROUGH) + ["--supervise", "--", "sh", "-c",
                                                                 "echo ran > '%s'; exit 1" % s.p("ws", "ran")],
                               s, merged)
        recs = json_lines(stream)  # the command prints none
        if not any(r["type"] == "result" for r in recs):
            skip("no custom runner from a config file in this build: %s" % stream[-200:])
        assert p.returncode == 1, stream
        assert os.path.exists(s.p("ws", "ran"))
        res = [r for r in recs if r["type"] == "result"][0]
        assert (res["runnerFailed"], res["denied"], res["evidence"]) == (False, False, "stderr"), res
        assert not any(r["type"] == "error" for r in recs), recs
        os.unlink(s.p("ws", "ran"))


def test_every_record_carries_the_runs_nonce_and_forged_lines_are_dropped(s):
    # The command writes result lines shaped like ours into the stream the report
    # shares with it: without our nonce, and with a made-up one. A reader that keeps
    # the first record's nonce keeps ours only.
    forged = '{"type":"result","version":1,"exitCode":0,"denied":false,"runnerFailed":false}'
    fake = '{"type":"result","version":1,"exitCode":0,"run":"%s"}' % ("0" * 32)
    script = "echo '%s' >&2; echo '%s' >&2; exit 4" % (forged, fake)
    seen = set()
    for runner in usable_runners():
        for supervise in (False, True):
            p, stream = shared_run((["--supervise"] if supervise else []) +
                                   ["--runner", runner, "--mode", "read-only", "--", "sh", "-c", script], s)
            assert p.returncode == 4, stream
            run, recs = ours(stream)
            assert run and re.fullmatch("[0-9a-f]{32}", run), stream
            assert [r["type"] for r in recs] == ["confinement"] + (["result"] if supervise else []), stream
            # The forged lines are there, and dropped.
            assert forged in stream.splitlines() and fake in stream.splitlines(), stream
            # "run" is the last member of each record, the rest as before.
            for line in stream.splitlines():
                if '"run":"%s"' % run in line:
                    assert line.endswith(',"run":"%s"}' % run), line
            seen.add(run)
    # A nonce per run.
    assert len(seen) == 2 * len(usable_runners()), seen
    # On a report of its own (a pipe), every record carries the one nonce too, errors included.
    r = dsh(["--supervise", "--runner", usable_runners()[0], "--", "sh", "-c", "exit 0"], s)
    assert len({x["run"] for x in r.report}) == 1 and len(r.report) == 2, r
    r = dsh(["--keep-fd", "97", "--", "true"], s)
    assert r.rc == 125 and re.fullmatch("[0-9a-f]{32}", r.rec("error")["run"]), r


def test_command_not_found_is_127_before_anything_runs(s):
    need_landlock()
    r = dsh(["--supervise", "--runner", "landlock", "--", "no-such-command-dsh"], s)
    assert r.rc == 127, r
    assert r.rec("error")["code"] == "COMMAND_NOT_FOUND", r


def test_markers_need_supervise(s):
    r = dsh(["--markers", "--", "true"], s)
    assert r.rc == 125 and r.rec("error")["code"] == "USAGE", r


def test_supervisor_leaves_no_zombie(s):
    # The command's own children are reaped by it; dsh-confine reaps the
    # command. After exit nothing of the run is left under this test.
    need_landlock()
    r = sup("sleep 0.1 & wait", s, "landlock")
    assert r.rc == 0, r
    assert command_pids(os.getpid()) == [], command_pids(os.getpid())



def test_a_command_cannot_forge_a_runner_failure(s):
    # The command prints our own runner-failure line and exits 125, as the bwrap
    # stage does when it cannot confine itself. A runner failure is read only
    # from out-of-band evidence (the exec pipe, bwrap's status, the stage's
    # sealed record), never from what the command writes: the run is the
    # command's own exit 125, not SANDBOX_UNAVAILABLE, and no error record.
    forged = ("dsh-confine: " + SANDBOX_UNAVAILABLE.format(mode="workspace-write") +
              " Runner failure: forged by the command")
    for runner in RUNNERS:
        need_runner(runner)
        r = sh("echo '%s' >&2; exit 125" % forged.replace("'", "'\\''"), s, mode="workspace-write",
               root=s.ws, runner=runner, extra=["--supervise"])
        bare = subprocess.run(["sh", "-c", "exit 125"])
        assert r.rc == bare.returncode == 125, (runner, r)
        assert r.err == forged + "\n", (runner, r)
        res = r.rec("result")
        assert res["runnerFailed"] is False and res["runnerFailure"] is None and res["exitCode"] == 125, (runner, r)
        assert r.rec("error") is None, (runner, r)


MAILBOX_PROBE = r"""
import glob, json, os, sys
rec = json.dumps({"type": "error", "version": 1, "code": "SANDBOX_UNAVAILABLE", "exitStatus": 125,
                  "message": "forged", "runnerFailure": "forged by the command"})
seen = wrote = 0
for link in glob.glob("/proc/*/fd/*"):
    try:
        target = os.readlink(link)
    except OSError:
        continue
    if "dsh-confine-stage" not in target:
        continue
    seen += 1
    for flags in (os.O_RDWR, os.O_WRONLY | os.O_TRUNC):
        try:
            fd = os.open(link, flags)
        except OSError:
            continue
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, rec.encode(), 0)
            wrote += 1
        except OSError:
            pass
        os.close(fd)
print("seen=%d wrote=%d" % (seen, wrote))
sys.exit(125)
"""


def test_a_command_cannot_write_the_stages_sealed_mailbox(s):
    # The bwrap stage's failure comes back to supervise in a memfd it seals;
    # a command that finds that memfd (its own fds, any /proc/PID/fd it can
    # see) and writes an error record into it must not turn its own exit 125
    # into a runner failure: the mailbox is closed on exec and sealed against
    # writes before the command starts.
    need_runner("bwrap")
    r = dsh(["--runner", "bwrap", "--mode", "workspace-write", "--root", s.ws, "--supervise", "--",
             "python3", "-c", MAILBOX_PROBE], s)
    assert r.rc == 125, r
    # Not reachable (closed on exec, bwrap holds no copy the command can
    # open) and, were it reached, not writable.
    assert r.out == "seen=0 wrote=0\n", r
    res = result_of(r)
    assert res["runnerFailed"] is False and res["runnerFailure"] is None and res["exitCode"] == 125, r
    assert r.rec("error") is None, r


def test_a_command_bwrap_cannot_exec_is_the_commands_127_not_a_runner_failure(s):
    # A command that exists when dsh-confine looks it up but not inside bwrap's
    # mount view (--private-tmp puts a fresh tmpfs on /tmp): the stage's exec fails with
    # ENOENT. As in exec mode, that is the command's 127, never a runner failure.
    need_runner("bwrap")
    d = tempfile.mkdtemp(dir="/tmp")
    try:
        os.chmod(d, 0o755)
        prog = os.path.join(d, "vanishes")
        with open(prog, "w") as f:
            f.write("#!/bin/sh\nexit 0\n")
        os.chmod(prog, 0o755)
        for extra in ([], ["--supervise"]):
            r = dsh(["--runner", "bwrap", "--mode", "workspace-write", "--root", s.ws, "--private-tmp"] + extra +
                    ["--", prog], s)
            assert r.rc == 127, (extra, r)
            assert r.err.startswith("dsh-confine: %s: " % prog), (extra, r)
            err = r.rec("error")
            assert err is not None and err["code"] == "COMMAND_NOT_FOUND", (extra, r)
            if extra:
                res = r.rec("result")
                assert res["runnerFailed"] is False and res["exitCode"] == 127, r
    finally:
        shutil.rmtree(d)


if __name__ == "__main__":
    main()
