"""Descendants (issue 15): what becomes of the processes a command leaves running when it exits.

The default is one rule for every runner: they are killed with the command wherever something
can find them (bwrap's PID namespace, or dsh-confine as their subreaper when it stays as the
parent); Landlock in exec mode leaves no parent, so they run on, and the record says so.
`--keep-descendants` (config `keepDescendants`) leaves them running where the runner allows it.

Each case is checked from outside: two background processes of the command (a plain child and a
double-forked, setsid'd grandchild that ignores TERM, HUP and INT) keep rewriting a heartbeat file
in the workspace; after dsh-confine has returned, a heartbeat that still changes is a process that
still runs. Whatever a case leaves running is killed by the test (their pids are in the workspace).
"""
import concurrent.futures
import json
import os
import signal
import subprocess
import time

from harness import (DSH, EXEC_SUPERVISE, RUNNERS, STARTUP, after_start, dsh, main, matrix, need_bwrap, need_landlock,
                     need_runner, processes_naming, pty_run)


# The command: two heartbeats, then it exits at once. Their stdio is not the caller's pipes, so
# a process left running does not hold the harness's stdout open. Each heartbeat loop is named
# beat1-$1 / beat2-$1 (its $0; $1 is token(s)), words no other command line holds (not even this
# script's, which has them unexpanded): processes_naming() finds them, in any namespace.
LEAVE_TWO = r'''
sh -c 'echo $$ > pid1; while :; do date +%s%N > hb1; sleep 0.05; done' "beat1-$1" </dev/null >/dev/null 2>&1 &
( setsid sh -c 'trap "" TERM HUP INT; echo $$ > pid2; while :; do date +%s%N > hb2; sleep 0.05; done' \
    "beat2-$1" </dev/null >/dev/null 2>&1 & )
i=0
while [ ! -s hb1 ] || [ ! -s hb2 ]; do i=$((i+1)); [ $i -lt 400 ] || exit 9; sleep 0.05; done
echo started
'''


def token(s):
    return os.path.basename(s.base)


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def beating(s, name, window=2.0):
    """Whether heartbeat file `name` in the workspace still changes: True at its first change, False
    when it has not changed for `window` s (a failure when the test expects it to beat)."""
    path = s.p("ws", name)
    first = read(path)
    deadline = time.time() + window
    while time.time() < deadline:
        time.sleep(0.02)
        if read(path) != first:
            return True
    return False


def ended(s, n, wait=10.0):
    """Whether heartbeat loop `n` (1 or 2) has ended: True once no process is named beat<n>-token,
    False if one still is after `wait` s (a failure when the test expects it gone)."""
    deadline = time.time() + wait
    while processes_naming("beat%d-%s" % (n, token(s))):
        if time.time() > deadline:
            return False
        time.sleep(0.01)
    return True


def still_running(s, expected):
    """(loop 1 runs, loop 2 runs), each decided by the event that shows it: a heartbeat's change when
    they are `expected` to run, the loop's process gone when not."""
    if expected:
        return beating(s, "hb1"), beating(s, "hb2")
    return not ended(s, 1), not ended(s, 2)


def kill_leftovers(s):
    # The loops by name (in any namespace), and by pid under landlock (host pids).
    for n in (1, 2):
        for pid in processes_naming("beat%d-%s" % (n, token(s))):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    for name in ("pid1", "pid2"):
        pid = read(s.p("ws", name))
        if not pid:
            continue
        try:
            pid = int(pid)
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                if b"hb" not in f.read():
                    continue  # not ours (a namespace pid, or reused)
            os.kill(pid, signal.SIGKILL)
        except (OSError, ValueError):
            pass


def run(s, runner, extra, script=LEAVE_TWO, config=None):
    args = ["--mode", "workspace-write", "--root", s.ws, "--runner", runner] + list(extra)
    env = None
    if config is not None:
        path = s.p("base", "config.json")
        with open(path, "w") as f:
            json.dump(config, f)
        env = {"DSH_CONFINE_CONFIG": path}
    return dsh(args + ["--", "sh", "-c", script, "sh", token(s)], s, cwd=s.ws, env=env, timeout=120)


