"""Faults of the runner chain and of the session log (issue 9), seen from outside.

bwrap missing, failing only on the real run, lying (ignoring its mount options),
killed while the command runs; a poisoned, corrupt or unsafe probe cache; a session
log on a full or read-only file system. Each case asserts the exit status, the exact
message and that the command's side effect did not happen (or, where a runner took
over, that a write outside the root was refused), checked from outside.

bwrap is replaced through the config's `bwrapPath` (a stub in the scratch) or hidden
in a private mount namespace; mounts happen in a private mount namespace (for the
unprivileged user, inside a user namespace of its own), so the host is untouched.
"""
import json
import os
import select
import signal
import subprocess
import time

from harness import (DSH, EXEC_SUPERVISE, check_records, RUNNERS, SANDBOX_UNAVAILABLE, dsh, is_root, main, matrix, need, need_bwrap,
                     need_landlock, tool,
                     processes_naming)

BWRAP = "/usr/bin/bwrap"
UNAVAILABLE_WS = SANDBOX_UNAVAILABLE.format(mode="workspace-write")
SETUP_ERROR = "bwrap: Can't mount proc on /newroot/proc: Operation not permitted"


def _need_runners():
    need_bwrap()
    need_landlock()


def _config(s, **keys):
    # bwrapPath and runnerCommand: only from a sealed config (issue 37).
    if isinstance(keys.get("bwrapPath"), str) or "runnerCommand" in keys:
        return s.sealed_config(keys)
    path = s.p("base", "config.json")
    with open(path, "w") as f:
        json.dump(keys, f)
    return path


def _userns():
    # An unprivileged user gets a mount namespace inside a user namespace of its
    # own (-r: mapped to uid 0 there, with no privilege over the host).
    return [] if is_root() else ["-U", "-r"]


def _bwrap_hidden(s):
    # A private mount namespace whose /usr/bin has no bwrap: an overlay over
    # /usr/bin (upper layer on a private tmpfs) in which bwrap is removed.
    upper = s.p("base", "overlay")
    os.mkdir(upper)
    return ["unshare", "-m"] + _userns() + [
        "--propagation", "private", "sh", "-c",
        'mount -t tmpfs tmpfs "$0" && mkdir "$0/u" "$0/w" && '
        'mount -t overlay overlay -o lowerdir=/usr/bin,upperdir="$0/u",workdir="$0/w" /usr/bin && '
        'rm %s && test ! -e %s && exec "$@"' % (BWRAP, BWRAP), upper]


def _script(s):
    # The write inside must happen; the one outside must be refused, and the
    # refusal is recorded inside (so "not attempted" cannot pass for "refused").
    return ("echo in > '{i}'; if echo out > '{o}'; then :; else echo refused > '{r}'; fi; true"
            .format(i=s.p("ws", "in"), o=s.p("outside", "out"), r=s.p("ws", "refused")))


def _run(s, extra=(), pre=(), script=None, env=None, **kw):
    args = ["--mode", "workspace-write", "--root", s.ws] + list(extra)
    return dsh(args + ["--", "sh", "-c", script or _script(s)], s, pre=pre, env=env, **kw)


def _nothing_ran(s, r):
    for p in (s.p("ws", "in"), s.p("outside", "out"), s.p("ws", "refused")):
        assert not os.path.exists(p), "the command ran (%s): %r" % (p, r)


def _confined_by_landlock(s, r):
    assert r.rc == 0, r
    c = r.rec("confinement")
    assert c is not None and c["runner"] == "landlock", r
    assert open(s.p("ws", "in")).read() == "in\n", r
    assert not os.path.exists(s.p("outside", "out")), r
    assert os.path.exists(s.p("ws", "refused")), r
    return c


