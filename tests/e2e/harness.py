"""The end-to-end harness: run the real binary, verify the world from outside.

Every test_* function receives a fresh Scratch under /var/tmp (never /tmp, which
is a writable root in workspace-write). Run a file with tests/e2e/run.py.
"""
import ctypes
import fcntl
import inspect
import json
import os
import pty
import select
import shutil
import subprocess
import sys
import tempfile
import termios
import threading
import time
import traceback

DSH = os.environ.get("DSH_CONFINE", "dsh-confine")
AS = os.environ.get("DSH_TEST_AS", "root" if os.getuid() == 0 else "user")
MUST_WORK = os.environ.get("DSH_CONFINE_MUST_WORK") == "1"
STD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# The sanitizer build (DSH_E2E_SANITIZED=1, set by meson) starts each process many times slower,
# and CI runs it beside other work: there, set-up alone took over 3 s. A deadline that must fall
# after the command has started (it printed, or set its trap) is STARTUP times longer there.
# Waits on events need no such factor.
STARTUP = 6 if os.environ.get("DSH_E2E_SANITIZED") == "1" else 1


def after_start(seconds):
    """A --timeout (or timeout(1)) value: `seconds` on the shipped build, stretched under the sanitizers."""
    return "%gs" % (seconds * STARTUP)

SANDBOX_UNAVAILABLE = (
    'sandbox mode "{mode}" is requested but no sandbox backend is usable on this host; '
    "refusing to run the command unconfined. Install bubblewrap or run a Landlock-enforcing "
    "kernel (Linux), ensure sandbox-exec is usable (macOS), or ensure the ACL restricted-token "
    "runner can start (Windows) \u2014 otherwise switch the consumer to danger-full-access."
)


class Skip(Exception):
    pass


def skip(reason):
    raise Skip(reason)


def need(ok, reason):
    """Skips when `ok` is false; under DSH_CONFINE_MUST_WORK=1 that is a failure."""
    if ok:
        return
    if MUST_WORK:
        raise AssertionError("required but unavailable (DSH_CONFINE_MUST_WORK=1): " + reason)
    raise Skip(reason)


def is_root():
    return os.getuid() == 0


def tool(name):
    """Path of a staged helper binary (built by meson, listed in DSH_TEST_TOOLS)."""
    for t in filter(None, os.environ.get("DSH_TEST_TOOLS", "").split(":")):
        if os.path.basename(t) == name:
            return t
    raise AssertionError("test tool %s was not staged" % name)


_landlock_abi = None