@matrix(runner=RUNNERS, mode_args=EXEC_SUPERVISE)
def test_left_running_processes_by_default(s, runner, mode_args):
    try:
        r = run(s, runner, mode_args)
        assert r.rc == 0 and r.out == "started\n", r
        rec = r.rec("confinement")
        d = rec["descendants"]
        left_running = runner == "landlock" and not mode_args
        left = still_running(s, left_running)
        if left_running:
            # Exec mode under landlock: dsh-confine became the command; nothing is left to end them.
            assert d == {"atExit": "left-running", "by": None,
                         "why": "exec mode leaves no parent to end them; use --supervise"}, d
            assert left == (True, True), (left, r)
        else:
            assert d["atExit"] == "killed" and d["why"] is None, d
            # Under landlock, supervise puts the command in a PID namespace of its own (issue 38):
            # its end ends them all, as bwrap's does, and nothing is counted.
            assert d["by"] == "pid-namespace", d
            assert left == (False, False), (left, r)
            res = r.rec("result")
            if mode_args:
                assert res["descendantsKilled"] is None, res
    finally:
        kill_leftovers(s)


@matrix(runner=RUNNERS, mode_args=EXEC_SUPERVISE)
def test_keep_descendants(s, runner, mode_args):
    try:
        r = run(s, runner, ["--keep-descendants"] + mode_args)
        if runner == "bwrap":
            # Its PID namespace ends them all: a forced bwrap cannot keep them, and says why.
            assert r.rc == 125, r
            assert not os.path.exists(s.p("ws", "pid1")), "the command ran"
            why = ("bwrap cannot leave the command's background processes running (--keep-descendants): its PID "
                   "namespace ends them all with the command; use --runner landlock (or auto), or drop "
                   "--keep-descendants")
            # The option bwrap cannot hold and the fix; not the seed's "no sandbox backend is usable" (issue 42).
            assert r.err == "dsh-confine: --runner bwrap: " + why + "\n", r.err
            assert r.rec("error")["runnerFailure"] == why, r
            return
        assert r.rc == 0 and r.out == "started\n", r
        d = r.rec("confinement")["descendants"]
        assert d == {"atExit": "left-running", "by": None, "why": "asked (--keep-descendants)"}, d
        assert still_running(s, True) == (True, True), r
        if mode_args:
            assert r.rec("result")["descendantsKilled"] is None, r
    finally:
        kill_leftovers(s)


def test_keep_descendants_under_auto_passes_over_bwrap(s):
    need_landlock()
    try:
        r = dsh(["--mode", "workspace-write", "--root", s.ws, "--keep-descendants", "--supervise",
                 "--", "sh", "-c", LEAVE_TWO, "sh", token(s)], s, cwd=s.ws, timeout=120)
        assert r.rc == 0, r
        rec = r.rec("confinement")
        assert rec["runner"] == "landlock", rec
        assert [k["runner"] for k in rec["skippedRunners"]] == ["bwrap"], rec["skippedRunners"]
        assert "--keep-descendants" in rec["skippedRunners"][0]["reason"], rec
        assert beating(s, "hb2"), r
    finally:
        kill_leftovers(s)


def test_the_configs_keep_descendants_is_the_flag(s):
    need_landlock()
    try:
        r = run(s, "landlock", ["--supervise"], config={"keepDescendants": True})
        assert r.rc == 0, r
        assert r.rec("confinement")["descendants"]["atExit"] == "left-running", r
        assert beating(s, "hb1"), r
    finally:
        kill_leftovers(s)
    bad = run(s, "landlock", [], script="true", config={"keepDescendants": "yes"})
    assert bad.rc != 0 and "keepDescendants" in bad.err and "true or false" in bad.err, bad