def _refused_unavailable(s, r, message=UNAVAILABLE_WS, err=None):
    """`err`: the stderr line when it is not the record's message (a forced runner says which one
    could not run and the fix; the record keeps the contract's text)."""
    assert r.rc == 125, r
    assert r.err == "dsh-confine: %s\n" % (err or message), r
    assert [x["type"] for x in r.report] == ["error"], r
    e = r.report[0]
    assert e["code"] == "SANDBOX_UNAVAILABLE" and e["message"] == message and e["exitStatus"] == 125, r
    _nothing_ran(s, r)


# -- 1. bwrap missing ---------------------------------------------------------------------------------

def _missing_variants(s):
    missing = s.p("base", "no-such-bwrap")
    return [
        # (pre, extra options, the path dsh-confine names)
        (_bwrap_hidden(s), [], BWRAP),
        ([], ["--config", _config(s, bwrapPath=missing)], missing),
    ]


def test_bwrap_missing_auto_falls_back_to_landlock_and_confines(s):
    need_landlock()
    for pre, extra, path in _missing_variants(s):
        for p in (s.p("ws", "in"), s.p("ws", "refused")):
            if os.path.exists(p):
                os.unlink(p)
        r = _run(s, extra=extra, pre=pre)
        c = _confined_by_landlock(s, r)
        skipped = {x["runner"]: x["reason"] for x in c["skippedRunners"]}
        assert skipped == {"bwrap": "bwrap is not usable: %s: No such file or directory" % path}, r
        # Only the shell's own refusal on stderr, nothing of ours.
        assert "Permission denied" in r.err and "dsh-confine:" not in r.err, r


def test_bwrap_missing_forced_bwrap_fails_closed(s):
    need_landlock()
    for pre, extra, path in _missing_variants(s):
        # Forced, its reason is the run's: the one probe gives.
        # A forced runner that cannot run says which and the fix (the seed's no-backend text is for no
        # backend at all): the stderr line and the record's message.
        message = err = ("--runner bwrap: bwrap is not usable: %s: No such file or directory; use --runner "
                         "landlock or auto (which picks a runner that can)" % path)
        r = _run(s, extra=extra + ["--runner", "bwrap"], pre=pre)
        _refused_unavailable(s, r, message, err)
        # Supervise mode refuses the same way, before any child is started.
        r = _run(s, extra=extra + ["--runner", "bwrap", "--supervise"], pre=pre)
        _refused_unavailable(s, r, message, err)


def test_probe_reports_the_bwrap_and_runner_a_run_would_use(s):
    # `probe` reads the same config as a run: its bwrapPath, probeTimeoutMs and
    # runnerCommand, so it cannot vouch for a bwrap that auto would not use.
    need_landlock()
    missing = s.p("base", "no-such-bwrap")
    r = dsh(["--config", _config(s, bwrapPath=missing, probeTimeoutMs=1234), "probe", "--json"], s, report=False)
    assert r.rc == 0, r
    doc = json.loads(r.out)
    rows = {x["runner"]: x for x in doc["runners"]}
    assert doc["chain"] == [x["runner"] for x in doc["runners"]] == ["custom", "bwrap", "landlock"], doc
    bw = rows["bwrap"]
    assert (bw["runner"], bw["path"], bw["usable"], bw["probeTimeoutMs"]) == ("bwrap", missing, False, 1234), doc
    assert bw["reason"] == "bwrap is not usable: %s: No such file or directory" % missing, bw
    assert doc["selected"] == "landlock", doc
    custom = _config(s, runnerCommand=["/bin/sh", "-c", 'exec "$@"', "x"], runnerFailureSignatures=["bwrap:"])
    doc = json.loads(dsh(["--config", custom, "probe", "--json"], s, report=False).out)
    assert doc["selected"] == "custom" and {x["runner"]: x for x in doc["runners"]}["custom"]["usable"] is True, doc
    # A bad config is the run's error, and no verdict.
    r = dsh(["--config", _config(s, bwrapPath=3), "probe"], s, report=False)
    assert r.rc == 125 and r.out == "", r
    assert r.err == 'dsh-confine: config %s: "bwrapPath" must be a string, not a number\n' % s.p("base", "config.json"), r


