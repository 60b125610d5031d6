"""Signals, the terminal, and bwrap failing after handover (issue 15), seen from outside.

Every runner (bwrap, landlock), exec and --supervise: a trap on TERM, INT, HUP,
QUIT, USR1, USR2 runs as it does for the bare command and the status a shell sees
is the bare command's. On a pty the test owns (as a user's terminal): `bash -i`
keeps job control, Ctrl-C and Ctrl-Z reach its foreground job, the window size
passes through, `less` works; a child left behind cannot read the user's next
typed line, and a line discipline or mode set inside does not outlive the
command on the user's terminal. bwrap failing after dsh-confine handed over is
125 with an `error` record in exec mode too.
"""
import fcntl
import json
import os
import pty
import re
import select
import shutil
import signal
import struct
import subprocess
import termios
import time

from harness import (DSH, EXEC_SUPERVISE, SANDBOX_UNAVAILABLE, dsh, in_foreground, is_root, main, matrix, need_bwrap,
                     need_landlock, proc_argv, proc_stat, processes_naming, pty_run)

RUNNERS = ("bwrap", "landlock")
MODES = ((), ("--supervise",))
# The background sleep holds no output pipe and is killed by the trap, so each
# run ends when the trap does. The script says "trapped" once its trap is set;
# its job's sleep has an argument of its own ({job}), so that the signal can
# wait for the shell to be in its `wait` (a signal while dash forks the job
# could find the shell dead without its trap's line: 1 run in 50 did).
TRAP = 'trap "echo cleanup; kill \\$!; exit 0" {sig}; echo trapped; sleep {job} >/dev/null 2>&1 & wait'


def _job():
    return "10.%d%06d" % (os.getpid(), int(time.time() * 1e6) % 1000000)


def _wait_for_job(job):
    """Waits until `sleep JOB` runs (the shell has started its job, and waits)."""
    want = b"sleep\0" + job.encode() + b"\0"

    def running():
        for pid in processes_naming(job):
            try:
                with open("/proc/%d/cmdline" % pid, "rb") as f:
                    if f.read() == want:
                        return True
            except OSError:
                pass
        return False
    deadline = time.time() + 30
    while not running() and time.time() < deadline:
        time.sleep(0.005)
    assert running(), "the job never started"


def _need_runners():
    need_bwrap()
    need_landlock()


def _combos():
    for runner in RUNNERS:
        for extra in MODES:
            yield ["--runner", runner] + list(extra)


def _bare(args, s, timeout=30):
    p = subprocess.run(args, env=s.env(), cwd=s.base, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=timeout)
    return p.returncode, p.stdout.decode()


# --- signals -----------------------------------------------------------------------------------

