"""dsh-confine's own state and its own input under attack (issue 13, items 5 and 6), seen from outside.

Own state decides the next run: a config (runnerCommand runs unconfined), a session log (its last
mode wins), an approver (it says yes). A run whose writable roots hold any of it is refused, and a
file another user could rewrite is refused. The launcher's input: deep JSON, FIFOs and symlinks where
a file is expected, --keep-fd of the report fd, the stage word typed on a command line, a low fd limit.
Each case checks the exit status, the one-line message, and that nothing ran or changed.
"""
import json
import os
import subprocess
import time

from harness import (DSH, SANDBOX_UNAVAILABLE, dsh, is_root, main, need_bwrap, need_landlock, processes_naming, sh,
                     skip)

RUNNERS = ("landlock", "bwrap")
NO_XDG = {"XDG_CONFIG_HOME": None, "XDG_CACHE_HOME": None, "XDG_RUNTIME_DIR": None, "DSH_CONFINE_CONFIG": None}


def _need_runners():
    need_landlock()
    need_bwrap()


def _write(path, text, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)
    return path


def _refused(r, code, message=None, prefix=None, status=125):
    """Exit status, one stderr line, the error record's code."""
    assert r.rc == status, r
    assert r.err.count("\n") == 1 and r.err.startswith("dsh-confine: "), r
    if message is not None:
        assert r.err == "dsh-confine: %s\n" % message, r
    if prefix is not None:
        assert r.err.startswith("dsh-confine: " + prefix), r
    if r.report:
        assert [x["type"] for x in r.report] == ["error"] and r.report[0]["code"] == code, r


def _state_msg(what, path, root, source):
    fix = {"workspace": "choose a narrower --root, or ", "flag": "drop that --writable, or "}.get(source, "")
    return ("the %s %s decides later runs, and this run could rewrite it: it is under the writable root %s (%s); "
            "%smove the %s out of it" % (what, path, os.path.realpath(root), source, fix, what))


SYSTEM_FIX = ("put it in /etc/dsh-confine/config.json (or a root-owned file in /etc/dsh-confine named by "
              "--config)")
MODE_FIX = "pass --mode danger-full-access (or --escalate) on the command line, or " + SYSTEM_FIX


def _unsealed_msg(what, path, key, fix):
    return ("%s %s: %s is taken only from the command line or from a file no confined run could have written "
            "(owned by root in directories only root can write; for root, one in /etc/dsh-confine), and an "
            "earlier run could have written this one; %s" % (what, path, key, fix))


def _custom_runner_config(s, path, marker):
    """A config whose runnerCommand leaves `marker`: if it ever runs, the attack worked."""
    runner = s.script("evil-runner", "#!/bin/sh\ntouch '%s'\nwhile [ \"$1\" != -- ]; do shift; done; shift\n"
                                     "exec \"$@\"\n" % marker)
    return _write(path, json.dumps({"runnerCommand": [runner], "runnerFailureSignatures": ["evil:"]}))


# ---- item 5: own state under a writable root ---------------------------------------------------

def test_config_under_the_root_is_refused_and_nothing_is_written(s):
    _need_runners()
    cfg = s.p("home", ".config", "dsh-confine", "config.json")
    marker = s.p("outside", "runner-ran")
    plant = ("mkdir -p '%s' && printf '%%s' '%s' > '%s'" %
             (os.path.dirname(cfg), json.dumps({"runnerCommand": ["/bin/sh"], "runnerFailureSignatures": ["x"]}),
              cfg))
    for runner in RUNNERS:
        for supervise in ([], ["--supervise"]):
            # The repro: the workspace is $HOME, the command plants a config for the next run.
            # bwrap runs with the config's directory bound read-only (test_carveouts.py
            # test_root_at_home__bwrap); Landlock cannot carve and refuses, writing nothing.
            for xdg in ({}, {"XDG_CONFIG_HOME": s.outside}):
                # $XDG_CONFIG_HOME set elsewhere: the $HOME one is still a later run's config.
                r = sh(plant, s, mode="workspace-write", root=s.home, runner=runner, extra=supervise,
                       env=dict(NO_XDG, **xdg))
                if runner == "bwrap":
                    assert r.rc != 0 and not os.path.exists(cfg), r
                    continue
                _refused(r, "UNSAFE_STATE", _state_msg("config", cfg, s.home, "workspace"))
                assert not os.path.exists(os.path.dirname(cfg)), "the command ran: %r" % r
    # A root above the config directory's parent, and a --writable on the directory itself.
    os.makedirs(os.path.dirname(cfg), exist_ok=True)
    r = sh("true", s, mode="workspace-write", root=s.ws, extra=["--writable", os.path.dirname(cfg)], env=NO_XDG)
    _refused(r, "UNSAFE_STATE", _state_msg("config", cfg, os.path.dirname(cfg), "flag"))
    # A dotfile manager's link from $HOME into the workspace: the target is what a later run reads.
    dots = _write(s.p("ws", "dots", "dsh.json"), "{}")
    os.symlink(dots, cfg)
    r = sh("echo '{\"mode\": \"danger-full-access\"}' > '%s'" % dots, s, mode="workspace-write", root=s.ws,
           env=NO_XDG)
    _refused(r, "UNSAFE_STATE", _state_msg("config", cfg, s.ws, "workspace"))
    assert open(dots).read() == "{}"
    os.unlink(cfg)
    # An existing config planted by an earlier run: its runnerCommand is never taken (issue 37),
    # whatever this run's roots.
    _custom_runner_config(s, cfg, marker)
    r = sh("true", s, mode="workspace-write", root=s.home, runner="landlock", env=NO_XDG)
    _refused(r, "UNSAFE_STATE", _unsealed_msg("config", cfg, '"runnerCommand"', SYSTEM_FIX))
    assert not os.path.exists(marker)
    # auto: the configured custom runner cannot carve, so it is passed over, never run.
    r = sh("true", s, mode="workspace-write", root=s.home, env=NO_XDG)
    assert not os.path.exists(marker), r