# -- 2. bwrap failing on the real run, or lying ---------------------------------------------------------

def _probe_passing_stub(s, body):
    # The probe's command is `/proc/self/fd/3 __dsh_confine_probe_v1`: the stub
    # hands that to the real bwrap (so the probe says "usable") and does `body`
    # on the real run.
    return s.script("stub-bwrap", "#!/bin/sh\nfor a; do last=$a; done\n"
                 "if [ \"$last\" = __dsh_confine_probe_v1 ]; then exec %s \"$@\"; fi\n%s" % (BWRAP, body))


def _cache_env(s):
    # The probe cache in the scratch, never the caller's ($XDG_CACHE_HOME
    # itself must exist: dsh-confine creates only its own directory in it).
    os.makedirs(s.p("base", "cache"), mode=0o700, exist_ok=True)
    return {"XDG_RUNTIME_DIR": None, "XDG_CACHE_HOME": s.p("base", "cache")}


def test_bwrap_failing_at_setup_in_exec_mode(s):
    _need_runners()
    stub = _probe_passing_stub(s, "echo \"%s\" >&2\nexit 1\n" % SETUP_ERROR)
    conf = _config(s, bwrapPath=stub)
    for runner in ("auto", "bwrap"):
        r = _run(s, extra=["--config", conf, "--runner", runner], env=_cache_env(s))
        # Exec mode: dsh-confine stays as bwrap's parent (issue 15), so bwrap
        # failing after the handover is 125 with an `error` record, as in
        # supervise mode; stderr is not captured, so the detail is bwrap's
        # status and its own line reached the caller directly.
        message = UNAVAILABLE_WS + " Runner failure: bwrap exited with status 1 before starting the command"
        assert r.rc == 125, (runner, r)
        assert r.err == SETUP_ERROR + "\ndsh-confine: " + message + "\n", (runner, r)
        assert [x["type"] for x in r.report] == ["error"], (runner, r)
        assert r.report[0]["code"] == "SANDBOX_UNAVAILABLE" and r.report[0]["message"] == message, (runner, r)
        _nothing_ran(s, r)


def test_bwrap_failing_at_setup_in_supervise_mode(s):
    _need_runners()
    for body, detail in (("echo \"%s\" >&2\nexit 1\n" % SETUP_ERROR, SETUP_ERROR),
                         ("exit 1\n", "bwrap exited with status 1 before starting the command")):
        stub = _probe_passing_stub(s, body)
        conf = _config(s, bwrapPath=stub)
        for runner in ("auto", "bwrap"):
            r = _run(s, extra=["--config", conf, "--runner", runner, "--supervise"], env=_cache_env(s))
            message = UNAVAILABLE_WS + " Runner failure: " + detail
            assert r.rc == 125, (runner, r)
            relayed = SETUP_ERROR + "\n" if detail == SETUP_ERROR else ""
            assert r.err == relayed + "dsh-confine: " + message + "\n", (runner, r)
            assert [x["type"] for x in r.report] == ["result", "error"], (runner, r)
            res, err = r.report
            assert res["runner"] == "bwrap" and res["runnerFailed"] is True, r
            assert res["runnerFailure"] == detail and res["exitCode"] == 1 and res["signal"] is None, r
            assert res["evidence"] == "json-status-fd", r
            assert err["code"] == "SANDBOX_UNAVAILABLE" and err["message"] == message, r
            _nothing_ran(s, r)


def _lying_stub(s):
    # Passes the probe and "succeeds": drops every option up to the first `--`
    # and execs what follows (our stage) with no namespace and no mount.
    return s.script("lying-bwrap", "#!/bin/sh\nwhile [ $# -gt 0 ] && [ \"$1\" != -- ]; do shift; done\n"
                 "shift\nexec \"$@\"\n")