def test_a_process_tree_still_forking_at_exit_is_ended(s):
    # Thirty subshells each forking a sleeper, still going when the command exits: every one is
    # ended by supervise under landlock (its PID namespace), none is left behind. Each sleeps a
    # number no other process on the host sleeps: the host's process list shows what is left.
    need_landlock()
    mark = "300.%06d" % (os.getpid() % 1000000)
    script = r'''
for i in $(seq 30); do ( sh -c 'echo $$ >> pids; exec sleep %s' </dev/null >/dev/null 2>&1 & ) ; done
i=0; while [ "$(wc -l < pids 2>/dev/null || echo 0)" -lt 30 ]; do i=$((i+1)); [ $i -lt 600 ] || exit 9; sleep 0.05; done
''' % mark
    r = run(s, "landlock", ["--supervise"], script=script)
    try:
        assert r.rc == 0, r
        assert r.rec("confinement")["descendants"]["by"] == "pid-namespace", r
        assert r.rec("result")["descendantsKilled"] is None, r.rec("result")
        assert len((read(s.p("ws", "pids")) or "").split()) == 30, r
        assert processes_naming(mark) == [], processes_naming(mark)
    finally:
        for pid in processes_naming(mark):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


@matrix(mode_args=EXEC_SUPERVISE)
def test_a_bwrap_tree_still_forking_at_exit_is_gone_when_dsh_confine_returns(s, mode_args):
    # Thirty double-forked sleepers (init's children once their subshells exit), the last ones
    # started as the command exits, must all be gone the moment dsh-confine returns, not a
    # moment later when bwrap's exit takes the namespace down. Each sleeps a number no other
    # process on the host sleeps, so the host's process list shows whether any is left.
    need_bwrap()
    mark = "300.%06d" % (os.getpid() % 1000000)
    script = r"""
for i in $(seq 30); do ( sh -c 'echo $$ >> pids; exec sleep %s' </dev/null >/dev/null 2>&1 & ) ; done
i=0; while [ "$(wc -l < pids 2>/dev/null || echo 0)" -lt 25 ]; do i=$((i+1)); [ $i -lt 600 ] || exit 9; sleep 0.01; done
""" % mark
    try:
        r = run(s, "bwrap", mode_args, script=script)
        left = processes_naming("sleep\x00" + mark)
        assert r.rc == 0, r
        assert left == [], "still running when dsh-confine returned: %r" % left
    finally:
        for pid in processes_naming("sleep\x00" + mark):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