def test_config_in_a_tmp_root_and_the_explicit_paths(s):
    _need_runners()
    cfg = s.p("tmpdir", "dsh.json")
    plain = _write(s.p("outside", "plain.json"), "{}")
    evil = json.dumps({"runnerCommand": ["/bin/sh"], "runnerFailureSignatures": ["x"]})
    for runner in RUNNERS:
        # $DSH_CONFINE_CONFIG under $TMPDIR (a default writable root): the caller's own file,
        # which this run's command could rewrite.
        _write(cfg, "{}")
        r = sh("echo '%s' > '%s'" % (evil, cfg), s, mode="workspace-write", root=s.ws, runner=runner,
               env=dict(NO_XDG, DSH_CONFINE_CONFIG=cfg))
        _refused(r, "UNSAFE_STATE", _state_msg("config", cfg, s.tmpdir, "tmpdir"))
        assert open(cfg).read() == "{}"
        # --config wins for this run, yet the environment's file is a later run's config:
        # whether it exists or not, this run must not be able to write it.
        os.unlink(cfg)
        r = sh("echo '%s' > '%s'" % (evil, cfg), s, mode="workspace-write", root=s.ws, runner=runner,
               extra=["--config", plain], env=dict(NO_XDG, DSH_CONFINE_CONFIG=cfg))
        _refused(r, "UNSAFE_STATE", _state_msg("config", cfg, s.tmpdir, "tmpdir"))
        assert not os.path.exists(cfg)
    # read-only grants no root: the same config is read and used.
    _write(cfg, json.dumps({"mode": "read-only"}))
    r = sh("true", s, runner="landlock", env=dict(NO_XDG, DSH_CONFINE_CONFIG=cfg))
    assert r.rc == 0 and r.rec("confinement")["modeSource"] == "flag", r


def test_untrusted_config_is_refused(s):
    need_landlock()
    marker = s.p("outside", "runner-ran")
    cfg = _custom_runner_config(s, s.p("outside", "cfg", "config.json"), marker)
    os.chmod(os.path.dirname(cfg), 0o755)
    run = lambda: dsh(["--config", cfg, "--mode", "read-only", "--", "true"], s, env=NO_XDG)
    # The file group- or world-writable.
    for mode in (0o664, 0o646, 0o666):
        os.chmod(cfg, mode)
        r = run()
        _refused(r, "CONFIG_INVALID", "config %s: writable by group or others (mode %04o), so another user could "
                                      "change what the next run does; chmod go-w %s" % (cfg, mode, cfg))
        assert not os.path.exists(marker)
    os.chmod(cfg, 0o644)
    # A directory above it group-writable without the sticky bit; with it (like /tmp) it is fine.
    d = os.path.dirname(cfg)
    os.chmod(d, 0o775)
    r = run()
    _refused(r, "CONFIG_INVALID", "config %s: directory %s is writable by group or others (mode 0775) without the "
                                  "sticky bit, so another user could replace the file; chmod go-w %s" % (cfg, d, d))
    assert not os.path.exists(marker)
    os.chmod(d, 0o1777)
    os.chmod(cfg, 0o644)
    cfg2 = _write(s.p("outside", "cfg", "ro.json"), json.dumps({"mode": "read-only"}))
    r = dsh(["--config", cfg2, "--", "true"], s, env=NO_XDG)
    assert r.rc == 0, r
    os.chmod(d, 0o755)
    # A symlink (a dotfile manager's) owned by the caller to a trusted file is read; to an
    # untrusted one it is refused.
    link = s.p("outside", "cfg", "link.json")
    os.symlink(cfg2, link)
    r = dsh(["--config", link, "--", "true"], s, env=NO_XDG)
    assert r.rc == 0 and r.rec("confinement")["modeSource"] == "config", r
    os.chmod(cfg2, 0o666)
    r = dsh(["--config", link, "--", "true"], s, env=NO_XDG)
    _refused(r, "CONFIG_INVALID", prefix="config %s: writable by group or others" % link)
    if is_root():
        # Owned by another uid: refused although its modes are strict.
        os.chmod(cfg, 0o644)
        os.chown(cfg, 65534, 65534)
        r = run()
        _refused(r, "CONFIG_INVALID", "config %s: owned by uid 65534, neither you (uid 0) nor root, so another "
                                      "user could change what the next run does; use a file you own" % cfg)
        assert not os.path.exists(marker)
        # A directory owned by another uid.
        os.chown(cfg, 0, 0)
        os.chown(d, 65534, 65534)
        r = run()
        _refused(r, "CONFIG_INVALID", prefix="config %s: directory %s is owned by uid 65534" % (cfg, d))
        assert not os.path.exists(marker)


