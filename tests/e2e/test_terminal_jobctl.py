"""Outer job control on a terminal (issue 42, second pass), seen from outside.

The caller's own interactive shell (`bash -i`, with job control) on a pty the test owns, every
runner (bwrap, landlock) x exec/--supervise, root and user, each case against the bare command run
the same way in the same kind of shell:
- `cat &`: the job shows `Stopped (tty input)` in `jobs -l` (dsh-confine never read the caller's
  terminal behind its shell's back, nor left its job `Running` while the command waited on its
  pty); `fg` then gives the command the terminal: a typed line reaches it, Ctrl-D ends it, the
  status is its own and the terminal's modes (`stty -g` as the next command sees them, and the line
  discipline) are as before;
- Ctrl-Z, `bg`, `fg` on an interactive program in raw mode (less): `jobs -l` says what it says for
  the bare program after `bg`, and after `fg` typed keys reach it (it moves to its last page and
  quits), the modes as before;
- `--timeout 2s ... cat &`: stopped on tty input in the background, the job still ends by its
  deadline (status 124) with nothing of it left, and the terminal's modes are untouched.
"""
import os
import re
import signal
import time

from harness import DSH, EXEC_SUPERVISE, main, matrix, proc_stat, processes_naming
from test_terminal import BASH, Term

RUNNERS = ("bwrap", "landlock")


def _token():
    """A `sleep` argument of this run's alone (what names its processes)."""
    return "10.%d%06d" % (os.getpid(), int(time.time() * 1e6) % 1000000)


def _prefix(s, runner, supervise):
    return "%s --runner %s --mode workspace-write --root %s %s -- " % (DSH, runner, s.ws, " ".join(supervise))


def _jobs(t, n):
    """What `jobs -l` says now (plain `jobs` says only "Stopped", whatever the signal)."""
    t.send(b"jobs -l; echo jobs-done-$((%d*7))\n" % n)
    m = t.expect(r"(?s)jobs-done-%d\r\n.*?PROMPT> " % (n * 7))
    # The echoed line comes first; what jobs printed sits between it and the marker.
    start = t.out.rfind(b"jobs-done-$((", 0, m.start())
    return t.out[start:m.start()].decode(errors="replace")


def _wait_jobs(t, pattern, timeout=20):
    """Asks `jobs` until it says `pattern`; returns its last answer."""
    deadline = time.time() + timeout
    n = 0
    while True:
        n += 1
        said = _jobs(t, n)
        if re.search(pattern, said) or time.time() > deadline:
            return said
        time.sleep(0.2)


def _modes(t, n):
    """The terminal's modes as the next command sees them (`stty -g`, run by the shell, which has
    put its own line editor's modes away by then) and its line discipline."""
    t.send(b"stty -g; echo stty-done-$((%d*9))\n" % n)
    m = t.expect(r"(?s)[\r\n]([0-9a-f:]+)\r\nstty-done-%d\r\n.*?PROMPT> " % (n * 9))
    return m.group(1), t.modes()[1]


def _exits_zero_then_modes(t):
    """Back at the shell's prompt: the job's status is 0, and the terminal's modes after it (as
    _modes reads them); then the shell exits."""
    t.expect("PROMPT> ")
    t.send(b"echo rc=$?\n")
    t.expect(r"rc=0\r\n")
    after = _modes(t, 2)
    t.send(b"exit\n")
    t.wait()
    return after


def _left(token):
    return [p for p in processes_naming(token) if (proc_stat(p) or ("", "Z"))[1] not in ("Z", "X")]


def _end(token):
    for p in _left(token):
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass


def _background_read(s, prefix):
    """`PREFIX cat &`, then `fg` and a typed line; returns (what jobs said, modes before, after)."""
    t = Term(BASH, s)
    try:
        t.expect("PROMPT> ")
        before = _modes(t, 1)
        t.send(("%scat &\n" % prefix).encode())
        t.expect("PROMPT> ")
        said = _wait_jobs(t, r"Stopped \(tty input\)")
        t.send(b"fg\n")
        # In front again (the shell echoed its job's line): a moment for the relay, then typed.
        t.expect(r"cat\r\n")
        t.settle(0.5)
        t.send(b"typed-%d\n" % 42)
        # The terminal's echo (the pty's, relayed), then cat's own copy of the line.
        t.expect(r"typed-42\r\ntyped-42\r\n", timeout=10)
        t.send(b"\x04")
        after = _exits_zero_then_modes(t)
        return said, before, after
    finally:
        t.close()


