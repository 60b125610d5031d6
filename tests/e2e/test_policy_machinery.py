"""Config file, session mode log, escalation with approval, explain and check --write:
each verified from outside (did the file land? did the approver run?)."""
import json
import os
import subprocess

from harness import DSH, dsh, main, need_landlock, pty_run

LL = ["--runner", "landlock"]
WRITE = "echo hi > ws-file"


def write_config(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(obj, f)


def approver(s, status, name="approver"):
    """An approver command that leaves a marker (and the request it read), then exits `status`."""
    marker = s.p("base", name + ".ran")
    script = s.p("base", name + ".sh")
    with open(script, "w") as f:
        f.write("#!/bin/sh\ncat > '%s'\nexit %d\n" % (marker, status))
    os.chmod(script, 0o755)
    return script, marker


# ---- config -------------------------------------------------------------------

def test_config_default_applies(s):
    need_landlock()
    # Found through $HOME/.config (XDG_CONFIG_HOME unset), no flag at all.
    write_config(s.p("home", ".config", "dsh-confine", "config.json"),
                 {"mode": "workspace-write", "workspaceRoot": s.ws, "runner": "landlock"})
    r = dsh(["--", "sh", "-c", WRITE], s, cwd=s.ws, env={"XDG_CONFIG_HOME": None})
    assert r.rc == 0, r
    assert open(s.p("ws", "ws-file")).read() == "hi\n"
    c = r.rec("confinement")
    assert (c["mode"], c["modeSource"], c["rootSource"], c["runner"]) == \
        ("workspace-write", "config", "config", "landlock"), r
    # An explicit --mode beats the config.
    os.unlink(s.p("ws", "ws-file"))
    r = dsh(["--mode", "read-only", "--", "sh", "-c", WRITE], s, cwd=s.ws, env={"XDG_CONFIG_HOME": None})
    assert r.rc != 0 and not os.path.exists(s.p("ws", "ws-file")), r
    assert r.rec("confinement")["modeSource"] == "flag"


def test_config_lookup_flag_and_env(s):
    need_landlock()
    cfg = s.p("base", "c.json")
    write_config(cfg, {"mode": "workspace-write", "workspaceRoot": s.ws})
    r = dsh(["--config", cfg] + LL + ["--", "sh", "-c", WRITE], s, cwd=s.ws)
    assert r.rc == 0 and os.path.exists(s.p("ws", "ws-file")), r
    os.unlink(s.p("ws", "ws-file"))
    r = dsh(LL + ["--", "sh", "-c", WRITE], s, cwd=s.ws, env={"DSH_CONFINE_CONFIG": cfg})
    assert r.rc == 0 and os.path.exists(s.p("ws", "ws-file")), r
    assert r.rec("confinement")["modeSource"] == "config"


def test_config_errors_run_nothing(s):
    cfg = s.p("base", "c.json")
    marker = s.p("outside", "ran")
    cases = [
        ({"mode": "workspace-write", "bogus": 1}, 'unknown key "bogus"'),
        ({"mode": 3}, '"mode" must be a string, not a number'),
        ({"probeTimeoutMs": 0}, "sandbox-local: probeTimeoutMs must be a positive finite number"),
        ({"runnerFailureSignatures": ["x"]}, "sandbox-local: runnerFailureSignatures requires runnerCommand"),
        ({"runnerCommand": ["/bin/true"]},
         "sandbox-local: runnerCommand requires at least one runnerFailureSignatures entry"),
        ({"runnerCommand": ["/bin/true"], "runnerFailureSignatures": ["a\nb"]},
         "sandbox-local: runnerFailureSignatures entries must be non-empty single-line strings"),
    ]
    for obj, text in cases:
        write_config(cfg, obj)
        r = dsh(["--config", cfg, "--mode", "danger-full-access", "--", "touch", marker], s)
        assert r.rc == 125, r
        assert r.err.startswith("dsh-confine: config %s: %s" % (cfg, text)), r
        assert r.err.count("\n") == 1, r
        assert r.rec("error")["code"] == "CONFIG_INVALID", r
        assert not os.path.exists(marker), r
    with open(cfg, "w") as f:
        f.write("{not json")
    r = dsh(["--config", cfg, "--mode", "danger-full-access", "--", "touch", marker], s)
    assert r.rc == 125 and "not valid JSON" in r.err and not os.path.exists(marker), r
    # A config the caller named must exist.
    r = dsh(["--config", s.p("base", "missing.json"), "--mode", "danger-full-access", "--", "touch", marker], s)
    assert r.rc == 125 and not os.path.exists(marker), r


# ---- session ------------------------------------------------------------------

def set_mode(s, log, mode):
    r = dsh(["session", "set-mode", log, mode], s, report=False)
    assert r.rc == 0, r
    return r


def test_session_switch_applies_to_next_call_not_explicit_mode(s):
    need_landlock()
    log = s.p("base", "session.jsonl")
    set_mode(s, log, "workspace-write")
    base = ["--session", log, "--root", s.ws] + LL
    r = dsh(base + ["--", "sh", "-c", WRITE], s, cwd=s.ws)
    assert r.rc == 0 and os.path.exists(s.p("ws", "ws-file")), r
    assert r.rec("confinement")["modeSource"] == "session"
    os.unlink(s.p("ws", "ws-file"))
    # An explicit --mode wins over the session.
    r = dsh(base + ["--mode", "read-only", "--", "sh", "-c", WRITE], s, cwd=s.ws)
    assert r.rc != 0 and not os.path.exists(s.p("ws", "ws-file")), r
    assert r.rec("confinement")["modeSource"] == "flag"
    # Switching back applies to the next call.
    set_mode(s, log, "read-only")
    r = dsh(base + ["--", "sh", "-c", WRITE], s, cwd=s.ws)
    assert r.rc != 0 and not os.path.exists(s.p("ws", "ws-file")), r
    c = r.rec("confinement")
    assert (c["mode"], c["modeSource"]) == ("read-only", "session"), r
    lines = [json.loads(l) for l in open(log)]
    assert [l["data"]["mode"] for l in lines] == ["workspace-write", "read-only"]
    assert [l["seq"] for l in lines] == [1, 2]
    assert all(l["type"] == "sandbox/mode" and isinstance(l["time"], int) for l in lines)


def test_session_header_cwd_is_the_root(s):
    # The seed: "The workspace-write root is the session's immutable cwd; a
    # configured root is the fallback for agentless calls." Checked from
    # outside: the write lands in the session's cwd, not in the process cwd
    # (base, which is also the config's root here) nor anywhere else.
    need_landlock()
    log = s.p("base", "session.jsonl")
    cfg = s.p("base", "config.json")
    write_config(cfg, {"workspaceRoot": s.outside})
    with open(log, "w") as f:
        f.write(json.dumps({"type": "session", "id": "e2e", "cwd": s.ws}) + "\n")
    set_mode(s, log, "workspace-write")
    script = "touch %s/in-session; touch %s/in-config" % (s.ws, s.outside)
    r = dsh(["--session", log, "--config", cfg] + LL + ["--", "sh", "-c", script], s, cwd=s.base)
    assert r.rc != 0, r
    assert os.path.exists(s.p("ws", "in-session")) and not os.path.exists(s.p("outside", "in-config")), r
    c = r.rec("confinement")
    assert (c["workspaceRoot"], c["rootSource"], c["modeSource"]) == (s.ws, "session", "session"), r
    # --root still beats the session.
    r = dsh(["--session", log, "--config", cfg, "--root", s.outside] + LL + ["--", "sh", "-c", script], s,
            cwd=s.base)
    assert r.rc == 0 and os.path.exists(s.p("outside", "in-config")), r
    assert r.rec("confinement")["rootSource"] == "flag", r
    # The cwd is immutable: a second header naming another directory runs nothing.
    with open(log, "a") as f:
        f.write(json.dumps({"type": "session", "cwd": s.outside}) + "\n")
    os.unlink(s.p("ws", "in-session"))
    r = dsh(["--session", log, "--config", cfg] + LL + ["--", "sh", "-c", script], s, cwd=s.base)
    assert r.rc == 125 and not os.path.exists(s.p("ws", "in-session")), r
    assert r.err == ("dsh-confine: session log %s line 3: session header changes the session's cwd from \"%s\" "
                     "(line 1); a session's cwd is immutable: start a new log\n" % (log, s.ws)), r


def test_session_concurrent_appends(s):
    log = s.p("base", "session.jsonl")
    modes = ["read-only", "workspace-write", "danger-full-access"]
    procs = [subprocess.Popen([DSH, "session", "set-mode", log, modes[i % 3]], env=s.env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for i in range(50)]
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
    data = open(log, "rb").read()
    assert data.endswith(b"\n")
    lines = data.decode().split("\n")[:-1]
    assert len(lines) == 50, data[:2000]
    events = [json.loads(l) for l in lines]  # every line well-formed
    assert all(e["type"] == "sandbox/mode" and e["data"]["mode"] in modes for e in events)
    assert sorted(e["seq"] for e in events) == list(range(1, 51))
    assert [e["data"]["mode"] for e in events].count("workspace-write") == 17


def test_session_bad_log_is_an_error(s):
    log = s.p("base", "session.jsonl")
    marker = s.p("outside", "ran")
    with open(log, "w") as f:
        f.write('{"type":"sandbox/mode","seq":1,"time":1,"data":{"mode":"danger-full-access"}}\n')
        f.write('{"type":"sandbox/mode","seq":2,"time":2,"data":{"mode":"all-access"}}\n')
    r = dsh(["--session", log, "--", "touch", marker], s)
    assert r.rc == 125, r
    assert r.err == 'dsh-confine: session log %s line 2: sandbox/mode carries unknown mode "all-access"\n' % log, r
    assert r.rec("error")["code"] == "SESSION_INVALID"
    assert not os.path.exists(marker)
    with open(log, "w") as f:
        f.write('{"type":"sandbox/mode","seq":1,"time":1,"data":{"mode":"danger-full-access"}}\n')
        f.write('{"type":"sandbox/mode","seq":2,"ti\n')
    r = dsh(["--session", log, "--", "touch", marker], s)
    assert r.rc == 125 and r.err.startswith("dsh-confine: session log %s line 2: not valid JSON" % log), r
    assert not os.path.exists(marker)
    # set-mode refuses an unknown mode and leaves the log alone.
    before = open(log).read()
    r = dsh(["session", "set-mode", log, "everything"], s, report=False)
    assert r.rc == 125 and r.err == 'dsh-confine: sandbox/mode carries unknown mode "everything"\n', r
    assert open(log).read() == before


def test_session_set_mode_after_the_largest_seq_is_refused_not_wrapped(s):
    # A log whose last seq is 2**64-1 has no next seq: appending "seq":0 would
    # make the new mode read as the oldest event (issue 38).
    log = s.p("base", "session.jsonl")
    top = 2 ** 64 - 1
    with open(log, "w") as f:
        f.write('{"type":"sandbox/mode","seq":%d,"time":1,"data":{"mode":"read-only"}}\n' % top)
    before = open(log).read()
    r = dsh(["session", "set-mode", log, "workspace-write"], s, report=False)
    assert r.rc == 125, r
    assert r.err == ("dsh-confine: session log %s: its last seq is 18446744073709551615, the largest there is, so "
                     "no event can follow it; start a new session log\n" % log), r
    assert open(log).read() == before
    # One below the top still takes the top itself.
    with open(log, "w") as f:
        f.write('{"type":"sandbox/mode","seq":%d,"time":1,"data":{"mode":"read-only"}}\n' % (top - 1))
    r = dsh(["session", "set-mode", log, "workspace-write"], s, report=False)
    assert r.rc == 0, r
    assert [json.loads(l)["seq"] for l in open(log)] == [top - 1, top]


# ---- escalation ---------------------------------------------------------------

def escalate(s, target, extra=(), mode=None, script=WRITE):
    args = ["--root", s.ws] + LL
    if mode:
        args += ["--mode", mode]
    args += ["--escalate", target, "--justification", "the test writes a file"] + list(extra)
    return dsh(args + ["--", "sh", "-c", script], s, cwd=s.ws)


def test_escalation_allowed_once_lets_the_write_land(s):
    need_landlock()
    cmd, marker = approver(s, 0)
    r = escalate(s, "workspace-write", ["--approver", cmd])
    assert r.rc == 0, r
    assert open(s.p("ws", "ws-file")).read() == "hi\n"
    c = r.rec("confinement")
    assert (c["mode"], c["modeSource"]) == ("workspace-write", "escalation"), r
    req = json.loads(open(marker).read())
    assert req["mode"] == "workspace-write" and req["currentMode"] == "read-only"
    assert req["justification"] == "the test writes a file" and req["subject"] == "command"
    assert req["argv"] == ["sh", "-c", WRITE] and req["root"] == os.path.realpath(s.ws)
    # This call only: the next one is read-only again.
    os.unlink(s.p("ws", "ws-file"))
    r = dsh(["--root", s.ws] + LL + ["--", "sh", "-c", WRITE], s, cwd=s.ws)
    assert r.rc != 0 and not os.path.exists(s.p("ws", "ws-file")), r


def test_granted_escalation_still_fails_closed_and_danger_never_touches_a_runner(s):
    # The seed: an approved mode is confined like any other; approval is not a
    # way around fail-closed. A granted workspace-write with no usable runner
    # (Landlock's system calls answer ENOSYS) runs nothing and is
    # SANDBOX_UNAVAILABLE; a granted danger-full-access never asks a runner,
    # so the same missing Landlock (and a bwrap that does not exist) cannot stop it.
    from harness import tool
    cmd, marker = approver(s, 0)
    nolandlock = [tool("sysfault"), "ENOSYS", "444,445,446", "--"]
    args = ["--root", s.ws, "--runner", "landlock", "--escalate", "workspace-write", "--justification",
            "the test writes a file", "--approver", cmd, "--", "sh", "-c", WRITE]
    r = dsh(args, s, cwd=s.ws, pre=nolandlock)
    assert os.path.exists(marker), r  # it was asked, and allowed
    assert r.rc == 125 and not os.path.exists(s.p("ws", "ws-file")), r
    # A forced runner that cannot run says so in its own words (the seed's no-backend text is for
    # no backend at all); the record keeps the runner's failure.
    assert r.err == ("dsh-confine: --runner landlock: Landlock is not available: the kernel has no landlock system "
                     "calls (ENOSYS); use --runner bwrap or auto (which picks a runner that can)\n"), r
    assert r.rec("error")["code"] == "SANDBOX_UNAVAILABLE" and r.rec("confinement") is None, r
    os.unlink(marker)
    cfg = s.p("base", "config.json")
    write_config(cfg, {"runner": "landlock"})
    args = ["--config", cfg, "--root", s.ws, "--escalate", "danger-full-access", "--justification",
            "the test writes a file", "--approver", cmd, "--", "sh", "-c", "echo hi > %s" % s.p("outside", "o")]
    r = dsh(args, s, cwd=s.ws, pre=nolandlock)
    assert os.path.exists(marker) and r.rc == 0, r
    assert open(s.p("outside", "o")).read() == "hi\n", r
    c = r.rec("confinement")
    assert (c["mode"], c["modeSource"], c["runner"], c["enforcement"]) == (
        "danger-full-access", "escalation", "none", "none"), r

def test_escalation_refusals_write_nothing(s):
    cases = [
        (1, "ESCALATION_REJECTED", 'the user rejected escalating this command to "workspace-write"'),
        (2, "ESCALATION_CANCELLED", 'approval for escalating to "workspace-write" was cancelled'),
        # An approver that ran and failed is said to have failed, with its status: not "no channel".
        (5, "ESCALATION_UNAVAILABLE",
         'sandbox escalation to "workspace-write" requires approval, but the approver failed: it exited with '
         'status 5 (0 allows once, 1 rejects, 2 cancels)'),
        (137, "ESCALATION_UNAVAILABLE",
         'sandbox escalation to "workspace-write" requires approval, but the approver failed: it was killed by '
         'signal 9 (SIGKILL)'),
    ]
    for status, code, text in cases:
        cmd, marker = approver(s, status, "a%d" % status)
        if status == 137:  # killed, not exited: the approver process itself (run directly, no shell)
            with open(cmd) as f:
                body = f.read().replace("exit 137", "kill -9 $$")
            with open(cmd, "w") as f:
                f.write(body)
        r = escalate(s, "workspace-write", ["--approver", cmd])
        assert r.rc == 125, r
        assert r.err == "dsh-confine: %s\n" % text, r
        assert r.rec("error")["code"] == code and r.rec("error")["message"] == text, r
        assert r.rec("confinement") is None
        assert os.path.exists(marker), "the approver was asked"
        assert not os.path.exists(s.p("ws", "ws-file")), r
    # An approver that does not exist: nothing is run (no shell), and the one line says why.
    missing = s.p("base", "no-such-approver")
    r = escalate(s, "workspace-write", ["--approver", missing])
    assert r.rc == 125, r
    assert r.err == ('dsh-confine: sandbox escalation to "workspace-write" requires approval, but the approver '
                     'failed: approver %s: cannot open: No such file or directory\n' % missing), r
    # No approver composed.
    r = escalate(s, "workspace-write")
    assert r.rc == 125, r
    no_service = 'sandbox escalation to "workspace-write" requires approval, but no approval service is composed'
    # The record keeps the contract's text; stderr says it in our words (no "approval service").
    assert r.err == 'dsh-confine: escalating to "workspace-write" needs someone to approve it, and none is set: ' \
                    'give --approver tty (asks on the terminal) or --approver COMMAND, or "approver" in the ' \
                    'config\n', r
    assert r.rec("error")["code"] == "ESCALATION_NO_APPROVER" and r.rec("error")["message"] == no_service, r
    assert not os.path.exists(s.p("ws", "ws-file"))
    # tty with no terminal (stdin is /dev/null, no controlling terminal in a new session).
    r = dsh(["--root", s.ws, "--escalate", "workspace-write", "--justification", "x", "--approver", "tty",
             "--", "sh", "-c", WRITE], s, cwd=s.ws, pre=["setsid", "-w"])
    no_channel = 'sandbox escalation to "workspace-write" requires approval, but no approval channel is available'
    assert r.rc == 125 and r.rec("error")["message"] == no_channel, r
    assert r.err == "dsh-confine: %s; --approver tty needs a terminal and /dev/tty cannot be opened (No such device " \
                    "or address); run from a terminal or give --approver COMMAND\n" % no_channel, r
    assert not os.path.exists(s.p("ws", "ws-file"))


PROMPT = "Allow once, reject, or cancel? [a/r/c] "


def tty_escalate(s, typed, approver=("--approver", "tty")):
    """An escalation answered at a real terminal: dsh-confine leads a new pty
    session, so /dev/tty is that pty, and `typed` is what the person types."""
    target = s.p("ws", "ws-file")
    rc, out = pty_run(["--root", s.ws] + LL + list(approver) +
                      ["--escalate", "workspace-write", "--justification", "the test writes a file",
                       "--", "sh", "-c", "echo hi > '%s'" % target], s, send=typed, when=PROMPT.encode())
    out = out.replace("\r\n", "\n")
    assert "dsh-confine: escalate sandbox to workspace-write: the test writes a file\n" in out, out
    assert "  current mode: read-only\n" in out, out
    return rc, out, target


def test_escalation_tty_answers(s):
    need_landlock()
    # "a": allowed once, and the write lands.
    rc, out, target = tty_escalate(s, b"a\n")
    assert rc == 0, out
    assert out.count(PROMPT) == 1, out
    assert open(target).read() == "hi\n", out
    os.unlink(target)
    # The same through the config file's "approver" key, answered "Yes".
    conf = s.p("base", "tty-config.json")
    write_config(conf, {"approver": "tty"})
    rc, out, target = tty_escalate(s, b"  Yes\n", approver=("--config", conf))
    assert rc == 0 and open(target).read() == "hi\n", out
    os.unlink(target)
    # "r": rejected, the seed's text, nothing written.
    rc, out, target = tty_escalate(s, b"r\n")
    assert rc == 125, out
    assert out.count(PROMPT) == 1, out
    assert 'dsh-confine: the user rejected escalating this command to "workspace-write"\n' in out, out
    assert not os.path.exists(target), out
    cancelled = 'dsh-confine: approval for escalating to "workspace-write" was cancelled\n'
    # Three unclear answers cancel; a fourth line (an "a") is never read as an answer.
    rc, out, target = tty_escalate(s, b"what\nallow twice\n\x1b[A\na\n")
    assert rc == 125, out
    assert out.count(PROMPT) == 3, out
    assert cancelled in out, out
    assert not os.path.exists(target), out
    # Ctrl-D (EOF at the prompt) cancels.
    rc, out, target = tty_escalate(s, b"\x04")
    assert rc == 125, out
    assert out.count(PROMPT) == 1, out
    assert cancelled in out, out
    assert not os.path.exists(target), out


def test_escalation_same_or_narrower_never_asks(s):
    for mode, target in [("read-only", "read-only"), ("workspace-write", "workspace-write"),
                         ("workspace-write", "read-only"), ("danger-full-access", "workspace-write"),
                         ("danger-full-access", "danger-full-access")]:
        cmd, marker = approver(s, 0, "m-%s-%s" % (mode, target))
        r = escalate(s, target, ["--approver", cmd], mode=mode, script="touch ws-file")
        assert r.rc == 125, r
        text = 'sandbox escalation to "%s" is not strictly wider than this call\'s current "%s" mode' % (target, mode)
        # The report: the harness contract's text; stderr: also how to spell it here.
        assert r.err == 'dsh-confine: %s; --escalate takes a mode wider than the call\'s "%s" ' \
                        '(read-only < workspace-write < danger-full-access)\n' % (text, mode), r
        assert r.rec("error")["code"] == "ESCALATION_NOT_WIDER" and r.rec("error")["message"] == text, r
        assert not os.path.exists(marker), "the approver ran for %s -> %s" % (mode, target)
        assert not os.path.exists(s.p("ws", "ws-file"))


def test_escalation_argument_texts(s):
    cmd, marker = approver(s, 0)
    base = ["--root", s.ws, "--approver", cmd]
    for extra, text, spelling in [
        (["--escalate", "workspace-write"], "invalid escalation: sandbox_permissions requires a justification",
         "--escalate needs --justification TEXT, saying in words why the wider mode is needed"),
        (["--justification", "why"],
         "invalid escalation: justification is only valid together with sandbox_permissions",
         "--justification goes with --escalate MODE or --escalate-net NET: add one, or drop --justification"),
        (["--escalate", "workspace-write", "--justification", "  "],
         "invalid justification: expected a non-empty sentence",
         "--justification is blank: say in words why the wider mode is needed"),
    ]:
        r = dsh(base + extra + ["--", "touch", s.p("ws", "f")], s)
        # The report keeps the exact text harnesses match; stderr says it in the command line's words.
        assert r.rc == 125 and r.err == "dsh-confine: %s\n" % spelling, r
        assert "sandbox_permissions" not in r.err, r
        assert r.rec("error")["code"] == "ESCALATION_INVALID" and r.rec("error")["message"] == text, r
        assert not os.path.exists(marker) and not os.path.exists(s.p("ws", "f"))


# ---- explain / check ----------------------------------------------------------

def test_explain_and_dry_run_run_nothing(s):
    need_landlock()
    target = s.p("ws", "made")
    for args in (["explain"], ["--dry-run"], ["explain", "--json"]):
        r = dsh(args + ["--mode", "workspace-write", "--root", s.ws] + LL + ["--", "touch", target], s)
        assert r.rc == 0, r
        assert not os.path.exists(target), args
        assert r.rec("confinement") is None, "explain writes no confinement record"
        if "--json" in args:
            plan = json.loads(r.out)
            assert plan["type"] == "plan"
            assert plan["confinement"]["mode"] == "workspace-write"
            assert plan["confinement"]["argv"] == ["touch", target]
            assert plan["sources"]["mode"] == "flag"
            paths = [x["path"] for x in plan["landlock"]["rules"]]
            assert os.path.realpath(s.ws) in paths and "/dev/null" in paths
        else:
            assert '["touch","%s"]' % target in r.out, r
            assert "(nothing was run)" in r.out
    # A pending escalation is validated and shown, and nobody is asked.
    cmd, marker = approver(s, 0)
    r = dsh(["explain", "--root", s.ws, "--escalate", "workspace-write", "--justification", "x",
             "--approver", cmd, "--", "touch", target], s)
    assert r.rc == 0 and "pending" in r.out, r
    assert not os.path.exists(marker) and not os.path.exists(target)


def test_explain_context_texts(s):
    ro = dsh(["explain", "--context", "--mode", "read-only"], s, report=False)
    assert ro.out == ("Current DSH file policy: read-only. Any available operation enforced by the DSH file sandbox "
                      "cannot modify files in the standing mode. Do not refuse a required modification from this "
                      "policy alone: try an available tool normally and follow any denial and escalation guidance "
                      "it returns.\n"), ro
    ww = dsh(["explain", "--context", "--mode", "workspace-write", "--root", s.ws], s, report=False)
    assert ww.out == ("Current DSH file policy: workspace-write. Any available operation enforced by the DSH file "
                      "sandbox may modify files under the session workspace: %s. Some platform temporary areas "
                      "may also be writable.\n" % json.dumps(os.path.realpath(s.ws))), ww
    da = dsh(["explain", "--context", "--mode", "danger-full-access"], s, report=False)
    assert da.out == ("Current DSH file policy: danger-full-access. The DSH file sandbox does not restrict file "
                      "modifications by available operations.\n"), da


def actually_writable(s, mode, path):
    """Does a write to `path` succeed under the Landlock runner? Judged from outside."""
    existed = os.path.lexists(path) and not os.path.islink(path)
    r = dsh(["--mode", mode, "--root", s.ws] + LL + ["--", "sh", "-c", 'printf x >> "$1"', "sh", path], s,
            cwd=s.ws)
    if path == "/dev/null":
        return r.rc == 0
    real = os.path.realpath(path)
    landed = os.path.exists(real) and open(real).read().endswith("x")
    assert (r.rc == 0) == landed, (path, r)
    if landed and not existed:
        os.unlink(real)
    return landed


def test_check_write_says_whether_a_tmp_write_persists(s):
    base = ["check", "--write", "/tmp/x", "--mode", "workspace-write", "--root", s.ws]
    r = dsh(base, s, report=False)
    assert (r.rc, r.out) == (0, 'yes: "/tmp/x" is under "/tmp" (tmp) in workspace-write\n'), r
    r = dsh(base + ["--private-tmp"], s, report=False)
    assert (r.rc, r.out) == (0, 'yes: "/tmp/x" is under "/tmp" (tmp) in workspace-write; the write is discarded '
                                'when the command exits (private /tmp)\n'), r
    for extra, persists in (([], True), (["--private-tmp"], False)):
        j = json.loads(dsh(base + extra + ["--json"], s, report=False).out)
        assert (j["write"], j["persists"], j["privateTmp"]) == (True, persists, not persists), j
        assert {w["path"]: w["persists"] for w in j["writableRoots"]}["/tmp"] is persists, j
    # $TMPDIR under a private /tmp is the host's: the innermost root answers.
    td = "/tmp/dsh-e2e-pm-td-%d" % os.getpid()
    os.mkdir(td)
    try:
        j = json.loads(dsh(base[:2] + [td + "/f"] + base[3:] + ["--private-tmp", "--json"], s, report=False,
                           env={"TMPDIR": td}).out)
        assert (j["matched"], j["persists"]) == ({"path": td, "source": "tmpdir"}, True), j
    finally:
        os.rmdir(td)
    j = json.loads(dsh(["check", "--write", "/tmp/x", "--private-tmp", "--json"], s, report=False).out)
    assert (j["write"], j["persists"], j["privateTmp"]) == (False, None, True), j


def test_private_tmp_where_no_runner_can_give_it_and_in_danger_full_access(s):
    need_landlock()
    target = s.p("ws", "f")
    r = dsh(["--mode", "workspace-write", "--root", s.ws, "--private-tmp"] + LL + ["--", "touch", target], s)
    why = ("landlock cannot give the command a private /tmp (--private-tmp): it restricts access to the host's "
           "files and mounts nothing; use --runner bwrap (or auto), or drop --private-tmp")
    assert r.rc == 125 and r.err == "dsh-confine: --runner landlock: %s\n" % why, r
    assert r.rec("error")["code"] == "SANDBOX_UNAVAILABLE" and r.rec("error")["runnerFailure"] == why, r
    assert not os.path.exists(target)
    # The config's key asks the same.
    conf = s.p("base", "pt.json")
    write_config(conf, {"privateTmp": True, "runner": "landlock"})
    r = dsh(["--config", conf, "--mode", "workspace-write", "--root", s.ws, "--", "touch", target], s)
    assert r.rc == 125 and r.rec("error")["runnerFailure"] == why and not os.path.exists(target), r
    # ... but not in danger-full-access, where nothing is confined; the flag there is a usage error.
    r = dsh(["--config", conf, "--mode", "danger-full-access", "--", "touch", target], s)
    assert r.rc == 0 and os.path.exists(target), r
    os.unlink(target)
    r = dsh(["--mode", "danger-full-access", "--private-tmp", "--", "touch", target], s)
    assert r.rc == 125 and r.err == ("dsh-confine: --private-tmp needs a confined mode (read-only or workspace-write): "
                                     "danger-full-access runs the command on the host's /tmp; drop one of the two\n"), r
    assert r.rec("error")["code"] == "USAGE" and not os.path.exists(target), r
    write_config(conf, {"privateTmp": "yes"})
    r = dsh(["--config", conf, "--", "true"], s)
    assert r.rc == 125 and r.err == 'dsh-confine: config %s: "privateTmp" must be true or false, not a string\n' % conf, r


def test_check_write_agrees_with_the_runner(s):
    need_landlock()
    os.symlink(s.outside, s.p("ws", "to-outside"))
    os.symlink(s.ws, s.p("outside", "to-ws"))
    os.symlink(s.p("outside", "new-target"), s.p("ws", "dangling"))
    os.mkdir(s.p("ws", "sub"))
    tag = "dsh-e2e-check-%d" % os.getpid()
    paths = [
        s.p("ws", "inside"),
        s.p("ws", "sub", "deeper"),
        s.p("outside", "out"),
        s.p("ws", "to-outside", "via-link"),
        s.p("outside", "to-ws", "via-link-in"),
        s.p("ws", "dangling"),
        s.p("ws", "..", "outside", "dotdot"),
        s.p("ws", "sub", "..", "dotdot-in"),
        "/tmp/" + tag,
        s.p("tmpdir", "t"),
        "/dev/null",
        s.p("home", "h"),
    ]
    for mode in ("workspace-write", "read-only"):
        for p in paths:
            c = dsh(["check", "--write", p, "--json", "--mode", mode, "--root", s.ws], s, cwd=s.ws, report=False)
            assert c.rc in (0, 1), c
            answer = json.loads(c.out)
            assert answer["write"] == (c.rc == 0), c
            actual = actually_writable(s, mode, p)
            assert answer["write"] == actual, "check says %s, the runner %s: %s under %s" % (
                answer["write"], actual, p, mode)
    for p in ("/tmp/" + tag,):
        if os.path.exists(p):
            os.unlink(p)


if __name__ == "__main__":
    main()