def test_session_log_under_a_writable_root(s):
    _need_runners()
    for runner in RUNNERS:
        for where, root, source in ((s.p("ws", "session.jsonl"), s.ws, "workspace"),
                                    (s.p("tmpdir", "session.jsonl"), s.tmpdir, "tmpdir")):
            r = dsh(["session", "set-mode", where, "workspace-write"], s, report=False)
            assert r.rc == 0, r
            before = open(where).read()
            evil = json.dumps({"type": "sandbox/mode", "seq": 9, "time": 0, "data": {"mode": "danger-full-access"}})
            r = dsh(["--session", where, "--root", s.ws, "--runner", runner, "--", "sh", "-c",
                     "echo '%s' >> '%s'" % (evil, where)], s, env=NO_XDG)
            _refused(r, "UNSAFE_STATE", _state_msg("session log", where, root, source))
            assert open(where).read() == before
            os.unlink(where)
    # A --writable naming the log file itself.
    log = s.p("outside", "s.jsonl")
    assert dsh(["session", "set-mode", log, "read-only"], s, report=False).rc == 0
    r = dsh(["--session", log, "--mode", "workspace-write", "--root", s.ws, "--writable", log, "--", "true"], s,
            env=NO_XDG)
    _refused(r, "UNSAFE_STATE", _state_msg("session log", log, log, "flag"))
    # The same log read by a read-only run is fine: nothing is writable.
    log = s.p("ws", "ro.jsonl")
    assert dsh(["session", "set-mode", log, "read-only"], s, report=False).rc == 0
    r = dsh(["--session", log, "--root", s.ws, "--", "true"], s, env=NO_XDG)
    assert r.rc == 0 and r.rec("confinement")["modeSource"] == "session", r
    # A log another user could write is refused, whatever it says.
    os.chmod(log, 0o666)
    r = dsh(["--session", log, "--", "true"], s, env=NO_XDG)
    _refused(r, "SESSION_INVALID", prefix="session log %s: writable by group or others (mode 0666)" % log)


def test_approver_under_a_writable_root_or_untrusted(s):
    need_landlock()
    marker = s.p("outside", "approver-ran")
    body = "#!/bin/sh\ntouch '%s'\nexit 0\n" % marker
    inside = _write(s.p("ws", "approve.sh"), body, 0o755)
    # Under the root: refused even without an escalation (this run could rewrite it for the next).
    r = dsh(["--mode", "workspace-write", "--root", s.ws, "--runner", "landlock", "--approver", inside, "--",
             "sh", "-c", "echo 'exit 0' >> '%s'" % inside], s, env=NO_XDG)
    _refused(r, "UNSAFE_STATE", _state_msg("approver", inside, s.ws, "workspace"))
    assert open(inside).read() == body
    # An escalation whose target root holds the approver: nobody is asked.
    r = dsh(["--root", s.ws, "--runner", "landlock", "--escalate", "workspace-write", "--justification", "x",
             "--approver", "sh %s" % inside, "--", "true"], s, env=NO_XDG)
    _refused(r, "UNSAFE_STATE", _state_msg("approver", inside, s.ws, "workspace"))
    assert not os.path.exists(marker)
    # A bare name found on PATH: a PATH directory under the root could hold it next time.
    r = dsh(["--mode", "workspace-write", "--root", s.ws, "--runner", "landlock", "--approver", "dsh-approve-x",
             "--", "true"], s, env=dict(NO_XDG, PATH=s.p("ws", "bin") + ":/usr/bin:/bin"))
    _refused(r, "UNSAFE_STATE", _state_msg("approver", s.p("ws", "bin", "dsh-approve-x"), s.ws, "workspace"))
    # Outside the roots but writable by others: refused, not run.
    outside = _write(s.p("outside", "approve.sh"), body, 0o757)
    r = dsh(["--root", s.ws, "--runner", "landlock", "--escalate", "workspace-write", "--justification", "x",
             "--approver", outside, "--", "true"], s, env=NO_XDG)
    _refused(r, "UNSAFE_STATE", "approver %s: writable by group or others (mode 0757), so another user could "
                                "change what the next run does; chmod go-w %s" % (outside, outside))
    assert not os.path.exists(marker)
    # The same approver with strict modes is asked and its yes counts.
    os.chmod(outside, 0o755)
    r = dsh(["--root", s.ws, "--runner", "landlock", "--escalate", "workspace-write", "--justification", "x",
             "--approver", outside, "--", "touch", s.p("ws", "made")], s, env=NO_XDG)
    assert r.rc == 0 and os.path.exists(marker) and os.path.exists(s.p("ws", "made")), r