def test_a_trapped_signal_runs_the_commands_handler(s):
    _need_runners()
    # The issue's own case. timeout sends the signal to its child and then to
    # its whole process group, so a command in that group may get it twice
    # (the bare command too): the trap's first line is what is compared.
    # timeout's time is up once the trap is set: timeout(1) runs out when its timer's SIGALRM
    # comes, and one sent to it then is that (exit status 124 included), whatever the load, where
    # a fixed duration had to guess how long the sandbox takes to reach the command.
    for opts in [[]] + list(_combos()):
        job = _job()
        script = TRAP.format(sig="TERM", job=job)
        p = subprocess.Popen(["timeout", "-s", "TERM", "60"] + ([DSH] + opts + ["--"] if opts else []) +
                             ["sh", "-c", script], env=s.env(), cwd=s.base, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            assert p.stdout.readline() == b"trapped\n", opts
            _wait_for_job(job)
            p.send_signal(signal.SIGALRM)
            out = p.stdout.read().decode()
            rc = p.wait(timeout=30)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            p.stdout.close()
            p.stderr.close()
        assert rc == 124 and out.startswith("cleanup\n"), (opts, rc, out)
    # Every forwarded signal, sent once to the process started (what `timeout --foreground`
    # does), as soon as the trap is set: the script says so on its first line.
    for sig in ("TERM", "INT", "HUP", "QUIT", "USR1", "USR2"):
        job = _job()
        script = TRAP.format(sig=sig, job=job)
        want = _signalled(["sh", "-c", script], sig, s, job)
        assert want == (0, "cleanup\n"), (sig, want)
        for opts in _combos():
            job = _job()
            script = TRAP.format(sig=sig, job=job)
            got = _signalled([DSH] + opts + ["--", "sh", "-c", script], sig, s, job)
            assert got == want, (sig, opts, got)


def _signalled(argv, sig, s, job):
    """Runs argv, sends it SIG<sig> once it has printed its first line and its job runs; its
    status and the rest."""
    p = subprocess.Popen(argv, env=s.env(), cwd=s.base, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    try:
        assert p.stdout.readline() == b"trapped\n", argv
        _wait_for_job(job)
        p.send_signal(getattr(signal, "SIG" + sig))
        out = p.stdout.read()
        return p.wait(timeout=30), out.decode()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        p.stdout.close()


def test_death_by_signal_is_seen_as_for_the_bare_command(s):
    _need_runners()
    for sig in ("TERM", "INT", "HUP", "USR1", "KILL"):
        n = getattr(signal, "SIG" + sig)
        bare = _bare(["sh", "-c", "kill -%s $$" % sig], s)
        assert bare[0] == -n, bare
        # What a calling shell reports: 128+n in $?.
        shell = _bare(["sh", "-c", '"$@"; echo "status $?"', "_", "sh", "-c", "kill -%s $$" % sig], s)
        assert shell[1] == "status %d\n" % (128 + n), shell
        for opts in _combos():
            got = _bare([DSH] + opts + ["--", "sh", "-c", "kill -%s $$" % sig], s)
            # Exec mode dies of the same signal (re-raised on itself); --supervise
            # exits 128+n, as documented for the result record.
            assert got[0] == (-n if "--supervise" not in opts else 128 + n), (sig, opts, got)
            got = _bare(["sh", "-c", '"$@"; echo "status $?"', "_", DSH] + opts +
                        ["--", "sh", "-c", "kill -%s $$" % sig], s)
            assert got == shell, (sig, opts, got)


@matrix(mode_args=EXEC_SUPERVISE, batch=["a", "b"])
def test_a_command_that_dies_at_once_is_still_seen_dying(s, mode_args, batch):
    # Under bwrap the command's status reaches dsh-confine through bwrap (as
    # 128+n for a death by signal n) or, exactly, through its pidfd. A command
    # that dies as it starts could be reaped by bwrap's init before
    # dsh-confine found it in /proc (1 to 4 runs in 100, four at a time, did
    # exit 130 instead of dying of SIGINT): the stage now hands its pidfd over
    # before the command exists. Many runs side by side, so that the race has
    # the load it needs.
    need_bwrap()
    import concurrent.futures

    def runs(opts, n):
        want = -signal.SIGINT if "--supervise" not in opts else 128 + signal.SIGINT
        return [got for got in (_bare([DSH] + opts + ["--", "sh", "-c", "kill -INT $$"], s)[0]
                                for _ in range(n)) if got != want]

    # 240 runs a mode, in two batches (two tests, so that they run side by side in the suite).
    opts = ["--runner", "bwrap"] + mode_args
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        wrong = sum(ex.map(lambda _: runs(opts, 30), range(4)), [])
    assert wrong == [], (opts, batch, wrong)


def test_signals_sent_to_dsh_confine_reach_the_command(s):
    _need_runners()
    for opts in _combos():
        p = subprocess.Popen([DSH] + opts + ["--", "sh", "-c",
                              'trap "echo got USR1" USR1; trap "echo got TERM; exit 3" TERM; '
                              'echo ready; while :; do sleep 0.05; done'],
                             env=s.env(), cwd=s.base, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert p.stdout.readline() == b"ready\n", opts
        p.send_signal(signal.SIGUSR1)
        assert p.stdout.readline() == b"got USR1\n", opts
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=10)
        assert out == b"got TERM\n" and p.returncode == 3, (opts, out, err, p.returncode)


# --- bwrap failing after handover --------------------------------------------------------------

def test_bwrap_failing_after_handover_in_exec_mode_is_125_with_an_error_record(s):
    _need_runners()
    # Passes the probe (its child check), fails the real run before it reports
    # child-pid, as bwrap does where user namespaces are refused.
    stub = s.script("fake-bwrap", "#!/bin/sh\n"
                    "for a; do last=$a; done\n"
                    "[ \"$last\" = __dsh_confine_probe_v1 ] && exec /usr/bin/bwrap \"$@\"\n"
                    "echo 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    conf = s.sealed_config({"bwrapPath": stub})
    message = (SANDBOX_UNAVAILABLE.format(mode="read-only") +
               " Runner failure: bwrap exited with status 1 before starting the command")
    r = dsh(["--config", conf, "--runner", "bwrap", "--", "sh", "-c", "echo ran"], s)
    assert r.rc == 125, r
    assert r.out == "", r
    assert r.err == "bwrap: setting up uid map: Permission denied\ndsh-confine: " + message + "\n", r
    assert [x["type"] for x in r.report] == ["error"], r
    e = r.report[0]
    assert e["code"] == "SANDBOX_UNAVAILABLE" and e["exitStatus"] == 125 and e["message"] == message, r


# --- a pty the test owns -----------------------------------------------------------------------

class Term:
    """A pty owned by the test: the user's terminal. `argv` runs as the session leader on it."""

    def __init__(self, argv, s, rows=24, cols=80):
        self.master, self.slave = pty.openpty()
        fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        slave = self.slave
        self.initial = self.modes()

        def session():
            os.setsid()
            fcntl.ioctl(slave, termios.TIOCSCTTY, 0)

        self.p = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, preexec_fn=session,
                                  env=dict(s.env(), TERM="xterm"), cwd=s.base, close_fds=True)
        self.out = b""

    def send(self, data):
        os.write(self.master, data)

    def read_some(self, t=0.1):
        r, _, _ = select.select([self.master], [], [], t)
        if r:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                return False
            self.out += chunk
            return bool(chunk)
        return True

    def expect(self, pattern, timeout=10):
        start = len(self.out)
        deadline = time.time() + timeout
        rx = re.compile(pattern.encode() if isinstance(pattern, str) else pattern)
        while time.time() < deadline:
            m = rx.search(self.out, start)
            if m:
                return m
            if not self.read_some():
                break
        raise AssertionError("no %r in %r" % (pattern, self.out[-3000:]))

    def settle(self, t=0.3):
        deadline = time.time() + t
        while time.time() < deadline:
            self.read_some(0.05)

    def foreground(self, comm, timeout=10):
        """Reads on until a process named `comm`, below the session's leader, is the foreground
        group of its terminal: a key typed after that reaches it, not the shell before its fork."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if in_foreground(self.p.pid, comm):
                return
            self.read_some(0.02)
        raise AssertionError("no %r in the foreground: %r" % (comm, self.out[-3000:]))

    def wait(self, timeout=10):
        deadline = time.time() + timeout
        while self.p.poll() is None and time.time() < deadline:
            self.read_some(0.05)
        if self.p.poll() is None:
            self.p.kill()
            raise AssertionError("still running: %r" % self.out[-3000:])
        self.settle(0.1)
        return self.p.returncode

    def modes(self):
        return termios.tcgetattr(self.slave), struct.unpack("i", fcntl.ioctl(self.slave, termios.TIOCGETD,
                                                                             b"\0" * 4))[0]

    def close(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()
        os.close(self.master)
        os.close(self.slave)


BASH = ["env", "PS1=PROMPT> ", "bash", "--norc", "--noprofile", "-i"]


def test_bash_i_gets_job_control_on_a_pty(s):
    _need_runners()
    for opts in _combos():
        t = Term([DSH] + opts + ["--"] + BASH, s)
        try:
            t.expect("PROMPT> ")
            t.send(b"tty\n")
            # A terminal, by the name the bare command's has (under bwrap a
            # pty of the sandbox's own devpts: see the test below).
            t.expect(r"/dev/pts/\d+\r\n")
            t.send(b"set -o | grep '^monitor'\n")
            t.expect(r"monitor\s+on")
            # Ctrl-C stops the foreground job and returns to the confined shell.
            t.send(b"sleep 100\n")
            t.foreground("sleep")
            t.send(b"\x03")
            t.expect("PROMPT> ")
            t.send(b"echo alive-$((6*7))\n")
            t.expect("alive-42")
            # Ctrl-Z stops it; the shell's job control takes it back.
            t.send(b"sleep 100\n")
            t.foreground("sleep")
            t.send(b"\x1a")
            t.expect("Stopped")
            t.send(b"kill -9 %1; echo killed-$((1+1))\n")
            t.expect("killed-2")
            # The window size reaches the command, at start and on a change.
            t.send(b"stty size\n")
            t.expect(r"24 80\r\n")
            fcntl.ioctl(t.master, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 101, 0, 0))
            os.killpg(t.p.pid, signal.SIGWINCH)  # what the terminal emulator's resize does
            t.settle(0.2)
            t.send(b"stty size\n")
            t.expect(r"33 101\r\n")
            t.send(b"exit 5\n")
            assert t.wait() == 5, (opts, t.out[-2000:])
            assert b"no job control" not in t.out and b"cannot set terminal process group" not in t.out, t.out
        finally:
            t.close()


def _names_said(argv, s):
    """What `argv` (a script that ends by saying done-42) printed as /dev/ names on a Term."""
    t = Term(argv, s)
    try:
        t.expect("done-42")
        assert t.wait() == 0, (argv, t.out[-2000:])
        return re.findall(rb"(/dev/\S+)\r\n", t.out)
    finally:
        t.close()


def test_tty_names_the_commands_terminal_as_for_the_bare_command(s):
    """`tty` (glibc's ttyname) names the command's terminal /dev/pts/N, as for the bare command.
    Under bwrap it said /dev/console (issue 42): bwrap's --dev binds the launcher's pty, of the
    host's devpts, there; the stage now makes the command's pty from the sandbox's own devpts and
    hands its master out. A pty made inside (`script`) comes from that devpts too."""
    _need_runners()
    script = "tty; echo done-$((6*7))"
    bare = _names_said(["sh", "-c", script], s)
    assert len(bare) == 1 and re.fullmatch(rb"/dev/pts/\d+", bare[0]), bare
    for opts in _combos():
        for mode in ((), ("--mode", "workspace-write", "--root", s.ws)):
            got = _names_said([DSH] + opts + list(mode) + ["--", "sh", "-c", script], s)
            assert len(got) == 1 and re.fullmatch(rb"/dev/pts/\d+", got[0]), (opts, mode, got)
    if not shutil.which("script"):
        return
    nested = "tty; script -qc tty /dev/null; echo done-$((6*7))"
    for extra in MODES:
        got = _names_said([DSH, "--runner", "bwrap"] + list(extra) + ["--", "sh", "-c", nested], s)
        assert len(got) == 2 and all(re.fullmatch(rb"/dev/pts/\d+", g) for g in got) and got[0] != got[1], \
            (extra, got)


def test_a_resize_while_the_foreground_group_has_lost_its_leader_keeps_the_terminal(s):
    # `true | sleep 1`: the pipeline's group leader (true) is gone while the job runs, so the
    # pty's foreground group names no process. A SIGWINCH then (just after typed input, when the
    # relay looks for a stopped job) once ended the relay: the poll's EINTR was read after a
    # failed /proc lookup had changed errno, and the shell was left with nobody relaying.
    _need_runners()
    for opts in _combos():
        t = Term([DSH] + opts + ["--"] + BASH, s)
        try:
            t.expect("PROMPT> ")
            t.send(b"true | sleep 1; echo after-$((2+3))\n")
            t.settle(0.3)
            os.killpg(t.p.pid, signal.SIGWINCH)
            t.expect(r"after-5\r\n", timeout=10)
            t.send(b"exit 4\n")
            assert t.wait() == 4, (opts, t.out[-2000:])
        finally:
            t.close()


# Under landlock a monitor leads the pty's session and the command is its child in a group of its
# own (a group led by the session leader would be orphaned, and the kernel never stops those on
# Ctrl-Z); under bwrap, bwrap's init is that parent.


def _stops_and_fg_continues(s, line, last, stop=None, before_fg=None):
    # The user's own shell on the test's pty runs `line`, whose job stops (on `stop(t)`, or by
    # itself): the shell says so, `fg` continues it to its `last` line, the status is its own.
    t = Term(BASH, s)
    try:
        t.expect("PROMPT> ")
        t.send(line.encode())
        if stop:
            stop(t)
        t.expect("Stopped", timeout=20)
        t.send(b"echo waiting-$((2*3))\n")
        t.expect("waiting-6")
        assert last.encode() not in t.out, (line, t.out[-2000:])
        if before_fg:
            before_fg()
        t.send(b"fg\n")
        # The prompt before typing (typed before, it would be the command's input); one pattern,
        # as it may come in the same read as the line before it.
        t.expect(last + r"\r\n.*PROMPT> ", timeout=20)
        t.send(b"echo rc=$?\n")
        t.expect(r"rc=0\r\n")
        t.send(b"exit\n")
        t.wait()
    finally:
        t.close()


def _ctrl_z_stops_and_fg_continues(s, opts, when_started):
    # A command that is not a shell, Ctrl-Z typed once `when_started` returns.
    def stop(t):
        when_started(t)
        t.send(b"\x1a")

    # No fork in the command: dash vforks `sleep`, and a Ctrl-Z that lands between that vfork and
    # the exec stops the child while the parent waits uninterruptibly for it, bare or confined,
    # so the job never reads as stopped.
    # It runs until the test lets it end (a file made once the job is seen stopped), not for a
    # guessed time; it ends only if `fg` continues it.
    go = s.p("base", "go")
    if os.path.exists(go):
        os.unlink(go)
    line = ("%s --mode workspace-write %s -- python3 -c \"import os, time; next((i for i in range(6000) "
            "if os.path.exists('%s') or time.sleep(0.01)), 0); print('slept-%%d' %% 12)\"\n") % (
                DSH, " ".join(opts), go)
    _stops_and_fg_continues(s, line, "slept-12", stop, before_fg=lambda: open(go, "w").close())


def test_ctrl_z_on_a_direct_command_stops_the_job_in_the_users_shell(s):
    _need_runners()
    for opts in _combos():
        _ctrl_z_stops_and_fg_continues(s, opts, lambda t: t.foreground("python3"))


def test_ctrl_z_typed_while_bwrap_starts_stops_the_command(s):
    # Typed before the command is in front of the pty (here bwrap has not even started: a
    # wrapper sleeps 1 s first), Ctrl-Z stops the command once it is, as it stops a bare command
    # typed that early. Relayed at once, it went to the group of the pty's session leader, which
    # is orphaned: the kernel discarded it, and the command ran on to its end.
    need_bwrap()
    stub = s.p("base", "slow-bwrap")
    with open(stub, "w") as f:
        f.write("#!/bin/sh\nfor last; do :; done\n"
                "if [ \"$last\" != __dsh_confine_probe_v1 ]; then echo wrapper-$((5*5)); sleep 1; fi\n"
                "exec /usr/bin/bwrap \"$@\"\n")
    os.chmod(stub, 0o755)
    conf = s.sealed_config({"bwrapPath": stub}, "slow-bwrap")
    for extra in MODES:
        _ctrl_z_stops_and_fg_continues(s, ["--root", s.ws, "--config", conf, "--runner", "bwrap"] + list(extra),
                                       lambda t: t.expect("wrapper-25"))


def _self_stop(s, prefix, sig):
    # A command that stops itself, nothing typed.
    _stops_and_fg_continues(s, "%ssh -c 'kill -%s $$; echo resumed-$((3+4))'\n" % (prefix, sig), "resumed-7")


def test_a_command_that_stops_itself_stops_the_job_in_the_users_shell(s):
    # The relay once looked for a stop only just after typed input: a command stopped by a
    # signal from elsewhere (itself here, `kill -STOP` from another terminal alike) left the
    # user's shell waiting on dsh-confine, with no prompt and no job to `fg`.
    _need_runners()
    for sig in ("TSTP", "STOP"):
        _self_stop(s, "", sig)  # the bare command, as the reference
        for opts in _combos():
            _self_stop(s, "%s --mode workspace-write %s -- " % (DSH, " ".join(opts)), sig)


def _continued_in_the_background(s, prefix):
    # A background job whose command stops itself, continued by `kill -CONT %1`: it goes on to
    # its end and the job ends.
    t = Term(BASH, s)
    token = "stopper-%d-%d" % (os.getpid(), time.monotonic_ns())  # the command's $0: this run's alone
    try:
        t.expect("PROMPT> ")
        t.send(("%ssh -c 'kill -STOP $$; echo resumed-$((3+4))' %s &\n" % (prefix, token)).encode())
        t.expect("PROMPT> ")
        # The command stopped (under the sanitizers and load it can take over 1.5 s to get there,
        # and a SIGCONT before its stop continues nothing), then a look by dsh-confine (200 ms).
        deadline = time.monotonic() + 30
        while not any((proc_stat(p) or ("", ""))[1] == "T" for p in processes_naming(token)):
            assert time.monotonic() < deadline, ("the command never stopped", prefix, t.out[-2000:])
            time.sleep(0.02)
        t.settle(0.5)
        assert b"resumed-7" not in t.out, (prefix, t.out[-2000:])
        t.send(b"kill -CONT %1\n")
        t.expect("resumed-7", timeout=20)
        t.send(b"wait; echo waited-$((4*4))\n")
        t.expect(r"waited-16\r\n", timeout=20)
        t.send(b"exit\n")
        t.wait()
    finally:
        t.close()


def test_a_sigcont_to_the_job_continues_a_stopped_command(s):
    # Stopped while dsh-confine was not in front of the terminal (a background job, or
    # `kill -STOP` from elsewhere), the command did not stop dsh-confine, and a SIGCONT to the
    # job (`kill -CONT %1`, or the caller's shell continuing its jobs as it exits) reached
    # dsh-confine alone: the command stayed stopped for ever.
    _need_runners()
    _continued_in_the_background(s, "")  # the bare command, as the reference
    for opts in _combos():
        _continued_in_the_background(s, "%s --mode workspace-write %s -- " % (DSH, " ".join(opts)))


def test_less_in_raw_mode_works_and_the_terminal_is_restored(s):
    _need_runners()
    path = s.p("ws", "pages.txt")
    with open(path, "w") as f:
        f.writelines("line %d\n" % i for i in range(1, 200))
    for opts in _combos():
        t = Term([DSH] + opts + ["--", "less", path], s)
        try:
            before = t.initial
            t.expect("line 1\r?\n(.|\n)*pages.txt")
            t.settle(0.5)
            t.send(b" ")  # a page further: raw input reaches it
            t.expect("line 4[0-9]")
            t.send(b"q")
            assert t.wait() == 0, (opts, t.out[-2000:])
            assert t.modes() == before, opts
        finally:
            t.close()


def test_no_pty_gives_the_command_the_callers_terminal(s):
    _need_runners()
    for opts in _combos():
        t = Term(["sh", "-c", 'tty; "$@"', "_", DSH, "--no-pty"] + opts + ["--", "tty"], s)
        try:
            assert t.wait() == 0, t.out
            lines = t.out.decode().split()
            # Landlock: the same terminal; bwrap: a session of its own, where the
            # caller's terminal is still fd 0 (its name, not a pty of ours).
            want = lines[0] if "landlock" in opts else "/dev/console"
            assert lines[0].startswith("/dev/pts/") and lines[1] == want, (opts, lines)
        finally:
            t.close()


# --- the terminal attacks ----------------------------------------------------------------------

# Left behind after the command exits: ignores SIGTTOU/SIGTTIN/SIGHUP, takes the
# foreground of its terminal and reads whatever is typed next into a file. It
# writes <file>.armed once it has tried to take the terminal, and reads on.
THIEF = r"""
import os, select, signal, sys, time
for n in (signal.SIGTTOU, signal.SIGTTIN, signal.SIGHUP):
    signal.signal(n, signal.SIG_IGN)
if os.fork():
    os._exit(0)
out = sys.argv[1]
with open(out + ".pid", "w") as f:
    f.write(str(os.getpid()))
deadline = time.time() + 4
while time.time() < deadline:
    try:
        os.setpgid(0, 0)
    except OSError:
        pass
    try:
        os.tcsetpgrp(0, os.getpgrp())
    except OSError:
        pass
    if not os.path.exists(out + ".armed"):
        open(out + ".armed", "w").close()
    try:
        r, _, _ = select.select([0], [], [], 0.1)
        if r:
            data = os.read(0, 100)
            with open(out, "ab") as f:
                f.write(b"STOLEN:" + data)
    except OSError:
        time.sleep(0.1)
"""


def test_a_child_left_behind_cannot_read_the_users_next_line(s):
    _need_runners()
    loot = s.p("ws", "loot")
    for opts in _combos():
        for f in (loot, loot + ".pid", loot + ".armed"):
            if os.path.exists(f):
                os.unlink(f)
        # The user's shell: runs the command, then reads the user's next line.
        t = Term(["sh", "-c", '"$@"; echo DONE; read line; echo "shell got [$line]"', "_", DSH,
                  "--mode", "workspace-write", "--root", s.ws] + opts +
                 ["--", "python3", "-c", THIEF, loot], s)
        try:
            t.expect("DONE")
            # Typed once the thief has tried to take the terminal (and reads it), or is gone (under
            # bwrap it dies with the sandbox's namespace).
            deadline = time.time() + 10
            while not os.path.exists(loot + ".armed") and _thief_alive(loot) and time.time() < deadline:
                time.sleep(0.01)
            assert os.path.exists(loot + ".armed") or not _thief_alive(loot), (opts, "the thief never started")
            t.send(b"hunter2\n")
            t.expect(r"shell got \[hunter2\]", timeout=8)
            assert t.wait() == 0, (opts, t.out)
            # Ended now, it writes nothing more: what it stole is all in the file.
            _wait_for_thief(loot + ".pid", kill=True)
            stolen = open(loot, "rb").read() if os.path.exists(loot) else b""
            assert b"hunter2" not in stolen, (opts, stolen)
        finally:
            t.close()
            _wait_for_thief(loot + ".pid")


def _is_thief(pid, loot):
    """Whether `pid` runs the thief of `loot` (python3 -c THIEF loot; not a zombie)."""
    argv, st = proc_argv(pid), proc_stat(pid)
    if not argv or not st:
        return False
    return os.path.basename(argv[0]).startswith(b"python3") and loot.encode() in argv and st[1] not in ("Z", "X")


def _thief_alive(loot):
    return any(_is_thief(pid, loot) for pid in processes_naming(loot))


def _wait_for_thief(pidfile, kill=False):
    # Nothing of the test may outlive it (it writes into the scratch): ended at once with `kill`.
    try:
        pid = int(open(pidfile).read())
    except (OSError, ValueError):
        return
    # The pid is the thief's only if it names the loot (under bwrap it is a
    # pid of the sandbox's namespace, and the thief died with it).
    def thief():
        return _is_thief(pid, pidfile[:-4])
    if kill and thief():
        os.kill(pid, signal.SIGKILL)
    deadline = time.time() + 8
    while thief() and time.time() < deadline:
        time.sleep(0.01)
    if thief():
        os.kill(pid, signal.SIGKILL)


def test_a_line_discipline_or_mode_set_inside_does_not_outlive_the_command(s):
    _need_runners()
    n_null = 27
    setd = ("import fcntl, struct, termios, os; "
            "fcntl.ioctl(0, termios.TIOCSETD, struct.pack('i', %d)); "
            "os.system('stty -echo -icanon </dev/tty 2>/dev/null; stty -echo -icanon')" % n_null)
    for opts in _combos():
        t = Term([DSH] + opts + ["--", "python3", "-c", setd], s)
        try:
            before = t.initial
            assert before[1] == 0, before
            t.wait()
            after = t.modes()
            assert after[1] == before[1], (opts, "line discipline", after[1])
            assert after[0] == before[0], (opts, "modes", before[0], after[0])
        finally:
            t.close()


@matrix(supervise=EXEC_SUPERVISE)
def test_the_terminal_bwrap_binds_at_dev_console_keeps_its_mode(s, supervise):
    # bwrap's --dev binds the terminal on fd 1 at /dev/console: dsh-confine's pty on the host,
    # which the caller owns. A third attack pass (session 25) chmodded it to 0666 from a
    # workspace-write run as a user, and another user then wrote to the caller's terminal. It is
    # read-only now (bwrap's --remount-ro; root's stage seals every device node itself).
    need_bwrap()
    rc, out = pty_run(["--runner", "bwrap", "--mode", "workspace-write", "--root", s.ws] + supervise +
                      ["--", "sh", "-c", "chmod 666 /dev/console 2>/dev/null && echo changed || echo kept"], s)
    assert rc == 0 and "kept" in out and "changed" not in out, (rc, out)


if __name__ == "__main__":
    main()