@matrix(runner=RUNNERS, supervise=EXEC_SUPERVISE)
def test_a_background_reader_stops_on_tty_input_and_fg_gives_it_the_terminal(s, runner, supervise):
    # dsh-confine started behind its shell relayed nothing and let the command wait on its own
    # pty: `jobs` said Running, and after `fg` (no SIGCONT for a running job) the caller's
    # terminal stayed cooked and nothing typed reached the command.
    bare = _background_read(s, "")
    assert "Stopped (tty input)" in bare[0], bare[0]
    said, before, after = _background_read(s, _prefix(s, runner, supervise))
    assert "Stopped (tty input)" in said, said
    assert after == before, (before, after)
    assert bare[2] == bare[1]


LESS_LINES = 300


def _ctrl_z_bg_fg(s, prefix, path):
    """`PREFIX less FILE`, Ctrl-Z, `bg`, `fg`, then G and q typed; returns (jobs after bg, modes)."""
    t = Term(BASH, s)
    try:
        t.expect("PROMPT> ")
        before = _modes(t, 1)
        t.send(("%sless %s\n" % (prefix, path)).encode())
        t.expect(r"page-line 1\b")
        t.foreground("less")
        t.settle(0.3)
        t.send(b"\x1a")
        t.expect(r"(?s)Stopped.*?PROMPT> ", timeout=20)
        t.send(b"bg\n")
        t.expect(r"(?s)bg\r\n.*?PROMPT> ")
        said = _wait_jobs(t, r"Stopped \(tty (input|output)\)")
        t.send(b"fg\n")
        t.expect(r"less [^\r]*\r\n")
        t.settle(0.8)
        # Typed keys reach it: its last page, then quit.
        t.send(b"G")
        t.expect(r"page-line %d\b" % (LESS_LINES - 1), timeout=10)
        t.settle(0.2)
        t.send(b"q")
        after = _exits_zero_then_modes(t)
        return re.findall(r"Stopped \(tty \w+\)|Stopped|Running", said), before, after
    finally:
        t.close()


@matrix(runner=RUNNERS, supervise=EXEC_SUPERVISE)
def test_ctrl_z_bg_fg_on_an_interactive_program_gives_it_the_terminal_again(s, runner, supervise):
    # After `bg` the command ran on in front of its pty while dsh-confine was behind: the job
    # said Running, `fg` sent no SIGCONT, the terminal stayed cooked and less froze.
    path = s.p("ws", "pages-%d.txt" % os.getpid())
    with open(path, "w") as f:
        f.writelines("page-line %d\n" % i for i in range(1, LESS_LINES))
    bare = _ctrl_z_bg_fg(s, "", path)
    said, before, after = _ctrl_z_bg_fg(s, _prefix(s, runner, supervise), path)
    assert said == bare[0], (said, bare[0])
    assert after == before, (before, after)


TIMEOUT = 4


@matrix(runner=RUNNERS, supervise=EXEC_SUPERVISE)
def test_the_timeout_fires_while_the_job_is_stopped_on_tty_input(s, runner, supervise):
    # Behind its shell and stopped like the bare reader, dsh-confine still ends the run by its
    # deadline: the stop never holds the clock (issue 38's waker, kept for this stop too).
    token = _token()
    t = Term(BASH, s)
    try:
        t.expect("PROMPT> ")
        before = _modes(t, 1)
        start = time.time()
        t.send(("%s --runner %s --mode workspace-write --root %s %s --timeout %ds --kill-after 1s -- "
                "sh -c 'sleep %s & exec cat' &\n" % (DSH, runner, s.ws, " ".join(supervise), TIMEOUT,
                                                       token)).encode())
        t.expect("PROMPT> ")
        said = _wait_jobs(t, r"Stopped \(tty input\)", timeout=TIMEOUT - 1)
        assert "Stopped (tty input)" in said, (said, "%.1f s" % (time.time() - start))
        # The shell reports the job's end (at a prompt) with the timeout's status.
        n = 100
        while b"Exit 124" not in t.out and time.time() < start + TIMEOUT + 1 + 15:
            n += 1
            _jobs(t, n)
            time.sleep(0.2)
        assert b"Exit 124" in t.out, t.out[-2000:]
        deadline = time.time() + 5
        while _left(token) and time.time() < deadline:
            time.sleep(0.05)
        assert not _left(token), _left(token)
        # Behind all along: the terminal's modes were never touched.
        assert _modes(t, 2) == before
        t.send(b"exit\n")
        t.wait()
    finally:
        _end(token)
        t.close()


if __name__ == "__main__":
    main(globals())