# ---- item 6: the launcher's input ------------------------------------------------------------------

def _deep(n):
    return "[" * n + "]" * n


def test_deep_json_is_a_clean_error(s):
    for depth in (65, 30000, 200000):
        cfg = _write(s.p("outside", "deep-%d.json" % depth), '{"mode": %s}' % _deep(depth))
        r = dsh(["--config", cfg, "--", "true"], s, env=NO_XDG, timeout=30)
        _refused(r, "CONFIG_INVALID", "config %s: %s" % (
            cfg, "nested deeper than 64 levels" if depth < 200000 else "nested deeper than 64 levels"))
        log = _write(s.p("outside", "deep-%d.jsonl" % depth),
                     '{"type":"sandbox/mode","seq":1,"data":{"mode":%s}}\n' % _deep(depth))
        r = dsh(["--session", log, "--", "true"], s, env=NO_XDG, timeout=30)
        if depth * 2 + 60 > 65536:
            _refused(r, "SESSION_INVALID", "session log %s line 1: longer than 65536 bytes; start a new log" % log)
        else:
            _refused(r, "SESSION_INVALID", "session log %s line 1: nested deeper than 64 levels" % log)
        # set-mode folds the log first: the same error, nothing appended.
        r = dsh(["session", "set-mode", log, "read-only"], s, report=False, timeout=30)
        assert r.rc == 125 and r.err.count("\n") == 1, r
        assert open(log).read().count("\n") == 1
    # 64 deep is still JSON we read (and refuse for its meaning, not its shape).
    cfg = _write(s.p("outside", "deep-64.json"), '{"mode": %s}' % _deep(63))
    r = dsh(["--config", cfg, "--", "true"], s, env=NO_XDG)
    _refused(r, "CONFIG_INVALID", 'config %s: "mode" must be a string, not an array' % cfg)
    # An approver that prints deep JSON: its words are not parsed, its exit status decides.
    appr = _write(s.p("outside", "deep-approver.sh"), "#!/bin/sh\nprintf '%s'\nexit 1\n" % _deep(5000), 0o755)
    r = dsh(["--root", s.ws, "--escalate", "workspace-write", "--justification", "x", "--approver", appr, "--",
             "true"], s, env=NO_XDG)
    assert r.rc == 125 and r.rec("error")["code"] == "ESCALATION_REJECTED", r


def test_fifo_at_the_config_and_session_paths_returns_promptly(s):
    fifo = s.p("outside", "fifo")
    os.mkfifo(fifo)
    home_cfg = s.p("home", ".config", "dsh-confine", "config.json")
    os.makedirs(os.path.dirname(home_cfg))
    os.mkfifo(home_cfg)
    cases = [
        (["--config", fifo, "--", "true"], {}, "config %s: not a regular file" % fifo, "CONFIG_INVALID"),
        (["--", "true"], {"DSH_CONFINE_CONFIG": fifo}, "config %s: not a regular file" % fifo, "CONFIG_INVALID"),
        (["--", "true"], {}, "config %s: not a regular file" % home_cfg, "CONFIG_INVALID"),
        (["--session", fifo, "--config", "/dev/null", "--", "true"], {}, None, "CONFIG_INVALID"),
    ]
    for args, env, msg, code in cases:
        t = time.time()
        r = dsh(args, s, env=dict(NO_XDG, **env), timeout=10)
        assert time.time() - t < 5, r
        _refused(r, code, msg)
    os.unlink(home_cfg)
    t = time.time()
    r = dsh(["--session", fifo, "--", "true"], s, env=NO_XDG, timeout=10)
    _refused(r, "SESSION_INVALID", "session log %s: not a regular file" % fifo)
    r = dsh(["session", "set-mode", fifo, "read-only"], s, report=False, timeout=10)
    assert r.rc == 125 and r.err == "dsh-confine: session log %s: not a regular file\n" % fifo, r
    assert time.time() - t < 8


def test_set_mode_never_follows_or_creates_through_a_symlink(s):
    target = _write(s.p("outside", "victim"), "precious\n")
    st = os.stat(target)
    link = s.p("ws", "log")
    os.symlink(target, link)
    dangling = s.p("ws", "dangling")
    os.symlink(s.p("outside", "created"), dangling)
    for path in (link, dangling):
        r = dsh(["session", "set-mode", path, "danger-full-access"], s, report=False)
        assert r.rc == 125, r
        assert r.err == ("dsh-confine: session log %s: is a symlink, which dsh-confine does not follow here; "
                         "name the file itself\n" % path), r
        r = dsh(["--session", path, "--", "true"], s, env=NO_XDG)
        _refused(r, "SESSION_INVALID")
    assert open(target).read() == "precious\n" and os.stat(target).st_mtime_ns == st.st_mtime_ns
    assert not os.path.exists(s.p("outside", "created"))
    # A new log is created 0644 whatever the umask, so it can be read back.
    new = s.p("outside", "new.jsonl")
    old = os.umask(0)
    try:
        assert dsh(["session", "set-mode", new, "read-only"], s, report=False).rc == 0
    finally:
        os.umask(old)
    assert os.stat(new).st_mode & 0o777 == 0o644
    assert dsh(["--session", new, "--", "true"], s, env=NO_XDG).rc == 0
    if is_root():
        # Root does not create a file in a directory another user owns.
        d = s.p("outside", "theirs")
        os.mkdir(d)
        os.chown(d, 65534, 65534)
        r = dsh(["session", "set-mode", os.path.join(d, "log"), "read-only"], s, report=False)
        assert r.rc == 125 and "directory %s is owned by uid 65534" % d in r.err, r
        assert os.listdir(d) == []


