"""The report, second pass (issue 42): a caller that reads it only after the command ends never
hangs, protectedPaths is compact (a code per entry, the prose once), one `held` member to gate on,
--report-file for callers without fd passing, signal names beside numbers, and the shipped JSON
Schema (share/report.schema.json), which every record the suite reads is validated against
(harness.check_records) and which catches a renamed or missing member.

Each case runs under each runner (bwrap, landlock) and, where the command's ending matters, in
exec and supervise modes, as root and as the unprivileged user.
"""
import copy
import json
import os
import signal
import stat
import subprocess
import time

import report_schema
from harness import (DSH, EXEC_SUPERVISE, RUNNERS, check_records, dsh, main, matrix, need_runner, sh)

# The pipe a caller makes holds 64 KiB until it is grown (pipe(7)).
PIPE_DEFAULT = 65536
# Absent protected paths with long names: the largest record the suite produces (issue 42's 78 KB
# report was made of fewer, shorter ones repeating the prose).
MANY = 600
WAIT_S = 10  # report.hpp kReportWaitMs


def many_protected(s, n=MANY):
    """n --protect flags naming absent paths in the workspace, each about 200 bytes long."""
    args = []
    for i in range(n):
        args += ["--protect", os.path.join(s.ws, "absent-%04d-" % i + "x" * 150)]
    return args