def landlock_abi():
    global _landlock_abi
    if _landlock_abi is None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        _landlock_abi = libc.syscall(ctypes.c_long(444), None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return _landlock_abi


def need_landlock():
    need(landlock_abi() > 0, "Landlock is not available in this kernel")


def bwrap_works():
    if not os.access("/usr/bin/bwrap", os.X_OK):
        return False
    r = subprocess.run(["/usr/bin/bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--unshare-pid",
                        "--proc", "/proc", "--die-with-parent", "--", "true"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10)
    return r.returncode == 0


def need_bwrap():
    need(bwrap_works(), "bubblewrap is missing or cannot create namespaces here")


_built_runners = {}


def need_runner(runner):
    """The host can run `runner` (need_landlock / need_bwrap), and this build has it at all (a build
    capability, not the host's: a plain skip)."""
    if runner == "landlock":
        need_landlock()
    elif runner == "bwrap":
        need_bwrap()
    if runner not in _built_runners:
        r = dsh(["--runner", runner, "--", "true"], None)
        c = r.rec("confinement")
        _built_runners[runner] = c is not None and c.get("runner") == runner
    if not _built_runners[runner]:
        skip("this build has no %s runner" % runner)


# The axes tests are stamped out over (matrix below).
RUNNERS = ("bwrap", "landlock")
MODES = ("read-only", "workspace-write")
EXEC_SUPERVISE = {"exec": [], "supervise": ["--supervise"]}


class Matrix:
    """What @matrix leaves under the body's own name: not a test (run_module runs functions only),
    it keeps the body and the names of the tests stamped out of it."""

    def __init__(self, body, names):
        self.body, self.names = body, names

    def __repr__(self):
        return "<matrix %s: %s>" % (self.body.__name__, ", ".join(self.names))


def _label(value):
    return str(value).replace("-", "_").replace(".", "_").replace("=", "_").replace("/", "_")


def matrix(**axes):
    """Stamps out one module-level test per combination of `axes` from the decorated body:

        @matrix(runner=RUNNERS, mode=MODES, supervise=EXEC_SUPERVISE)
        def test_writes_outside_are_refused(s, runner, mode, supervise):
            ...

    makes test_writes_outside_are_refused__bwrap__read_only__exec and the seven others, in the
    order of the axes as given (the last one varies fastest). An axis is a sequence of values
    (each names itself, "-" and "." as "_") or a dict of name -> value (EXEC_SUPERVISE: the
    arguments that make the mode). The body gets every axis as a keyword argument. With a
    `runner` axis each test first calls need_runner(runner): skipped where the host or the build
    cannot run it (a failure under DSH_CONFINE_MUST_WORK=1). The stamped tests take the body's
    place in the file (run_module orders tests by line), one after the other."""
    def stamp(body):
        module = body.__globals__
        combos = [((), {})]
        for axis, values in axes.items():
            items = list(values.items()) if isinstance(values, dict) else [(_label(v), v) for v in values]
            combos = [(names + (n,), dict(kw, **{axis: v})) for names, kw in combos for n, v in items]
        made = []
        for names, kw in combos:
            def test(s, kw=kw):
                if "runner" in kw:
                    need_runner(kw["runner"])
                return body(s, **kw)
            test.__code__ = test.__code__.replace(co_firstlineno=body.__code__.co_firstlineno)
            test.__name__ = "__".join((body.__name__,) + names)
            test.__qualname__ = test.__name__
            assert test.__name__ not in module, "matrix: %s is defined twice" % test.__name__
            module[test.__name__] = test
            made.append(test.__name__)
        return Matrix(body, made)
    return stamp


SEALED_DIR = "/etc/dsh-confine"


class Scratch:
    def __init__(self):
        self.base = tempfile.mkdtemp(prefix="dsh-e2e-", dir="/var/tmp")
        os.chmod(self.base, 0o755)
        self.ws = os.path.join(self.base, "ws")
        self.outside = os.path.join(self.base, "outside")
        self.tmpdir = os.path.join(self.base, "tmpdir")
        for d in (self.ws, self.outside, self.tmpdir):
            os.mkdir(d)
        # $HOME holds dsh-confine's own state (~/.config/dsh-confine, ~/.cache):
        # outside base, which is the default workspace root (the cwd), since
        # a run whose writable roots hold that state is refused.
        self.home = tempfile.mkdtemp(prefix="dsh-e2e-home-", dir="/var/tmp")
        os.chmod(self.home, 0o755)
        self.sealed = []  # what sealed_config made in /etc

    def p(self, where, *parts):
        return os.path.join(getattr(self, where), *parts)

    def script(self, name, body, mode=0o755):
        # A file under base (a stub bwrap, a fake runner), executable by default.
        path = self.p("base", name)
        with open(path, "w") as f:
            f.write(body)
        os.chmod(path, mode)
        return path

    def sealed_config(self, keys, name="config"):
        """A config no confined run could have written (issue 37), the only kind that may hold
        runnerCommand, bwrapPath, an approver command or danger-full-access: root's file in
        /etc/dsh-confine, named by --config. A user cannot make one: the test is skipped."""
        if not is_root():
            skip("a sealed config (runnerCommand, bwrapPath) needs root to write it in /etc/dsh-confine")
        made = not os.path.isdir(SEALED_DIR)
        os.makedirs(SEALED_DIR, mode=0o755, exist_ok=True)
        if made:
            self.sealed.append(SEALED_DIR)
        path = os.path.join(SEALED_DIR, "e2e-%s-%s.json" % (os.path.basename(self.base), name))
        with open(path, "w") as f:
            f.write(keys if isinstance(keys, str) else json.dumps(keys))
        os.chmod(path, 0o644)
        self.sealed.insert(0, path)
        return path

    def env(self):
        e = {k: v for k, v in os.environ.items() if not k.startswith("DSH_CONFINE_CONFIG")}
        e.update(TMPDIR=self.tmpdir, HOME=self.home, PATH=STD_PATH, LC_ALL="C")
        return e

    def cleanup(self):
        def onerror(func, path, _):
            try:
                # Never the scratch's own parent: /var/tmp must stay 1777
                # (a failed rmdir of base made it 0755 for every other user).
                if os.path.dirname(path) not in ("/var/tmp", "/var", "/"):
                    os.chmod(os.path.dirname(path), 0o755)
                os.chmod(path, 0o755)
                func(path)
            except OSError:
                pass
        shutil.rmtree(self.base, onerror=onerror)
        shutil.rmtree(self.home, onerror=onerror)
        for path in self.sealed:  # the files, then the directory if this test made it (and it is empty)
            try:
                os.rmdir(path) if os.path.isdir(path) else os.unlink(path)
            except OSError:
                pass


class Result:
    def __init__(self, cmd, rc, out, err, report):
        self.cmd, self.rc, self.out, self.err, self.report = cmd, rc, out, err, report

    def rec(self, type_):
        for r in self.report:
            if r.get("type") == type_:
                return r
        return None

    def __repr__(self):
        return "cmd=%r\nrc=%r\nstdout=%r\nstderr=%r\nreport=%s" % (
            self.cmd, self.rc, self.out[-2000:], self.err[-2000:], json.dumps(self.report, indent=1)[:4000])


def check_records(records, what=""):
    """Every report record a test reads holds to share/report.schema.json (issue 42): a
    member renamed, missing or of the wrong kind fails the test that produced it."""
    # DSH_E2E_SCHEMA=0: not checked, to see what else an older binary (without the schema's
    # members) fails on; never set by the test tiers.
    if os.environ.get("DSH_E2E_SCHEMA") == "0":
        return
    import report_schema
    for r in records:
        errors = report_schema.validate(r)
        assert not errors, "report record does not hold to report.schema.json: %s\n%r\nrecord=%s" % (
            "; ".join(errors[:5]), what, json.dumps(r)[:3000])


def dsh(args, s=None, cwd=None, env=None, input=None, timeout=60, report=True, extra_fds=(), binary=None,
        pre=()):
    """Runs dsh-confine with `args`; returns a Result. The report comes through a pipe."""
    e = s.env() if s else dict(os.environ)
    if env:
        for k, v in env.items():
            if v is None:
                e.pop(k, None)
            else:
                e[k] = v
    fds = list(extra_fds)
    r = w = None
    cmd = list(pre) + [binary or DSH]
    if report:
        r, w = os.pipe()
        fds.append(w)
        cmd += ["--report-fd", str(w)]
    cmd += list(args)
    chunks = []

    def reader():
        while True:
            b = os.read(r, 65536)
            if not b:
                break
            chunks.append(b)

    t = None
    proc = subprocess.Popen(cmd, cwd=cwd or (s.base if s else None), env=e, pass_fds=fds,
                            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if report:
        os.close(w)
        t = threading.Thread(target=reader, daemon=True)
        t.start()
    try:
        out, err = proc.communicate(input=input, timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        try:
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            # Something it started still holds its output: name it, never wait for ever.
            proc.wait()
            err = b"(its output still held open by: %s)" % subprocess.run(
                ["ps", "-eo", "pid,ppid,stat,wchan:20,args"], stdout=subprocess.PIPE).stdout[-6000:]
        raise AssertionError("timed out after %ss: %r\nstderr=%r" % (timeout, cmd, err[-8000:]))
    records = []
    if report:
        t.join(timeout=10)
        os.close(r)
        for line in b"".join(chunks).decode("utf-8", "replace").splitlines():
            records.append(json.loads(line))  # a malformed line fails the test
        check_records(records, cmd)
    return Result(cmd, proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"),
                  records)


def sh(script, s, mode="read-only", root=None, runner=None, extra=(), **kw):
    """dsh-confine --mode M [--root R] [--runner X] EXTRA -- sh -c SCRIPT."""
    args = ["--mode", mode]
    if root:
        args += ["--root", root]
    if runner:
        args += ["--runner", runner]
    return dsh(args + list(extra) + ["--", "sh", "-c", script], s, **kw)

def check_inherited_fds(s, runner):
    """An fd the caller passes down is closed in the command unless --keep-fd names it."""
    out = s.p("outside", "fd-target")
    fd = os.open(out, os.O_WRONLY | os.O_CREAT, 0o644)
    os.set_inheritable(fd, True)
    try:
        r = sh("echo leaked >&%d" % fd, s, runner=runner, extra_fds=(fd,))
        assert r.rc != 0, r
        assert open(out).read() == ""
        r = sh("echo kept >&%d" % fd, s, runner=runner, extra_fds=(fd,), extra=["--keep-fd", str(fd)])
        assert r.rc == 0, r
        assert open(out).read() == "kept\n"
        assert r.rec("confinement")["keptFds"] == [fd]
    finally:
        os.close(fd)


def processes_naming(token):
    """Pids of host processes (not this one) whose command line contains `token`."""
    found = []
    for n in os.listdir("/proc"):
        if not n.isdigit() or int(n) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % n, "rb") as f:
                if token.encode() in f.read():
                    found.append(int(n))
        except OSError:
            pass
    return found


def proc_stat(pid):
    """(name, state, ppid, pgrp, tpgid) of a process, from /proc/PID/stat; None once it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return stat[stat.index("(") + 1:stat.rindex(")")], fields[0], int(fields[1]), int(fields[2]), int(fields[5])


def proc_argv(pid):
    """A process's argv as bytes, from /proc/PID/cmdline; None once it is gone."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().split(b"\0")[:-1]
    except OSError:
        return None


def alive(pids):
    """The pids that still run (a zombie nobody has reaped yet runs nothing)."""
    return [p for p in pids if (proc_stat(p) or ("", "X"))[1] not in ("Z", "X")]


def sleepers(token):
    """Pids of `sleep TOKEN` processes (a command once its shell has exec'd it; not the shells
    whose scripts name the token)."""
    return [p for p in processes_naming(token) if proc_argv(p) == [b"sleep", token.encode()]]


def described(pids):
    """'PID ARGV' of each pid still there, for a failure's message."""
    return ["%d %s" % (p, b" ".join(a).decode("utf-8", "replace")) for p in pids if (a := proc_argv(p)) is not None]


def in_foreground(ancestor, comm=None):
    """Whether a live descendant of `ancestor` (dsh-confine may give the command a terminal of its
    own) is in the foreground group of its terminal, named `comm` (None: anything but
    dsh-confine): a key typed after that reaches it, not a shell before its fork."""
    procs = {}
    for n in os.listdir("/proc"):
        if n.isdigit():
            st = proc_stat(int(n))
            if st:
                procs[int(n)] = st
    for pid, (name, state, ppid, pgrp, tpgid) in procs.items():
        if pgrp != tpgid or state in ("Z", "X"):
            continue
        if name != comm and (comm is not None or name == os.path.basename(DSH)[:15]):
            continue
        while ppid > 1 and ppid != ancestor:
            ppid = procs.get(ppid, ("", "", 0))[2]
        if ppid == ancestor:
            return True
    return False


def pty_run(args, s, send=None, wait=10, pre=(), when=None, typed_ahead=None, pass_fds=(), env=None):
    """Runs dsh-confine (after `pre`, e.g. sysfault) as the session leader of a new pty.

    `send` is typed once `when` holds: bytes `when` is text the output has shown (a prompt), a
    str `when` is the name of a descendant of dsh-confine in the foreground group of its
    terminal (a key typed then reaches the command, not dsh-confine before the command runs).
    Without `when`, once output has come or such a descendant other than dsh-confine itself is
    there. Never typed on a guess: not ready within `wait` seconds is a failure."""
    master, slave = pty.openpty()
    if typed_ahead is not None:  # in the terminal's input before dsh-confine starts: typed before any prompt
        os.write(master, typed_ahead)

    def session():
        os.setsid()
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)

    p = subprocess.Popen(list(pre) + [DSH] + args, stdin=slave, stdout=slave, stderr=slave, preexec_fn=session,
                         env=dict(s.env(), **(env or {})), close_fds=True, pass_fds=pass_fds)
    os.close(slave)
    out = b""
    ended = False

    def read_some(t):
        nonlocal out, ended
        r, _, _ = select.select([master], [], [], t)
        if not r:
            return False
        try:
            chunk = os.read(master, 4096)
        except OSError:
            chunk = b""
        if not chunk:
            ended = True
        out += chunk
        return True

    def ready():
        if isinstance(when, bytes):
            return when in out
        if when is None and out:
            return True
        return in_foreground(p.pid, when)

    if send is not None:
        deadline = time.time() + wait
        while not ready() and not ended and p.poll() is None and time.time() < deadline:
            read_some(0.01)
        if not ready():
            p.kill()
            p.wait()
            os.close(master)
            raise AssertionError("never ready for %r (waited for %r): %r" % (send, when, out))
        os.write(master, send)
    deadline = time.time() + wait
    while time.time() < deadline and not ended:
        got = read_some(0.1)
        if p.poll() is not None and not got:
            break
    try:
        rc = p.wait(timeout=5)
    except subprocess.TimeoutExpired:
        p.kill()
        rc = p.wait()
    os.close(master)
    return rc, out.decode("utf-8", "replace")


# Signals the suite sends and compares (traps, deaths by signal): a disposition
# of "ignored" inherited from whoever started the suite (nohup ignores SIGHUP)
# would survive every exec, so neither the bare nor the confined command could
# trap or die of it. The tests start from the default disposition, as a
# login shell's commands do.
_SENT_SIGNALS = ("SIGHUP", "SIGINT", "SIGQUIT", "SIGTERM", "SIGUSR1", "SIGUSR2")


def _default_signal_dispositions():
    import signal as _signal
    for name in _SENT_SIGNALS:
        sig = getattr(_signal, name)
        if _signal.getsignal(sig) == _signal.SIG_IGN:
            _signal.signal(sig, _signal.SIG_DFL)


def shard(tests):
    """DSH_E2E_SHARD=K/N keeps the tests whose place in the file is K modulo N (K from 1): one
    long file runs as N meson tests side by side (tests/meson.build). Unset: every test."""
    spec = os.environ.get("DSH_E2E_SHARD", "")
    if not spec:
        return tests
    k, n = (int(x) for x in spec.split("/"))
    assert 1 <= k <= n, "DSH_E2E_SHARD must be K/N with 1 <= K <= N: %r" % spec
    return [t for i, t in enumerate(tests) if i % n == k - 1]


def run_module(mod):
    _default_signal_dispositions()
    tests = [(n, f) for n, f in vars(mod).items() if n.startswith("test_") and inspect.isfunction(f)]
    tests.sort(key=lambda nf: nf[1].__code__.co_firstlineno)
    tests = shard(tests)
    only = os.environ.get("DSH_E2E_ONLY")  # by hand: the tests whose name holds this text
    if only:
        tests = [(n, f) for n, f in tests if only in n]
    print("1..%d" % len(tests), flush=True)
    failed = 0
    for i, (name, fn) in enumerate(tests, 1):
        label = "%s [%s]" % (name, AS)
        s = Scratch()
        start = time.monotonic()
        try:
            fn(s)
            print("ok %d - %s" % (i, label), flush=True)
        except Skip as e:
            print("ok %d - %s # SKIP %s" % (i, label, str(e).replace("\n", " ")), flush=True)
        except BaseException:
            failed += 1
            print("not ok %d - %s" % (i, label), flush=True)
            for line in traceback.format_exc().splitlines():
                print("# " + line, flush=True)
        finally:
            s.cleanup()
            # How long each test took, for a run near its time limit (a TAP comment).
            print("# %s: %.1f s" % (name, time.monotonic() - start), flush=True)
    return 1 if failed else 0


def main():
    sys.exit(run_module(sys.modules["__main__"]))