@matrix(runner=RUNNERS, mode_args=EXEC_SUPERVISE)
def test_nothing_of_the_run_outlives_dsh_confine(s, runner, mode_args):
    # bwrap, its init (pid 1 of the sandbox, which holds its namespaces) and our own sentinel carry
    # the command's words in their command lines; none may be there once dsh-confine has returned
    # (a namespace still held would keep the roots' file systems busy). Fifty runs, each checked at
    # once: a process that ends "a moment later" is seen.
    # Only the pids handed out since dsh-confine started are read (not the whole /proc), so the
    # look comes within a millisecond or so of its return.
    for i in range(50):
        mark = ("outlive-%d-%d-%s" % (os.getpid(), i, "-".join(mode_args) or "exec")).encode()
        p = subprocess.Popen([DSH, "--mode", "workspace-write", "--root", s.ws, "--runner", runner] + mode_args +
                             ["--", "sh", "-c", "true", mark], cwd=s.ws, env=s.env(), stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        rc = p.wait()
        left = []
        for n in os.listdir("/proc"):
            if n.isdigit() and int(n) >= p.pid:
                try:
                    with open("/proc/%s/cmdline" % n, "rb") as f:
                        if mark in f.read():
                            left.append(int(n))
                except OSError:
                    pass
        assert rc == 0, (i, rc)
        assert left == [], "run %d: still there when dsh-confine returned: %r" % (i, left)


# A command that makes itself a subreaper: its orphans go to it, not to dsh-confine. When it exits
# they come up to the next subreaper (dsh-confine) and are ended with the rest.
SELF_REAPER = r'''
import ctypes, os, sys, time
assert ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
if os.fork() == 0:
    if os.fork() == 0:
        os.setsid()
        for sig in (1, 2, 15):
            import signal; signal.signal(sig, signal.SIG_IGN)
        # The heartbeat of LEAVE_TWO's second loop, named beat2-TOKEN (ignored signals stay so).
        os.execvp("sh", ["sh", "-c", "echo $$ > pid2; while :; do date +%s%N > hb2; sleep 0.05; done",
                         "beat2-" + sys.argv[1]])
    os._exit(0)
os.wait()
for _ in range(400):
    if os.path.exists("hb2"): break
    time.sleep(0.05)
print("started", flush=True)
'''


def test_a_command_that_is_its_own_subreaper_loses_its_orphans_at_exit(s):
    need_landlock()
    for runner, margs in (("landlock", ["--supervise"]), ("bwrap", [])):
        if runner == "bwrap":
            need_bwrap()
        try:
            r = dsh(["--mode", "workspace-write", "--root", s.ws, "--runner", runner] + margs +
                    ["--", "python3", "-c", SELF_REAPER, token(s)], s, cwd=s.ws, timeout=120)
            assert r.rc == 0 and r.out == "started\n", r
            assert r.rec("confinement")["descendants"]["atExit"] == "killed", r
            assert ended(s, 2), (runner, r)
        finally:
            kill_leftovers(s)
            for name in ("hb2", "pid2"):
                if os.path.exists(s.p("ws", name)):
                    os.unlink(s.p("ws", name))


def test_keep_descendants_with_a_timeout_is_refused(s):
    # Kept processes would outlive the timeout meant to bound them: refused, nothing runs.
    need_landlock()
    r = run(s, "landlock", ["--keep-descendants", "--timeout", "5s"], script="touch ran")
    assert r.rc == 125, r
    assert r.err == ("dsh-confine: --keep-descendants cannot be combined with --timeout or with limits held by a "
                     "cgroup: those end every process the command started when it ends; drop one of them\n"), r.err
    assert not os.path.exists(s.p("ws", "ran")), "the command ran"


def test_explain_says_what_becomes_of_them(s):
    need_landlock()
    r = dsh(["explain", "--mode", "workspace-write", "--runner", "landlock", "--supervise", "--", "true"], s,
            cwd=s.ws)
    assert "at exit:     processes the command leaves running are killed (pid-namespace)\n" in r.out, r.out
    r = dsh(["explain", "--mode", "workspace-write", "--runner", "landlock", "--keep-descendants", "--", "true"],
            s, cwd=s.ws)
    assert "at exit:     processes the command leaves running run on (asked (--keep-descendants))\n" in r.out, r.out



# A fork chain (issue 38): each process forks the next and exits at once, so at any moment the
# chain is one or two processes, one of them in the middle of a fork or just reparented. It
# ignores TERM, HUP and INT, leaves its own session, and every link holds the write end of a
# pipe whose read end the test keeps: after dsh-confine returns, that pipe at EOF is the exact
# proof that no process of the chain exists; the token in every link's command line is how the
# host's /proc names one that is left (and how the test kills it, by its process group).
CHAIN = r"""
import os, signal, sys, time
hold = sys.argv[2] == "hold"
r, w = os.pipe()
if os.fork() == 0:
    os.close(r)
    os.setsid()
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    n = 0
    while True:
        n += 1
        if n == 30:
            os.write(w, b"x")
            os.close(w)
        if os.fork():
            os._exit(0)
os.close(w)
if os.read(r, 1) != b"x":
    sys.exit(9)
print("started", flush=True)
if hold:
    time.sleep(120)
"""
# Twenty runs on the shipped build; under the sanitizers each timed run takes after_start(3), and
# eight keep the case within its shard's time (the release run has the race's twenty tries).
CHAIN_RUNS = 20 if STARTUP == 1 else 8


def _held(r):
    """Whether any process still holds the write end of pipe `r` (not at EOF)."""
    try:
        return os.read(r, 1) != b""
    except BlockingIOError:
        return True


def _newest_naming(token):
    """The host's processes whose command line holds `token`, newest pid first and one at a time
    (a chain's live link is among the newest; a full list is stale before it is read)."""
    mine = os.getpid()
    for n in sorted((int(n) for n in os.listdir("/proc") if n.isdigit()), reverse=True):
        try:
            with open("/proc/%d/cmdline" % n, "rb") as f:
                if n != mine and token.encode() in f.read():
                    yield n
        except OSError:
            pass


def _kill_chain(token, r):
    # Survivors, found by their token on the host, killed by process group (all links share the
    # chain's, and a group signal reaches a fork in progress too), until the pipe says none is
    # left. Bounded.
    deadline = time.monotonic() + 20
    while _held(r) and time.monotonic() < deadline:
        for pid in _newest_naming(token):
            try:
                with open("/proc/%d/stat" % pid) as f:
                    pgid = int(f.read().rsplit(")", 1)[1].split()[2])
                if pgid > 1:
                    os.killpg(pgid, signal.SIGKILL)
                os.kill(pid, signal.SIGKILL)
                break
            except (OSError, ValueError, IndexError):
                pass
    return not _held(r)


def _one_chain(s, runner, margs, timed, i):
    token = "dsh-chain-%d-%d-%s-%s-%s" % (os.getpid(), i, runner, "-".join(margs) or "exec",
                                          "timeout" if timed else "exit")
    r, w = os.pipe()
    os.set_blocking(r, False)
    args = ["--mode", "workspace-write", "--root", s.ws, "--runner", runner, "--keep-fd", str(w)] + margs
    if timed:
        # after_start: under the sanitizers and load, bwrap's set-up alone took over 3 s, and a
        # timeout before the stage wrote the confinement record left the run without one.
        args += ["--timeout", after_start(3), "--kill-after", "200ms"]
    elif runner == "landlock" and not margs:
        # Exec mode keeps a parent to end them only with a timeout (or a pty, or a leaf).
        args += ["--timeout", "60s"]
    try:
        try:
            res = dsh(args + ["--", "python3", "-c", CHAIN, token, "hold" if timed else "exit"], s, cwd=s.ws,
                      extra_fds=(w,), timeout=60)
        finally:
            os.close(w)
        held = _held(r)
        named = list(_newest_naming(token))
        return res, held, named
    finally:
        clean = _kill_chain(token, r)
        os.close(r)
        assert clean, "run %d: could not kill what the chain left (%s)" % (i, token)


@matrix(runner=RUNNERS, mode_args=EXEC_SUPERVISE, end={"timeout": True, "at_exit": False})
def test_a_fork_chain_is_ended(s, runner, mode_args, end):
    margs, timed = mode_args, end
    # Four at a time (a timed run takes its second): twenty take about five runs' time.
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda i: _one_chain(s, runner, margs, timed, i), range(CHAIN_RUNS)))
    outlived = [i for i, (res, held, named) in enumerate(results) if held or named]
    assert outlived == [], "runs %r of %d: the chain outlived dsh-confine: %r" % (
        outlived, CHAIN_RUNS, results[outlived[0]][0] if outlived else None)
    for i, (res, held, named) in enumerate(results):
        assert "descendants-left" not in [x.get("gap") for x in res.report], res
        if timed:
            assert res.rc == 124, (i, res)
        else:
            assert res.rc == 0 and res.out == "started\n", (i, res)
        assert res.rec("confinement")["descendants"]["atExit"] == "killed", res
        if margs:
            out = res.rec("result")
            # Both runners end it with their PID namespace: nothing for supervise to count or name,
            # but with a timeout, whose end-of-run check finds nothing left.
            assert out["descendantsLeft"] == ([] if timed else None), out
            assert out["descendantsKilled"] is None, out
            if timed:
                assert out["limit"] == "timeout", out