def test_keep_fd_of_the_report_fd_or_a_closed_fd_is_refused(s):
    need_landlock()
    for runner in RUNNERS if os.access("/usr/bin/bwrap", os.X_OK) else ("landlock",):
        r_fd, w_fd = os.pipe()
        try:
            forged = '{"type":"confinement","mode":"danger-full-access"}'
            p = subprocess.run([DSH, "--report-fd", str(w_fd), "--keep-fd", str(w_fd), "--runner", runner,
                                "--mode", "read-only", "--", "sh", "-c", "echo '%s' >&%d; touch '%s'"
                                % (forged, w_fd, s.p("outside", "ran"))],
                               pass_fds=(w_fd,), env=s.env(), capture_output=True, timeout=30)
            os.close(w_fd)
            w_fd = -1
            report = os.read(r_fd, 65536).decode()
        finally:
            os.close(r_fd)
            if w_fd >= 0:
                os.close(w_fd)
        msg = ("--keep-fd %s: that is the --report-fd, which the command must not write; pass the command "
               "another fd" % p.args[2])
        assert p.returncode == 125 and p.stderr.decode() == "dsh-confine: %s\n" % msg, p
        assert [json.loads(x)["code"] for x in report.splitlines()] == ["USAGE"], report
        assert not os.path.exists(s.p("outside", "ran"))
        # An fd that is not open: a usage error naming it, not a sandbox failure.
        r = dsh(["--keep-fd", "97", "--runner", runner, "--mode", "read-only", "--", "touch",
                 s.p("outside", "ran")], s)
        _refused(r, "USAGE", "--keep-fd 97: fd 97 is not open; open it before calling dsh-confine")
        assert not os.path.exists(s.p("outside", "ran"))


STAGE_REFUSED = ("__dsh_confine_stage_v1 is the internal entry of dsh-confine's bwrap stage and runs only when "
                 "dsh-confine starts it; to run a command, put it after --: dsh-confine [OPTIONS] -- COMMAND")


def test_stage_word_from_the_command_line_is_refused(s):
    out = s.p("outside", "f")
    cmd = ["--mode", "read-only", "--", "/bin/sh", "sh", "-c", "echo x > '%s'" % out]
    # Typed first on a normal host, with and without a --record-fd of something else.
    f = os.open(s.p("outside", "plain"), os.O_RDWR | os.O_CREAT, 0o600)
    m = os.memfd_create("not-the-stage", 0)
    try:
        for extra, fds in (([], ()), (["--record-fd", str(f)], (f,)), (["--record-fd", str(m)], (m,)),
                           (["--record-fd", "0"], ())):
            p = subprocess.run([DSH, "__dsh_confine_stage_v1"] + extra + cmd, pass_fds=fds, env=s.env(),
                               capture_output=True, timeout=30)
            assert p.returncode == 125 and p.stderr.decode() == "dsh-confine: %s\n" % STAGE_REFUSED, p
            assert not os.path.exists(out)
    finally:
        os.close(f)
        os.close(m)
    # The repro: a host whose / is read-only (bwrap's view, with one writable bind) used to run
    # the command under seccomp alone. Refused; and a forged memfd of the right name is still
    # refused there, because the stage then insists on the kernel's Landlock.
    need_bwrap()
    view = ["/usr/bin/bwrap", "--ro-bind", "/", "/", "--bind", s.outside, s.outside, "--dev", "/dev",
            "--proc", "/proc", "--unshare-pid", "--die-with-parent", "--"]
    p = subprocess.run(view + [DSH, "__dsh_confine_stage_v1"] + cmd, env=s.env(), capture_output=True, timeout=30)
    assert p.returncode == 125 and p.stderr.decode() == "dsh-confine: %s\n" % STAGE_REFUSED, p
    assert not os.path.exists(out)
    need_landlock()
    forge = ("import os,sys; m=os.memfd_create('dsh-confine-stage', 0); os.set_inheritable(m, True); "
             "os.execv(sys.argv[1], [sys.argv[1], '__dsh_confine_stage_v1', '--record-fd', str(m)] + sys.argv[2:])")
    p = subprocess.run(view + ["python3", "-c", forge, DSH] + cmd, env=s.env(), capture_output=True, timeout=30)
    assert p.returncode == 125, p
    assert "the stage was planned with Landlock ABI 0 but the kernel has" in p.stderr.decode(), p
    assert not os.path.exists(out)