def test_bwrap_that_ignores_its_mount_options_runs_nothing(s):
    _need_runners()
    conf = _config(s, bwrapPath=_lying_stub(s))
    # A file outside the root whose metadata only the read-only mount view
    # protects: Landlock does not govern chmod.
    victim = s.p("outside", "victim")
    with open(victim, "w") as f:
        f.write("v\n")
    os.chmod(victim, 0o644)
    script = _script(s) + "; chmod 600 '%s'" % victim
    view = "bwrap did not build the sandbox: / is not mounted read-only"
    message = UNAVAILABLE_WS + " Runner failure: " + view
    # auto: the probe's child finds no mount view around it, so the probe
    # fails and auto falls back to Landlock, which says what it does not
    # govern (metadata) instead of claiming bwrap's `full`.
    r = _run(s, extra=["--config", conf, "--runner", "auto"], env=_cache_env(s))
    c = _confined_by_landlock(s, r)
    assert c["skippedRunners"] == [{"runner": "bwrap", "reason": "the bwrap probe failed (exit status 125): "
                                    "dsh-confine: " + view}], c
    assert c["enforcement"] == "partial" and "metadata" in [g["effect"] for g in c["gaps"]], c
    assert not os.path.exists(_cache_file(s)), "a failed probe was cached"
    for p in (s.p("ws", "in"), s.p("ws", "refused")):
        os.unlink(p)
    # Forced bwrap (no probe): the stage sees it is not inside bwrap's mount
    # view and refuses.
    for runner in ("bwrap",):
        r = _run(s, extra=["--config", conf, "--runner", runner], env=_cache_env(s), script=script)
        _refused_unavailable(s, r, message)
        assert os.stat(victim).st_mode & 0o777 == 0o644, r
        r = _run(s, extra=["--config", conf, "--runner", runner, "--supervise"], env=_cache_env(s), script=script)
        assert r.rc == 125, r
        assert r.err.endswith("dsh-confine: %s\n" % message) and r.err.count("\n") == 2, r
        assert [x["type"] for x in r.report] == ["error", "result", "error"], r
        stage_err, res, err = r.report
        assert stage_err["message"] == message and err["message"] == message, r
        assert res["runnerFailed"] is True and res["exitCode"] == 125, r
        _nothing_ran(s, r)
        assert os.stat(victim).st_mode & 0o777 == 0o644, r


# -- 3. bwrap killed while the command runs ------------------------------------------------------------

def _children(pid):
    out = []
    try:
        for tid in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/children" % (pid, tid)) as f:
                out += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return out


def _descendants(pid):
    seen, todo = [], [pid]
    while todo:
        for c in _children(todo.pop()):
            seen.append(c)
            todo.append(c)
    return seen


def _comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return None




def _wait_for(pred, what, limit=30.0):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.01)
    raise AssertionError("waited %ss for %s" % (limit, what))