def late_reader(args, s, timeout=60):
    """dsh-confine with the report on a pipe nobody reads until it has exited (or `timeout` has
    passed, which is a hang: the process is killed and the test fails). Returns (rc, stderr, the
    report's bytes, seconds it took)."""
    r, w = os.pipe()
    start = time.monotonic()
    p = subprocess.Popen([DSH, "--report-fd", str(w)] + list(args), cwd=s.ws, env=s.env(), pass_fds=[w],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    os.close(w)
    try:
        # stderr is one line at most: it cannot fill its own pipe. The report's pipe is not read.
        _, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        os.close(r)
        raise AssertionError("dsh-confine hung on a report nobody read until its exit (%ss): %r" % (timeout, args[:6]))
    took = time.monotonic() - start
    data = b""
    while True:
        b = os.read(r, 1 << 20)
        if not b:
            break
        data += b
    os.close(r)
    return p.returncode, err.decode("utf-8", "replace"), data, took


# -- A reader that reads only after the exit --------------------------------------------------------

@matrix(runner=RUNNERS, supervise=EXEC_SUPERVISE)
def test_late_reader_does_not_hang_on_the_largest_record(s, runner, supervise):
    marker = os.path.join(s.ws, "ran")
    rc, err, data, _ = late_reader(["--mode", "workspace-write", "--root", s.ws, "--runner", runner] + supervise +
                                   many_protected(s) + ["--", "sh", "-c", "echo > ran"], s)
    assert rc == 0, (rc, err)
    assert os.path.exists(marker), err
    lines = data.decode().splitlines()
    records = [json.loads(x) for x in lines]
    check_records(records)
    c = records[0]
    assert c["type"] == "confinement" and len(c["protectedPaths"]) >= MANY, c["type"]
    # Larger than the pipe the caller made: it was grown, not read.
    assert len(lines[0]) > PIPE_DEFAULT, len(lines[0])
    # Compact: an entry is its path and about 100 bytes more, the prose once.
    per_entry = (len(lines[0]) - sum(len(e["path"]) for e in c["protectedPaths"])) / len(c["protectedPaths"])
    assert per_entry < 120, per_entry
    print("# confinement record with %d absent protected paths: %d bytes (%.0f per entry beyond its path)" %
          (len(c["protectedPaths"]), len(lines[0]), per_entry))
    if supervise:
        assert [x["type"] for x in records] == ["confinement", "result"], [x["type"] for x in records]


@matrix(runner=RUNNERS)
def test_late_reader_past_the_bound_is_told_and_nothing_runs(s, runner):
    """A record larger than any pipe can be made (pipe-max-size, 1 MiB; the writer has dropped its
    capabilities by then, root's too): the write waits 10 s for a reader, then the run fails with
    exit 125 and one line saying the report was cut, and the command never starts."""
    marker = os.path.join(s.ws, "ran")
    big = ["y" * 100000] * 12  # argv and execArgv: about 2.4 MB of record
    rc, err, data, took = late_reader(["--mode", "workspace-write", "--root", s.ws, "--runner", runner, "--",
                                       "sh", "-c", "echo > ran", "sh"] + big, s, timeout=90)
    assert rc == 125, (rc, err)
    assert not os.path.exists(marker), err
    assert ("the report's reader took nothing from fd" in err and "for %d s: a record was cut short or not written"
            % WAIT_S in err), err
    assert err.count("\n") == 1, err
    assert WAIT_S - 1 <= took < WAIT_S + 30, took
    # What reached the pipe is a cut line, never one that reads as whole.
    assert not data.endswith(b"\n"), data[-100:]


# -- protectedPaths: a code per entry, the prose once -----------------------------------------------

WHY_NOT = {
    "absent": ("absent when the run started: nothing is mounted for it (no placeholder is left on the host); if "
               "the run creates it, it is renamed aside when the run ends"),
    "landlock": ("landlock cannot make a path inside a writable root read-only (its rights are inherited down the "
                 "tree); use --runner bwrap (or auto where bwrap works)"),
    "outside-roots": "outside the writable roots: read-only already",
}


@matrix(runner=RUNNERS)
def test_why_not_is_a_code_with_its_text_once(s, runner):
    r = sh("true", s, mode="workspace-write", root=s.ws, runner=runner,
           extra=many_protected(s, 20) + ["--protect", "/etc"])
    assert r.rc == 0, r
    c = r.rec("confinement")
    codes = [e["whyNot"] for e in c["protectedPaths"]]
    # An absent path: bwrap mounts nothing for it; Landlock keeps none inside a root.
    code = "absent" if runner == "bwrap" else "landlock"
    assert codes.count(code) >= 20 and "outside-roots" in codes, codes
    assert c["whyNotText"] == {k: WHY_NOT[k] for k in set(codes) if k}, c["whyNotText"]
    # The prose is in the record once, however many entries name it.
    line = json.dumps(c)
    assert line.count(WHY_NOT[code]) == 1, line.count(WHY_NOT[code])
    # Absent paths leave what was asked held (as the gaps judge them), under both runners.
    assert c["held"] is True, (c["notHeld"], c["gaps"])


# -- held ---------------------------------------------------------------------------------------------

def own_effects(c):
    return [g["effect"] for g in c["gaps"] if g["ownEffect"]]


@matrix(runner=RUNNERS, supervise=EXEC_SUPERVISE)
def test_held_in_an_ordinary_workspace_write_run(s, runner, supervise):
    """Every ordinary workspace-write run has the metadata gap (enforcement partial): held is true,
    and that partial is told from any other by held itself."""
    r = sh("true", s, mode="workspace-write", root=s.ws, runner=runner, extra=supervise)
    assert r.rc == 0, r
    c = r.rec("confinement")
    assert c["enforcement"] == "partial" and own_effects(c) == ["metadata"], c["gaps"]
    assert c["held"] is True and c["notHeld"] == [], (c["held"], c["notHeld"])


@matrix(runner=RUNNERS)
def test_held_in_read_only(s, runner):
    r = sh("true", s, mode="read-only", root=s.ws, runner=runner)
    assert r.rc == 0, r
    c = r.rec("confinement")
    assert c["enforcement"] == "full" and c["held"] is True and c["notHeld"] == [], c


@matrix(runner=RUNNERS)
def test_not_held_names_what_is_not(s, runner):
    """--net off with a socket kept: the socket reaches out whatever --net says (a network gap), so
    what was asked does not hold, and notHeld says it is the network."""
    import socket
    a, b = socket.socketpair()
    try:
        fd = a.fileno()
        r = dsh(["--mode", "workspace-write", "--root", s.ws, "--runner", runner, "--net", "off", "--keep-fd",
                 str(fd), "--", "true"], s, extra_fds=[fd])
    finally:
        a.close()
        b.close()
    assert r.rc == 0, r
    c = r.rec("confinement")
    assert c["held"] is False and c["notHeld"] == ["network"], (c["notHeld"], c["network"])


# -- --report-file --------------------------------------------------------------------------------------

@matrix(runner=RUNNERS, supervise=EXEC_SUPERVISE)
def test_report_file_carries_the_records(s, runner, supervise):
    path = os.path.join(s.outside, "report.jsonl")
    p = subprocess.run([DSH, "--report-file", path, "--mode", "workspace-write", "--root", s.ws, "--runner", runner]
                       + supervise + ["--", "sh", "-c", "echo > ran; kill -TERM $$"], cwd=s.ws, env=s.env(),
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    assert os.path.exists(os.path.join(s.ws, "ran")), p
    st = os.lstat(path)
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600, oct(st.st_mode)
    records = [json.loads(x) for x in open(path).read().splitlines()]
    check_records(records)
    assert [x["type"] for x in records] == ["confinement"] + (["result"] if supervise else []), records
    assert len({x["run"] for x in records}) == 1, records
    if supervise:
        res = records[1]
        assert res["signal"] == signal.SIGTERM and res["signalName"] == "SIGTERM", res


def report_file_refused(s, path, mode="workspace-write", timeout=20):
    marker = os.path.join(s.ws, "ran")
    p = subprocess.run([DSH, "--report-file", path, "--mode", mode, "--root", s.ws, "--",
                        "sh", "-c", "echo > ran"], cwd=s.ws, env=s.env(), stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    assert p.returncode == 125, p
    assert not os.path.exists(marker), p
    err = p.stderr.decode()
    assert err.startswith("dsh-confine: --report-file %s: " % path) and err.count("\n") == 1, err
    return err


def test_report_file_that_exists_is_never_opened(s):
    # A file: not truncated, not appended to.
    f = os.path.join(s.outside, "old.jsonl")
    with open(f, "w") as fh:
        fh.write("keep\n")
    err = report_file_refused(s, f)
    assert "it exists" in err and "remove it or name a new path" in err, err
    assert open(f).read() == "keep\n"
    # A symlink, to a file and dangling: the target is neither written nor made.
    target = os.path.join(s.outside, "target")
    with open(target, "w") as fh:
        fh.write("t\n")
    for name, to in (("link", target), ("dangling", os.path.join(s.outside, "made-by-link"))):
        link = os.path.join(s.outside, name)
        os.symlink(to, link)
        report_file_refused(s, link)
        assert os.path.islink(link)
    assert open(target).read() == "t\n" and not os.path.exists(os.path.join(s.outside, "made-by-link"))
    # A FIFO nobody reads: refused at once, not opened (an open for writing would block).
    fifo = os.path.join(s.outside, "fifo")
    os.mkfifo(fifo)
    start = time.monotonic()
    report_file_refused(s, fifo, timeout=10)
    assert time.monotonic() - start < 5


def test_report_file_the_command_could_rewrite_is_refused(s):
    path = os.path.join(s.ws, "report.jsonl")
    err = report_file_refused(s, path)
    assert "is under the writable root %s" % s.ws in err and "outside the writable roots" in err, err
    # The refusal is the file's error record; nothing else ran.
    records = [json.loads(x) for x in open(path).read().splitlines()]
    check_records(records)
    assert [(x["type"], x["code"]) for x in records] == [("error", "REPORT_FD_INVALID")], records
    # The host's /tmp is a writable root too.
    tmp = "/tmp/dsh-e2e-report-%d.jsonl" % os.getpid()
    try:
        report_file_refused(s, tmp)
    finally:
        os.unlink(tmp)
    # In read-only nothing is writable: the workspace is a fine place.
    ro = os.path.join(s.ws, "ro.jsonl")
    r = subprocess.run([DSH, "--report-file", ro, "--mode", "read-only", "--root", s.ws, "--", "true"], cwd=s.ws,
                       env=s.env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    assert r.returncode == 0, r
    assert [json.loads(x)["type"] for x in open(ro).read().splitlines()] == ["confinement"]


def test_report_file_with_report_fd_is_a_usage_error(s):
    path = os.path.join(s.outside, "r.jsonl")
    r = dsh(["--report-file", path, "--", "true"], s)
    assert r.rc == 125 and r.err == "dsh-confine: --report-file and --report-fd both name the report; give one\n", r
    assert not os.path.exists(path) and r.report == [], r


def _report_to(s, path, args, flags=os.O_WRONLY | os.O_CREAT | os.O_TRUNC):
    """dsh-confine with --report-fd on `path` opened as the caller would (3>path)."""
    fd = os.open(path, flags, 0o600)
    try:
        return subprocess.run([DSH, "--report-fd", str(fd)] + args, cwd=s.ws, env=s.env(), pass_fds=[fd],
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    finally:
        os.close(fd)


@matrix(runner=RUNNERS, supervise=EXEC_SUPERVISE)
def test_a_report_fd_the_command_could_rewrite_is_refused(s, runner, supervise):
    # An attack pass (session 25): `--report-fd 3 3>/tmp/r.json` (or a file in the workspace) was
    # accepted; the command opened the file by its name, read the nonce and rewrote the report,
    # padded to length, with a forged read-only, `full` confinement and exit 0. A report fd above 2
    # that is a file by name under a writable root (or a regular file with another name) is now
    # refused like --report-file; a pipe, or a file outside the roots, is not.
    marker = os.path.join(s.ws, "ran")
    args = ["--mode", "workspace-write", "--root", s.ws, "--runner", runner] + supervise + ["--", "touch", marker]
    linked = os.path.join(s.outside, "linked.jsonl")
    open(linked, "w").close()
    os.link(linked, os.path.join(s.ws, "linked-in-ws.jsonl"))
    fifo = os.path.join(s.ws, "fifo")
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", fifo], stdout=subprocess.DEVNULL)
    cases = [(os.path.join(s.ws, "r.jsonl"), "is under the writable root"),
             (os.path.join(s.tmpdir, "r.jsonl"), "is under the writable root"),
             (fifo, "is under the writable root"),
             (linked, "has more than one name")]
    try:
        for path, why in cases:
            flags = os.O_WRONLY if path == fifo else os.O_WRONLY | os.O_CREAT | os.O_TRUNC
            r = _report_to(s, path, args, flags)
            assert r.returncode == 125 and why in r.stderr.decode(), (path, r)
            assert "give the report a pipe, or a file" in r.stderr.decode(), r
            assert not os.path.exists(marker), (path, r)
    finally:
        reader.kill()
        reader.wait()
    # Outside the roots, and in read-only mode (no root the command may write), it is the report.
    out = os.path.join(s.outside, "r.jsonl")
    r = _report_to(s, out, args)
    assert r.returncode == 0 and os.path.exists(marker), r
    assert json.loads(open(out).read().splitlines()[0])["type"] == "confinement"
    inside = os.path.join(s.ws, "ro.jsonl")
    r = _report_to(s, inside, ["--mode", "read-only", "--root", s.ws, "--runner", runner] + supervise + ["--", "true"])
    assert r.returncode == 0 and json.loads(open(inside).read().splitlines()[0])["type"] == "confinement", r
    # A datagram socket: a receiver the command could flood until the report is dropped.
    import socket
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        r = subprocess.run([DSH, "--report-fd", str(theirs.fileno())] + args, cwd=s.ws, env=s.env(),
                           pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
        assert r.returncode == 125 and b"datagram socket" in r.stderr, r
    finally:
        ours.close()
        theirs.close()


# -- Signal names -------------------------------------------------------------------------------------

@matrix(runner=RUNNERS)
def test_signal_names_beside_numbers(s, runner):
    r = sh("kill -KILL $$", s, runner=runner, root=s.ws, extra=["--supervise"])
    res = r.rec("result")
    assert res["signal"] == 9 and res["signalName"] == "SIGKILL", res
    r = sh("exit 3", s, runner=runner, root=s.ws, extra=["--supervise"])
    res = r.rec("result")
    assert res["signal"] is None and res["signalName"] is None, res
    # Forwarded ones: a TERM sent to dsh-confine reaches the command's trap.
    rfd, wfd = os.pipe()
    p = subprocess.Popen([DSH, "--report-fd", str(wfd), "--supervise", "--runner", runner, "--root", s.ws, "--",
                          "sh", "-c", "trap 'exit 7' TERM; echo up; while :; do sleep 0.05; done"], cwd=s.ws,
                         env=s.env(), pass_fds=[wfd], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    os.close(wfd)
    assert p.stdout.readline() == b"up\n"
    p.send_signal(signal.SIGTERM)
    p.communicate(timeout=30)
    with os.fdopen(rfd, "rb") as f:
        records = [json.loads(x) for x in f.read().splitlines()]
    check_records(records)
    res = [x for x in records if x["type"] == "result"][0]
    assert res["exitCode"] == 7 and res["forwardedSignals"] == [15], res
    assert res["forwardedSignalNames"] == ["SIGTERM"], res


# -- The schema ----------------------------------------------------------------------------------------

def test_schema_catches_a_renamed_or_missing_member(s):
    """The records of a real run hold to the schema; each one with a member renamed, dropped or
    misspelled deep inside does not: the schema is strict enough to catch drift either way."""
    r = sh("kill -KILL $$", s, mode="workspace-write", root=s.ws, extra=["--supervise"] + many_protected(s, 2))
    c, res = r.rec("confinement"), r.rec("result")
    assert report_schema.validate(c) == [] and report_schema.validate(res) == [], r

    def renamed(rec, path, new):
        rec = copy.deepcopy(rec)
        at = rec
        for k in path[:-1]:
            at = at[k]
        at[new] = at.pop(path[-1])
        return rec

    def dropped(rec, key):
        rec = copy.deepcopy(rec)
        del rec[key]
        return rec

    cases = [
        renamed(c, ["held"], "hold"),
        renamed(c, ["enforcement"], "enforcment"),
        renamed(c, ["protectedPaths", 0, "whyNot"], "whynot"),
        renamed(c, ["network", "mode"], "mod"),
        renamed(c, ["writableRoots", 0, "persists"], "persist"),
        dropped(c, "whyNotText"),
        dropped(c, "notHeld"),
        renamed(res, ["signalName"], "signame"),
        renamed(res, ["forwardedSignals"], "forwardSignals"),
        dropped(res, "exitCode"),
        dict(c, held="yes"),
        dict(c, protectedPaths=[dict(c["protectedPaths"][0], whyNot=WHY_NOT["absent"])]),
    ]
    for bad in cases:
        assert report_schema.validate(bad) != [], json.dumps(bad)[:400]


if __name__ == "__main__":
    main()