def test_low_fd_limit_fails_closed_without_orphans(s):
    _need_runners()
    if os.environ.get("ASAN_OPTIONS"):
        # The sanitizer runtime opens descriptors of its own before main (see test_faults).
        skip("low RLIMIT_NOFILE leaves no descriptor for the sanitizer runtime")
    token = "fdlimit-%d-%s" % (os.getpid(), os.path.basename(s.base))
    ran = s.p("outside", "ran")
    for n in (8, 12, 16, 20, 34):
        for runner in RUNNERS:
            for supervise in ([], ["--supervise"]):
                r = dsh(["--runner", runner, "--mode", "read-only"] + supervise +
                        ["--", "sh", "-c", "touch '%s' # %s" % (ran, token)], s, report=False,
                        pre=["prlimit", "--nofile=%d" % n, "--"], timeout=20)
                assert r.rc == 125 and r.err.count("\n") == 1, r
                assert r.err.startswith("dsh-confine: " + SANDBOX_UNAVAILABLE.format(mode="read-only") +
                                        " Runner failure: "), r
                assert "file descriptors the open-file limit allows are free" in r.err, r
                assert not os.path.exists(ran)
                assert processes_naming(token) == [], "left behind: %r" % processes_naming(token)


# ---- issue 37: own state an earlier run could have written never widens a later run --------------

def _other_home(s):
    """An earlier run's $HOME elsewhere: its own-state paths are not this caller's usual ones, so
    it may have $HOME as its root and plant the usual config (what a run with another $HOME, an
    older dsh-confine, or an ancestor rename could do)."""
    other = s.p("outside", "other-home")
    os.makedirs(other, exist_ok=True)
    return dict(NO_XDG, HOME=other)


def _plant_via_run(s, runner, path, text, supervise):
    """A confined run whose root holds `path` (and which does not know it is state) writes it."""
    r = sh("mkdir -p '%s' && printf '%%s' '%s' > '%s'" % (os.path.dirname(path), text, path), s,
           mode="workspace-write", root=s.home, runner=runner, extra=supervise, env=_other_home(s))
    assert r.rc == 0 and open(path).read() == text, r


def test_planted_config_never_widens_the_next_run(s):
    """The issue's repro: with `--root $HOME` a run planted ~/.config/dsh-confine/config.json; the
    next ordinary run (no --mode) took danger-full-access from it, or ran its runnerCommand, bwrap
    or approver unconfined. Now each is refused with one line, and nothing runs."""
    _need_runners()
    cfg = s.p("home", ".config", "dsh-confine", "config.json")
    outside = s.p("outside", "escaped")
    marker = s.p("outside", "program-ran")
    evil = s.script("evil", "#!/bin/sh\ntouch '%s'\nexit 0\n" % marker)
    cases = [
        ({"mode": "danger-full-access"}, '"mode": "danger-full-access"', MODE_FIX),
        ({"runnerCommand": [evil], "runnerFailureSignatures": ["x"]}, '"runnerCommand"', SYSTEM_FIX),
        ({"bwrapPath": evil}, '"bwrapPath"', SYSTEM_FIX),
        ({"approver": evil}, 'an "approver" command', "pass --approver on the command line, or " + SYSTEM_FIX),
    ]
    for runner in RUNNERS:
        for supervise in ([], ["--supervise"]):
            for obj, key, fix in cases:
                _plant_via_run(s, runner, cfg, json.dumps(obj), supervise)
                # The next run of this caller, with its own $HOME: no --mode, or an escalation.
                for extra in ([], ["--escalate", "workspace-write", "--justification", "x"]):
                    r = dsh(extra + supervise + ["--root", s.ws, "--", "sh", "-c", "echo x > '%s'" % outside], s,
                            env=NO_XDG)
                    _refused(r, "UNSAFE_STATE", _unsealed_msg("config", cfg, key, fix))
                    assert not os.path.exists(outside) and not os.path.exists(marker), r
                # The same file named by --config or $DSH_CONFINE_CONFIG.
                r = dsh(["--config", cfg, "--", "true"], s, env=NO_XDG)
                _refused(r, "UNSAFE_STATE", _unsealed_msg("config", cfg, key, fix))
                r = dsh(["--", "true"], s, env=dict(NO_XDG, DSH_CONFINE_CONFIG=cfg))
                _refused(r, "UNSAFE_STATE", _unsealed_msg("config", cfg, key, fix))
                assert not os.path.exists(marker)
                os.unlink(cfg)
    # What narrows is still read from such a file, and --mode danger-full-access still works.
    _write(cfg, json.dumps({"mode": "workspace-write", "network": "off", "approver": "tty"}))
    r = dsh(["--root", s.ws, "--", "true"], s, env=NO_XDG)
    assert r.rc == 0 and r.rec("confinement")["modeSource"] == "config", r
    r = dsh(["--mode", "danger-full-access", "--", "touch", outside], s, env=NO_XDG)
    assert r.rc == 0 and os.path.exists(outside), r