@matrix(runner=RUNNERS)
def test_ten_fork_chains_at_once_are_ended(s, runner):
    # The attack that outran the subreaper's kill loop (issue 38): many chains at once, each link
    # forking the next and exiting, still going when the command exits. Under --supervise both
    # runners end them with a PID namespace; the pipe every link holds is at EOF when dsh-confine
    # has returned. (Ten, not thirty: a kill loop that loses the race would have the machine's
    # cores to itself.)
    token = "dsh-chains-%d-%s" % (os.getpid(), runner)
    r, w = os.pipe()
    os.set_blocking(r, False)
    script = 'for i in 1 2 3 4 5 6 7 8 9 10; do python3 -c "$CHAIN" %s exit & done; wait' % token
    env = {"CHAIN": CHAIN}
    try:
        try:
            res = dsh(["--mode", "workspace-write", "--root", s.ws, "--runner", runner, "--supervise",
                       "--keep-fd", str(w), "--", "sh", "-c", script], s, cwd=s.ws, extra_fds=(w,), timeout=120,
                      env=env)
        finally:
            os.close(w)
        assert res.rc == 0 and res.out.count("started") == 10, res
        assert not _held(r), "a chain outlived dsh-confine: %r" % (res,)
        assert list(_newest_naming(token)) == [], res
        assert res.rec("confinement")["descendants"]["by"] == "pid-namespace", res
    finally:
        assert _kill_chain(token, r), "could not kill what the chains left"
        os.close(r)