def _killed_mid_run(s, supervise):
    started, bg, late = s.p("ws", "started"), s.p("ws", "bg"), s.p("ws", "late")
    # A background grandchild, then the marker, then a side effect that must
    # never happen: the whole tree is killed with bwrap long before.
    script = ("sleep 300 & echo $! > '%s'; touch '%s'; sleep 300; touch '%s'" % (bg, started, late))
    r, w = os.pipe()
    args = [DSH, "--report-fd", str(w), "--mode", "workspace-write", "--root", s.ws, "--runner", "bwrap"]
    args += ["--supervise"] if supervise else []
    p = subprocess.Popen(args + ["--", "sh", "-c", script], env=s.env(), pass_fds=(w,), cwd=s.base,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    os.close(w)
    try:
        _wait_for(lambda: os.path.exists(started) and os.path.getsize(bg) > 0, "the command to start")
        # bwrap is dsh-confine's child in both modes (exec mode forwards signals).
        bwrap_pid = _wait_for(lambda: [c for c in _children(p.pid) if _comm(c) == "bwrap"], "bwrap")[0]
        assert _comm(bwrap_pid) == "bwrap", _comm(bwrap_pid)
        # Namespace init, the command, its two sleeps: the second is forked
        # just after the marker, so it is waited for, not assumed.
        tree = _wait_for(lambda: (lambda t: t if len(t) >= 4 else None)(_descendants(bwrap_pid)),
                         "the command's two sleeps")
        pidfds = [os.pidfd_open(pid) for pid in tree]
        os.kill(bwrap_pid, signal.SIGKILL)
        out, err = p.communicate(timeout=60)
        # Nothing of the sandbox survives, the background grandchild included:
        # every process of the tree (held by pidfd: no pid reuse) exits, and
        # no process is left whose command line names the scratch.
        for fd in pidfds:
            ready, _, _ = select.select([fd], [], [], 30)
            os.close(fd)
            assert ready, "a process of the sandbox survived bwrap: %r" % tree
        _wait_for(lambda: not processes_naming(s.base), "the sandbox's processes to go: %r" % processes_naming(s.base))
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    report = b""
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        report += chunk
    os.close(r)
    assert not os.path.exists(late)
    records = [json.loads(x) for x in report.decode().splitlines()]
    check_records(records)
    return p.returncode, err.decode(), records


def test_bwrap_killed_mid_run_exec_mode(s):
    need_bwrap()
    rc, err, report = _killed_mid_run(s, supervise=False)
    # The command died by SIGKILL with bwrap's namespace; dsh-confine, its
    # forwarder, dies of the same signal (a shell says 137).
    assert rc == -signal.SIGKILL, (rc, err)
    assert err == "", err
    assert [x["type"] for x in report] == ["confinement"], report


def test_bwrap_killed_mid_run_supervise_mode(s):
    need_bwrap()
    rc, err, report = _killed_mid_run(s, supervise=True)
    # The command died by SIGKILL when bwrap's namespace went (PIDFD_INFO_EXIT
    # gives its own status; bwrap's, where that is missing, is the same signal).
    assert rc == 128 + signal.SIGKILL, (rc, err, report)
    assert err == "", err
    assert [x["type"] for x in report] == ["confinement", "result"], report
    res = report[1]
    assert res["exitCode"] is None and res["signal"] == signal.SIGKILL, res
    assert res["runner"] == "bwrap" and res["runnerFailed"] is False and res["denied"] is False, res


# -- 5. the probe cache ---------------------------------------------------------------------------------

def _switchable_stub(s):
    # The real bwrap until the switch file exists, then a setup failure. The
    # stub itself never changes, so the cache key (path, inode, size, times)
    # stays the same: a cached "usable" verdict is a lie once switched.
    switch = s.p("base", "broken")
    stub = s.script("switch-bwrap", "#!/bin/sh\nif [ -e '%s' ]; then echo \"%s\" >&2; exit 1; fi\nexec %s \"$@\"\n"
                 % (switch, SETUP_ERROR, BWRAP))
    return stub, switch


def _cache_file(s):
    return s.p("base", "cache", "dsh-confine", "bwrap-probe-v1")


def _good_cache(s, conf):
    # A run whose probe passes writes the entry: exactly what a forged one
    # would have to be.
    r = _run(s, extra=["--config", conf], env=_cache_env(s), script="true")
    assert r.rc == 0 and r.rec("confinement")["runner"] == "bwrap", r
    need(os.path.exists(_cache_file(s)), "the probe cache is not used here (an inherited seccomp filter?)")
    with open(_cache_file(s)) as f:
        return f.read()


def test_poisoned_probe_cache_fails_closed(s):
    _need_runners()
    stub, switch = _switchable_stub(s)
    conf = _config(s, bwrapPath=stub)
    text = _good_cache(s, conf)
    assert text.startswith("dsh-confine bwrap probe cache v1\nkey=") and text.endswith("\nverdict=usable\n"), text
    open(switch, "w").close()
    # A forged entry: written by hand, with the key that matches.
    os.unlink(_cache_file(s))
    with open(_cache_file(s), "w") as f:
        f.write(text)
    os.chmod(_cache_file(s), 0o600)
    r = _run(s, extra=["--config", conf], env=_cache_env(s))
    # The cache makes auto take bwrap without a probe; bwrap then refuses
    # before the command starts. Exec mode has a parent now (issue 15): 125,
    # an error record, and the stale entry is forgotten as in supervise mode.
    generic = UNAVAILABLE_WS + " Runner failure: bwrap exited with status 1 before starting the command"
    assert r.rc == 125 and r.err == SETUP_ERROR + "\ndsh-confine: " + generic + "\n", r
    assert [x["type"] for x in r.report] == ["error"] and r.report[0]["message"] == generic, r
    _nothing_ran(s, r)
    assert not os.path.exists(_cache_file(s))
    # Poisoned again, for supervise mode.
    with open(_cache_file(s), "w") as f:
        f.write(text)
    os.chmod(_cache_file(s), 0o600)
    r = _run(s, extra=["--config", conf, "--supervise"], env=_cache_env(s))
    message = UNAVAILABLE_WS + " Runner failure: " + SETUP_ERROR
    assert r.rc == 125 and r.err == SETUP_ERROR + "\ndsh-confine: " + message + "\n", r
    assert [x["type"] for x in r.report] == ["result", "error"] and r.report[1]["message"] == message, r
    _nothing_ran(s, r)
    # The supervisor saw bwrap fail on a cached verdict and forgot it: the
    # next run probes, the probe fails, and auto falls back to Landlock.
    assert not os.path.exists(_cache_file(s))
    r = _run(s, extra=["--config", conf], env=_cache_env(s), script="true")
    assert r.rc == 0 and r.rec("confinement")["runner"] == "landlock", r


def test_corrupt_or_unsafe_probe_cache_is_not_believed(s):
    _need_runners()
    stub, switch = _switchable_stub(s)
    conf = _config(s, bwrapPath=stub)
    text = _good_cache(s, conf)
    open(switch, "w").close()
    cache_dir = os.path.dirname(_cache_file(s))
    variants = [
        ("truncated", text[: len(text) // 2], 0o600, None, 0o700),
        ("no final newline", text[:-1], 0o600, None, 0o700),
        ("other key", text.replace("key=", "key=x", 1), 0o600, None, 0o700),
        ("garbage", "\0\xff" * 100, 0o600, None, 0o700),
        ("world-writable file", text, 0o666, None, 0o700),
        ("group-writable file", text, 0o620, None, 0o700),
        ("world-writable directory", text, 0o600, None, 0o777),
    ]
    if is_root():
        variants.append(("owned by another user", text, 0o600, 65534, 0o700))
    for name, content, mode, owner, dir_mode in variants:
        os.chmod(cache_dir, 0o700)
        if os.path.lexists(_cache_file(s)):
            os.unlink(_cache_file(s))
        with open(_cache_file(s), "w") as f:
            f.write(content)
        os.chmod(_cache_file(s), mode)
        if owner is not None:
            os.chown(_cache_file(s), owner, owner)
        os.chmod(cache_dir, dir_mode)
        for p in (s.p("ws", "in"), s.p("ws", "refused")):
            if os.path.exists(p):
                os.unlink(p)
        r = _run(s, extra=["--config", conf], env=_cache_env(s))
        # Not believed: the probe runs, fails, and auto falls back to Landlock.
        try:
            c = _confined_by_landlock(s, r)
            reason = {x["runner"]: x["reason"] for x in c["skippedRunners"]}["bwrap"]
            assert reason == "the bwrap probe failed (exit status 1): " + SETUP_ERROR, reason
        except AssertionError:
            raise AssertionError("cache %s" % name)
        # The failed probe removed the entry, except from a directory that is
        # not ours alone (nothing there is touched).
        assert os.path.lexists(_cache_file(s)) == (dir_mode != 0o700), name
    # A symlink in place of the file is not followed.
    os.chmod(cache_dir, 0o700)
    if os.path.lexists(_cache_file(s)):
        os.unlink(_cache_file(s))
    good = s.p("base", "elsewhere")
    with open(good, "w") as f:
        f.write(text)
    os.chmod(good, 0o600)
    os.symlink(good, _cache_file(s))
    r = _run(s, extra=["--config", conf], env=_cache_env(s))
    _confined_by_landlock(s, r)


# -- 4. the session log on a full or read-only file system ------------------------------------------------

def _in_mount_ns(s, script):
    """Runs `script` (sh) in a private mount namespace with a tiny tmpfs at $M."""
    m = s.p("base", "mnt")
    os.mkdir(m)
    cmd = ["unshare", "-m"] + _userns() + ["--propagation", "private", "sh", "-c", script, "sh", m, DSH, s.ws]
    return subprocess.run(cmd, env=s.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)


def _event(mode, seq, pad=0):
    # A well-formed sandbox/mode line; `pad` grows it with an ignored member.
    ev = {"type": "sandbox/mode", "seq": seq, "time": 1, "data": {"mode": mode}}
    if pad:
        ev["pad"] = "x" * pad
    return json.dumps(ev, separators=(",", ":")) + "\n"


def _log_to_fill(page_room):
    # Lines of a log that ends `page_room` bytes before a 4 KiB page boundary.
    head = _event("read-only", 1)
    filler = 4096 - page_room - len(head) - (len(_event("read-only", 2, pad=1)) - 1)
    text = head + _event("read-only", 2, pad=filler)
    assert len(text) == 4096 - page_room, len(text)
    return text


def _set_mode_on(s, log, prepare, names, after=""):
    """`session set-mode` on logs $M/NAME in a private 8 KiB tmpfs at $M that
    starts with `log` as $M/log; `prepare` (sh) runs first, `after` last. Each
    call is followed by `&& touch $WS/after-NAME`. Returns (stdout, stderr, M)."""
    with open(s.p("base", "log-text"), "w") as f:
        f.write(log)
    script = r'''
set -u
M=$1 DSH=$2 WS=$3
mount -t tmpfs -o size=8k tmpfs "$M" || exit 90
cp "$M/../log-text" "$M/log" || exit 91
''' + prepare + r'''
for name in %s; do
  "$DSH" session set-mode "$M/$name" workspace-write && touch "$WS/after-$name"
  echo "rc=$?"
done
''' % " ".join(names) + after
    p = _in_mount_ns(s, script)
    return p.stdout.decode(), p.stderr.decode(), s.p("base", "mnt")


def test_session_log_on_a_full_disk(s):
    need_landlock()
    # Two cases on an 8 KiB tmpfs filled to the last byte by another file:
    # a log that fills its page to within 20 bytes (the event line is written
    # in part: a short write) and a new, empty log (no byte can be written).
    log = _log_to_fill(20)
    out, err, m = _set_mode_on(s, log, '''head -c 4096 /dev/zero > "$M/fill" 2>/dev/null
: > "$M/empty"
''', ["log", "empty"], r'''cat "$M/log" > "$M/../log-after"
cat "$M/empty" > "$M/../empty-after"
# The next run still reads the old mode: read-only, so the write is refused.
"$DSH" --session "$M/log" --root "$WS" -- sh -c "echo x > '$WS/next'" 2>/dev/null; echo "next=$?"
''')
    want = "".join("dsh-confine: session log %s/%s: cannot append the sandbox/mode event: No space left on device\n"
                   % (m, n) for n in ("log", "empty"))
    assert err == want, (out, err)
    lines = out.splitlines()
    assert lines[:2] == ["rc=125", "rc=125"] and len(lines) == 3, out
    assert lines[2].startswith("next=") and lines[2] != "next=0", out
    # No torn line: the log is byte for byte what it was, the new one empty.
    assert open(s.p("base", "log-after")).read() == log
    assert open(s.p("base", "empty-after")).read() == ""
    for n in ("after-log", "after-empty", "next"):
        assert not os.path.exists(s.p("ws", n)), n


def test_session_log_on_a_read_only_file_system(s):
    need_landlock()
    log = _event("read-only", 1)
    out, err, m = _set_mode_on(s, log, '''mount -o remount,ro,bind "$M" || exit 92
''', ["log", "new"], '''cat "$M/log" > "$M/../log-after"
''')
    want = "".join("dsh-confine: session log %s/%s: cannot open: Read-only file system\n" % (m, n)
                   for n in ("log", "new"))
    assert (out, err) == ("rc=125\nrc=125\n", want), (out, err)
    assert open(s.p("base", "log-after")).read() == log
    for n in ("after-log", "after-new"):
        assert not os.path.exists(s.p("ws", n)), n


# -- A layer that says yes and does nothing (issue 38) ---------------------------------------------------
# An environment whose own seccomp filter answers seccomp() or landlock_restrict_self
# with success (SECCOMP_RET_ERRNO with errno 0: sysfault 0 NR) and installs nothing.
# Each layer is checked in the process that becomes the command before the exec, so
# the run is a runner failure (125, nothing ran, no confinement record), never
# "full". The stacked case: an outer filter that already refuses TIOCSTI (as an
# outer dsh-confine's does), so only the filter's own mark (a random ioctl command
# only the filter just loaded refuses) can tell.
TIOCSTI = 0x5412
LAYER_FAKES = {
    "seccomp": ([("0", "317")],
                "the seccomp filter was reported loaded but a call it refuses was not refused (Bad file "
                "descriptor)"),
    "seccomp-under-a-filter": ([("EPERM", "16@1=%d" % TIOCSTI), ("0", "317")],
                               "the seccomp filter was reported loaded but a call it refuses was not refused (Bad "
                               "file descriptor)"),
    "landlock": ([("0", "446")], "landlock_restrict_self reported success but Landlock did not take"),
}


def _faked(pairs):
    pre = []
    for err, calls in pairs:
        pre += [tool("sysfault"), err, calls, "--"]
    return pre


@matrix(runner=RUNNERS, fake=tuple(LAYER_FAKES), supervise=EXEC_SUPERVISE)
def test_a_layer_that_did_not_take_is_a_runner_failure(s, runner, fake, supervise):
    need_landlock()
    pairs, detail = LAYER_FAKES[fake]
    r = _run(s, extra=["--runner", runner] + supervise, pre=_faked(pairs))
    assert r.rc == 125, r
    assert ("Runner failure: " + detail) in r.err, r
    errors = [x for x in r.report if x["type"] == "error"]
    assert errors and all(e["code"] == "SANDBOX_UNAVAILABLE" and detail in e["message"] for e in errors), r
    assert r.rec("confinement") is None, r  # never reported as confined, "full" or otherwise
    res = r.rec("result")
    if res is not None:
        assert res["runnerFailed"] is True and detail in res["runnerFailure"], r
    _nothing_ran(s, r)
    # The same environment without the fake runs and confines: the check is not a
    # refusal of every environment with a filter of its own.
    ok = _run(s, extra=["--runner", runner] + supervise, pre=_faked(pairs[:-1]))
    assert ok.rc == 0 and ok.rec("confinement")["runner"] == runner, ok
    assert os.path.exists(s.p("ws", "refused")) and not os.path.exists(s.p("outside", "out")), ok


if __name__ == "__main__":
    main()