def test_sealed_config_may_widen(s):
    """The operator's way to a wide default: a root-owned file in /etc/dsh-confine."""
    cfg = s.sealed_config({"mode": "danger-full-access"})
    outside = s.p("outside", "wide")
    r = dsh(["--config", cfg, "--", "touch", outside], s, env=NO_XDG)
    assert r.rc == 0 and os.path.exists(outside) and r.rec("confinement")["modeSource"] == "config", r
    # The same text in a root-owned file anywhere else: refused for root (a root run could write it).
    other = _write(s.p("outside", "wide.json"), open(cfg).read())
    r = dsh(["--config", other, "--", "true"], s, env=NO_XDG)
    _refused(r, "UNSAFE_STATE", _unsealed_msg("config", other, '"mode": "danger-full-access"', MODE_FIX))
    # No run may have a root inside /etc/dsh-confine.
    sub = os.path.join(os.path.dirname(cfg), "e2e-%s-dir" % os.path.basename(s.base))
    os.mkdir(sub)
    s.sealed.insert(0, sub)
    r = dsh(["--mode", "workspace-write", "--root", sub, "--runner", "landlock", "--", "true"], s, env=NO_XDG)
    _refused(r, "UNSAFE_STATE", "the writable root %s (workspace) lies in /etc/dsh-confine, where the configs "
                                "that decide every later run are kept; choose a root outside it" % sub)


def test_planted_session_log_never_reaches_danger(s):
    """A run appends a sandbox/mode danger-full-access event to a session log inside its root; the next
    --session run (no --mode) wrote outside. Now it is refused, whichever run planted it."""
    _need_runners()
    log = s.p("ws", "session.jsonl")
    outside = s.p("outside", "escaped")
    evil = json.dumps({"type": "sandbox/mode", "seq": 9, "time": 0, "data": {"mode": "danger-full-access"}})
    for runner in RUNNERS:
        for supervise in ([], ["--supervise"]):
            assert dsh(["session", "set-mode", log, "workspace-write"], s, report=False).rc == 0
            # The planting run does not name the log (a harness that passes --session is refused).
            r = sh("echo '%s' >> '%s'" % (evil, log), s, mode="workspace-write", root=s.ws, runner=runner,
                   extra=supervise, env=NO_XDG)
            assert r.rc == 0 and "danger-full-access" in open(log).read(), r
            r = dsh(supervise + ["--session", log, "--", "sh", "-c", "echo x > '%s'" % outside], s, env=NO_XDG)
            _refused(r, "UNSAFE_STATE", _unsealed_msg(
                "session log", log, 'a sandbox/mode event "danger-full-access"',
                "pass --mode danger-full-access (or --escalate) for the call instead"))
            assert not os.path.exists(outside), r
            os.unlink(log)
    # set-mode itself writes the event; only the flag takes the run there.
    assert dsh(["session", "set-mode", log, "danger-full-access"], s, report=False).rc == 0
    r = dsh(["--session", log, "--", "true"], s, env=NO_XDG)
    _refused(r, "UNSAFE_STATE")
    r = dsh(["--session", log, "--mode", "danger-full-access", "--", "touch", outside], s, env=NO_XDG)
    assert r.rc == 0 and os.path.exists(outside), r


def test_programs_run_outside_the_sandbox_are_never_writable_by_a_run(s):
    """The custom runner and bwrap named by a (sealed) config, inside a run's writable root: that
    run could rewrite them for the next one, which runs them unconfined. The run is refused, and
    nothing is rewritten; one writable by others is refused at any run."""
    _need_runners()
    marker = s.p("outside", "rewritten-ran")
    runner = _write(s.p("ws", "runner.sh"), "#!/bin/sh\nwhile [ \"$1\" != -- ]; do shift; done; shift\n"
                                           "exec \"$@\"\n", 0o755)
    stub = _write(s.p("ws", "bwrap"), "#!/bin/sh\nexec /usr/bin/bwrap \"$@\"\n", 0o755)
    rewrite = "printf '#!/bin/sh\\ntouch %s\\n' > '%%s'" % marker
    for key, path, what in ((dict(runnerCommand=[runner], runnerFailureSignatures=["x"]), runner, "custom runner"),
                            (dict(bwrapPath=stub), stub, "bwrap")):
        before = open(path).read()
        cfg = s.sealed_config(key, what.replace(" ", "-"))
        for run in RUNNERS:
            for supervise in ([], ["--supervise"]):
                r = sh(rewrite % path, s, mode="workspace-write", root=s.ws, runner=run,
                       extra=["--config", cfg] + supervise, env=NO_XDG)
                _refused(r, "UNSAFE_STATE", _state_msg(what, path, s.ws, "workspace"))
                assert open(path).read() == before and not os.path.exists(marker), r
        # Outside the roots, but writable by others: refused, never run.
        os.chmod(path, 0o757)
        r = dsh(["--config", cfg, "--runner", "custom" if what == "custom runner" else "bwrap", "--", "true"], s,
                env=NO_XDG)
        assert r.rc == 125 and r.err.count("\n") == 1 and "writable by group or others" in r.err, r
        os.chmod(path, 0o755)
    # bwrap is never looked up on PATH: a `bwrap` a run planted there is not what runs.
    os.makedirs(s.p("ws", "bin"), exist_ok=True)
    _write(s.p("ws", "bin", "bwrap"), "#!/bin/sh\ntouch '%s'\nexit 1\n" % marker, 0o755)
    r = dsh(["--runner", "bwrap", "--", "true"], s, env=dict(NO_XDG, PATH=s.p("ws", "bin") + ":/usr/bin:/bin"))
    assert r.rc == 0 and not os.path.exists(marker), r