def _chains_at_a_terminal(s, args, token, chains):
    """`chains` fork chains started by a shell run at a terminal (dsh-confine the pty's session
    leader); returns (rc, output, whether a link outlived dsh-confine)."""
    r, w = os.pipe()
    os.set_blocking(r, False)
    script = 'for i in $(seq %d); do python3 -c "$CHAIN" %s exit & done; wait' % (chains, token)
    try:
        try:
            rc, out = pty_run(args + ["--keep-fd", str(w), "--", "sh", "-c", script], s, wait=60, pass_fds=(w,),
                              env={"CHAIN": CHAIN})
        finally:
            os.close(w)
        return rc, out, _held(r) or list(_newest_naming(token)) != []
    finally:
        assert _kill_chain(token, r), "could not kill what the chains left (%s)" % token
        os.close(r)


@matrix(runner=RUNNERS, mode_args=EXEC_SUPERVISE)
def test_fork_chains_at_a_terminal_are_ended(s, runner, mode_args):
    # At a terminal the command gets a pty whose session dsh-confine's child leads (a monitor, for
    # job control): under Landlock the chains used to be left to the subreaper's kill loop, which
    # many chains at once outrun (issue 38). Now the monitor's child is a PID namespace's init
    # there too. One chain a run, twenty runs; then ten chains at once.
    args = ["--mode", "workspace-write", "--root", s.ws, "--runner", runner] + mode_args
    for i in range(CHAIN_RUNS):
        token = "dsh-ttychain-%d-%d-%s-%s" % (os.getpid(), i, runner, "-".join(mode_args) or "exec")
        rc, out, outlived = _chains_at_a_terminal(s, args, token, 1)
        assert rc == 0 and out.count("started") == 1, (i, rc, out)
        assert not outlived, "run %d: the chain outlived dsh-confine: %r" % (i, out)
    token = "dsh-ttychains-%d-%s-%s" % (os.getpid(), runner, "-".join(mode_args) or "exec")
    rc, out, outlived = _chains_at_a_terminal(s, args, token, 10)
    assert rc == 0 and out.count("started") == 10, (rc, out)
    assert not outlived, "a chain outlived dsh-confine: %r" % out


@matrix(runner=RUNNERS, supervise=EXEC_SUPERVISE)
def test_the_callers_process_group_is_declared_where_it_is_shared(s, runner, supervise):
    # Without a terminal the command shares the caller's process group, where (an attack pass of
    # session 25) a command that orphans the group with a stopped member makes the kernel send
    # the caller's processes SIGHUP and SIGCONT: the process-group gap. Under the Landlock
    # runner's PID namespace the init, in a group of its own, is every orphan's parent and the
    # group never orphans: no gap there.
    need_runner(runner)
    r = dsh(["--runner", runner, "--mode", "workspace-write", "--root", s.ws] + supervise + ["--", "true"], s)
    assert r.rc == 0, r
    gaps = [g["effect"] for g in r.rec("confinement")["gaps"]]
    by = r.rec("confinement")["descendants"]["by"]
    shared = runner == "bwrap" or by != "pid-namespace"
    assert ("process-group" in gaps) == shared, (runner, supervise, by, gaps)


def test_a_terminal_run_under_landlock_has_its_pid_namespace(s):
    # What the record and explain say is what happens: the command at a terminal sees itself
    # in a PID namespace ($$ is small, pid 1 is the init) and the record says pid-namespace.
    need_landlock()
    rep = s.p("home", "tty-report.json")
    rc, out = pty_run(["--mode", "workspace-write", "--root", s.ws, "--runner", "landlock", "--supervise",
                       "--report-file", rep, "--", "sh", "-c", "echo pid=$$; tty"], s)
    assert rc == 0 and "pid=2\r\n" in out and "/dev/pts/" in out, (rc, out)
    with open(rep) as f:
        recs = [json.loads(l) for l in f if l.strip()]
    conf = [x for x in recs if x.get("type") == "confinement"][0]
    assert conf["descendants"]["by"] == "pid-namespace", conf["descendants"]


if __name__ == "__main__":
    main()
