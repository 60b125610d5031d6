"""A deadline nothing can hold up, and terminal answers that outlive the command (issue 38).

Every runner (bwrap, landlock) x mode (read-only, workspace-write) x exec/--supervise, on a pty
the test owns (the caller's terminal), with --timeout 1s --kill-after 1s:
- a command that stops itself (`kill -STOP $$`) under the caller's shell, with a background job:
  the stop is mirrored (the shell says Stopped), and still dsh-confine ends by the deadline
  (the shell reports the job's end with 124) and nothing of the run is left;
- a command that floods a terminal nobody reads: dsh-confine ends by the deadline with 124 and
  nothing of the run is left;
- a command that writes a cursor-position query (ESC[6n) and exits, on a terminal that answers it
  (late, as a remote one does): the answer never reaches the next reader of the terminal.
"""
import os
import re
import signal
import time

from harness import DSH, EXEC_SUPERVISE, main, matrix, proc_stat, processes_naming
from test_terminal import BASH, Term

RUNNERS = ("bwrap", "landlock")
MODES = ("read-only", "workspace-write")
TIMEOUT, KILL_AFTER = 1, 1
# What "within the timeout plus the kill delay" allows for a start-up on a loaded machine.
SLACK = 8


def _job():
    return "10.%d%06d" % (os.getpid(), int(time.time() * 1e6) % 1000000)


def _args(s, runner, mode, supervise):
    return (["--runner", runner, "--mode", mode, "--root", s.ws] + list(supervise) +
            ["--timeout", "%ds" % TIMEOUT, "--kill-after", "%ds" % KILL_AFTER])


def _left(job):
    """Live processes whose command line names `job` (dsh-confine and the command's)."""
    return [p for p in processes_naming(job) if (proc_stat(p) or ("", "Z"))[1] not in ("Z", "X")]


def _gone_by(job, deadline):
    while _left(job) and time.time() < deadline:
        time.sleep(0.02)
    return _left(job)


def _end(job):
    # Nothing of the test outlives it, whatever the build under test did (stopped ones too).
    for p in _left(job):
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass


@matrix(runner=RUNNERS, mode=MODES, supervise=EXEC_SUPERVISE)
def test_a_command_that_stops_itself_cannot_hold_the_deadline(s, runner, mode, supervise):
    # dsh-confine followed the command's stop by stopping itself (so the caller's shell sees its
    # job stopped, as for the bare command), and with it the clock: the background job ran on
    # past the timeout for as long as the job stayed stopped.
    job = _job()
    t = Term(BASH, s)
    try:
        t.expect("PROMPT> ")
        line = "%s %s -- sh -c 'sleep %s & kill -STOP $$'\n" % (DSH, " ".join(_args(s, runner, mode, supervise)), job)
        t.send(line.encode())
        start = time.time()
        t.expect("Stopped", timeout=20)  # the stop is mirrored to the caller's job control
        left = _gone_by(job, start + TIMEOUT + KILL_AFTER + SLACK)
        assert not left, ("still running after %.1f s" % (time.time() - start), left, t.out[-2000:])
        # The shell saw its job continued and ended with the timeout's status: asked until it
        # says so (dsh-confine's own end comes after its processes', slowly under the sanitizers).
        ends = time.time() + 30
        n = 0
        while not re.search(rb"Exit 124", t.out):
            assert time.time() < ends, t.out[-2000:]
            n += 1
            t.send(b"jobs; echo jobs-$((%d*3))\n" % n)
            t.expect(r"jobs-%d\r\n" % (n * 3))
            t.send(b"\n")
            t.expect(r"PROMPT> ")
            if not re.search(rb"Exit 124", t.out):
                time.sleep(0.1)
        t.send(b"exit\n")
        t.wait()
    finally:
        _end(job)
        t.close()


@matrix(runner=RUNNERS, mode=MODES, supervise=EXEC_SUPERVISE)
def test_a_command_that_floods_an_undrained_terminal_cannot_hold_the_deadline(s, runner, mode, supervise):
    # The relay wrote to the caller's terminal with a blocking write, in the loop that keeps the
    # deadline: a terminal that took nothing (stopped, or not read, as here) held the timeout.
    job = _job()
    t = Term([DSH] + _args(s, runner, mode, supervise) + ["--", "sh", "-c", "sleep %s & yes" % job], s)
    try:
        start = time.time()
        # The terminal is never read.
        deadline = start + TIMEOUT + KILL_AFTER + SLACK
        while t.p.poll() is None and time.time() < deadline:
            time.sleep(0.02)
        assert t.p.poll() is not None, "still running after %.1f s" % (time.time() - start)
        assert t.p.returncode == 124, t.p.returncode
        assert not _gone_by(job, time.time() + 2), _left(job)
        # What it wrote did reach the terminal (it was a flood, not a quiet run).
        t.read_some(1)
        assert t.out.startswith(b"y\r\n"), t.out[:100]
    finally:
        _end(job)
        t.close()


# A terminal's answers, as an emulator gives them: the cursor position and the device attributes.
ANSWERS = {b"\x1b[6n": b"\x1b[24;1R", b"\x1b[c": b"\x1b[?62;22c"}


def _answering(t, until, delay, timeout=20):
    """Reads as a terminal emulator does until `until` has been shown, answering each query it
    shows, `delay` seconds after it came (a remote terminal's round trip), in order."""
    seen = 0
    due = []
    deadline = time.time() + timeout
    while time.time() < deadline:
        t.read_some(0.01)
        while True:
            hits = [(t.out.find(q, seen), q) for q in ANSWERS if t.out.find(q, seen) >= 0]
            if not hits:
                break
            at, q = min(hits)
            due.append((time.time() + delay, ANSWERS[q]))
            seen = at + len(q)
        while due and due[0][0] <= time.time():
            t.send(due.pop(0)[1])
        if until in t.out and not due:
            return
    raise AssertionError("no %r in %r" % (until, t.out[-2000:]))


@matrix(runner=RUNNERS, mode=MODES, supervise=EXEC_SUPERVISE)
def test_answers_to_a_query_the_command_left_never_reach_the_next_reader(s, runner, mode, supervise):
    # The command asks for the cursor position and exits; the terminal's answer came after
    # dsh-confine had handed the terminal back, as input typed into the caller's shell.
    t = Term(["sh", "-c", '"$@"; echo DONE; read line; echo "got [$line]"', "_", DSH] +
             _args(s, runner, mode, supervise) + ["--", "printf", "\\033[6n"], s)
    try:
        _answering(t, b"DONE", delay=0.2)
        t.settle(0.3)  # any answer still on its way has come
        t.send(b"next\n")
        m = t.expect(r"got \[(.*)\]")
        assert m.group(1) == b"next", m.group(0)
        assert t.wait() == 0, t.out
    finally:
        t.close()


if __name__ == "__main__":
    main()