def test_approver_in_every_form_is_run_as_checked(s):
    """The approver's check split the text on blanks while /bin/sh ran it: a quoted path with a space,
    ~/..., $VAR/..., `sh approve.sh` from the workspace or `cd DIR && ./approve` passed, and a
    rewritten approver then approved the next --escalate. No shell reads it now: shell syntax is
    refused, and every file it runs is checked (owner, mode, outside the roots)."""
    need_landlock()
    marker = s.p("outside", "approver-ran")
    body = "#!/bin/sh\ntouch '%s'\nexit 0\n" % marker
    spaced = _write(s.p("ws", "my approver", "approve"), body, 0o755)
    plain = _write(s.p("ws", "approve.sh"), body, 0o755)
    _write(s.p("home", "approve"), body, 0o755)
    forms = ["'%s'" % spaced, '"%s"' % spaced, s.p("ws", "my\\ approver", "approve"), "~/approve",
             "$HOME/approve", "${HOME}/approve", "cd %s && ./approve.sh" % s.ws, "%s; true" % plain,
             "X=1 %s" % plain]
    esc = ["--root", s.ws, "--runner", "landlock", "--escalate", "workspace-write", "--justification", "x"]
    for form in forms:
        r = dsh(esc + ["--approver", form, "--", "touch", s.p("ws", "made")], s, cwd=s.ws, env=NO_XDG)
        assert r.rc == 125 and r.err.count("\n") == 1 and "run directly, not by a shell" in r.err, (form, r)
        assert r.rec("error")["code"] == "USAGE" and not os.path.exists(marker), (form, r)
    # Interpreter and script, the script named relative to the cwd (the workspace).
    for form, bad in (("sh approve.sh", plain), ("/bin/sh ./approve.sh", plain), (plain, plain),
                      ("exec %s" % plain, plain)):
        r = dsh(esc + ["--approver", form, "--", "true"], s, cwd=s.ws, env=NO_XDG)
        _refused(r, "UNSAFE_STATE", _state_msg("approver", bad, s.ws, "workspace"))
        assert not os.path.exists(marker), (form, r)
    # The same program outside the roots, named as it runs, is asked and its yes counts.
    good = _write(s.p("outside", "approve"), body, 0o755)
    r = dsh(esc + ["--approver", "/bin/sh %s" % good, "--", "touch", s.p("ws", "made")], s, cwd=s.ws, env=NO_XDG)
    assert r.rc == 0 and os.path.exists(marker) and os.path.exists(s.p("ws", "made")), r


def test_tty_approver_discards_typed_ahead_input_and_escapes_the_justification(s):
    """An answer in the terminal's input before the prompt (typed ahead, or queued by a command that
    shares the terminal) never answers it; C1 controls and bidi overrides are shown escaped."""
    need_landlock()
    from harness import pty_run
    target = s.p("ws", "made")
    prompt = b"Allow once, reject, or cancel? [a/r/c] "
    justification = "fix\u202etxt.exe\u202c the \x9b31m build"
    rc, out = pty_run(["--root", s.ws, "--runner", "landlock", "--approver", "tty", "--escalate", "workspace-write",
                       "--justification", justification, "--", "touch", target], s,
                      typed_ahead=b"a\n", send=b"r\n", when=prompt)
    assert rc == 125 and not os.path.exists(target), out
    assert 'the user rejected escalating this command to "workspace-write"' in out, out
    assert "fix\\u{202e}txt.exe\\u{202c} the \\u{009b}31m build" in out, out
    assert "\u202e" not in out and "\x9b" not in out, out


def test_the_system_config_directory_made_by_a_root_run_stays_readable(s):
    """A root run that may write /etc makes /etc/dsh-confine to protect it: 0755, or every later
    unprivileged run fails reading its config (an attack pass found 0700)."""
    if not is_root():
        skip("only a root run may write /etc")
    need_bwrap()
    d = "/etc/dsh-confine"
    if os.path.exists(d):
        skip("/etc/dsh-confine exists on this host: not touched")
    try:
        r = dsh(["--mode", "workspace-write", "--root", s.ws, "--writable", "/etc", "--runner", "bwrap", "--",
                 "true"], s)
        assert r.rc == 0, r
        own = [e for e in r.rec("confinement")["protectedPaths"] if e["path"] == d]
        assert own and own[0]["enforced"] == "read-only-bind", r
        assert os.stat(d).st_mode & 0o777 == 0o755, oct(os.stat(d).st_mode)
    finally:
        if os.path.isdir(d) and not os.listdir(d):
            os.rmdir(d)


if __name__ == "__main__":
    main()
