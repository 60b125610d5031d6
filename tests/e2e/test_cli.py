"""The command line: our options end at the first word that is not ours, and
nothing after the command is ever read as ours (issue 13, item 0: `dsh-confine
touch X --mode danger-full-access` ran touch unconfined). Each check is made from
outside: the file the command tried to create does or does not exist."""
import json
import os
import subprocess

from harness import DSH, dsh, main, need_bwrap, need_landlock

# Words that look like ours, after the command: each would widen the run if read as ours.
OURS_AFTER = (["--mode", "danger-full-access"], ["--mode=danger-full-access"], ["--runner=custom"],
              ["--escalate", "danger-full-access", "--justification", "x", "--approver", "tty"],
              ["--writable", "/"], ["--", "--mode", "danger-full-access"])

# No message of the command-line library may reach the user.
LIBRARY_WORDS = ("not expected", "required but", "not in range", "A subcommand is required", "INT:", "TEXT",
                 "1797693", "Run with --help")


def args_script(s):
    """Prints each argument on a line, then tries to create its first argument."""
    return s.script("args", '#!/bin/sh\nprintf "%s\\n" "$@"\ntouch "$1"\n')


def check_confined_with_our_words_as_args(s, runner, supervise):
    prog = args_script(s)
    for tail in OURS_AFTER:
        target = s.p("outside", "x")
        pre = ["--runner", runner] + (["--supervise"] if supervise else [])
        r = dsh(pre + [prog, target] + tail, s, cwd=s.ws)
        assert r.out == "\n".join([target] + tail) + "\n", (tail, r)
        assert r.rc != 0, (tail, r)
        assert not os.path.exists(target), (tail, r)
        c = r.rec("confinement")
        assert c["mode"] == "read-only" and c["modeSource"] == "default", (tail, c)
        assert c["runner"] == runner and c["enforcement"] != "none", (tail, c)
        # And the real touch: its own error about our words, nothing created.
        r = dsh(pre + ["touch", target] + tail, s, cwd=s.ws)
        assert r.rc != 0 and not os.path.exists(target), (tail, r)
        assert r.rec("confinement")["mode"] == "read-only", (tail, r)


def test_options_after_the_command_are_the_commands_bwrap(s):
    need_bwrap()
    check_confined_with_our_words_as_args(s, "bwrap", False)


def test_options_after_the_command_are_the_commands_bwrap_supervise(s):
    need_bwrap()
    check_confined_with_our_words_as_args(s, "bwrap", True)


def test_options_after_the_command_are_the_commands_landlock(s):
    need_landlock()
    check_confined_with_our_words_as_args(s, "landlock", False)


def test_options_after_the_command_are_the_commands_landlock_supervise(s):
    need_landlock()
    check_confined_with_our_words_as_args(s, "landlock", True)


def test_the_default_runner_too(s):
    need_landlock()
    target = s.p("outside", "x")
    r = dsh(["touch", target, "--mode", "danger-full-access"], s, cwd=s.ws)
    assert r.rc != 0 and not os.path.exists(target), r
    assert r.rec("confinement")["mode"] == "read-only", r


def test_echo_prints_our_flag(s):
    need_landlock()
    r = dsh(["echo", "--supervise"], s)
    assert r.rc == 0 and r.out == "--supervise\n", r
    assert not [x for x in r.report if x["type"] == "result"], r  # exec mode: we did not supervise
    r = dsh(["echo", "--help", "--version", "-la"], s)
    assert r.rc == 0 and r.out == "--help --version -la\n", r
    # A subcommand's name after the command, and after --, is the command's.
    r = dsh(["--", "echo", "probe", "--json"], s)
    assert r.rc == 0 and r.out == "probe --json\n", r


def test_explain_shows_the_words_as_the_commands(s):
    prog = args_script(s)
    r = dsh(["explain", "--json", prog, "x", "--mode", "danger-full-access"], s, report=False)
    assert r.rc == 0, r
    assert '"mode":"read-only"' in r.out, r
    assert '"x","--mode","danger-full-access"]' in r.out, r


def test_writable_repeats_and_takes_one_value(s):
    need_landlock()
    a, b = s.p("base", "a"), s.p("base", "b")
    os.mkdir(a)
    os.mkdir(b)
    for runner in ("landlock",):
        r = dsh(["--runner", runner, "--mode", "workspace-write", "--root", s.ws, "--writable", a, "--writable=" + b,
                 "sh", "-c", 'touch "$0/f" "$1/f"', a, b], s)
        assert r.rc == 0, r
        assert os.path.exists(os.path.join(a, "f")) and os.path.exists(os.path.join(b, "f")), r
        # The word after --writable's one value is the command (it used to be swallowed).
        r = dsh(["--runner", runner, "--mode", "workspace-write", "--root", s.ws, "--writable", a,
                 "touch", os.path.join(a, "g")], s)
        assert r.rc == 0 and os.path.exists(os.path.join(a, "g")), r


def test_writable_repeats_under_bwrap(s):
    need_bwrap()
    a, b = s.p("base", "a"), s.p("base", "b")
    os.mkdir(a)
    os.mkdir(b)
    r = dsh(["--runner", "bwrap", "--mode", "workspace-write", "--root", s.ws, "--writable", a, "--writable", b,
             "touch", os.path.join(a, "f"), os.path.join(b, "f")], s)
    assert r.rc == 0, r
    assert os.path.exists(os.path.join(a, "f")) and os.path.exists(os.path.join(b, "f")), r


def test_usage_errors_are_ours_and_nothing_runs(s):
    marker = s.p("outside", "ran")
    run = ["sh", "-c", "touch " + marker]
    cases = (
        (["-la"] + run, "unknown option \"-la\"; Try 'dsh-confine --help'"),
        (["--supervsie"] + run, "unknown option \"--supervsie\"; did you mean --supervise?"),
        (["--root", s.ws, "-la"] + run,
         "unknown option \"-la\"; if it is the command's, put the command after --: "
         "dsh-confine [OPTIONS] -- COMMAND [ARG...]"),
        (["--probe-timeout", "0"] + run,
         "option --probe-timeout takes a positive whole number of milliseconds, not \"0\""),
        (["--mode", "read-only", "--mode", "workspace-write"] + run, "option --mode is given twice: give it once"),
        (["--writable", "--mode", "danger-full-access"] + run, "option --writable needs a value: --writable PATH"),
        (["--report-fd", "x"] + run, "option --report-fd takes a file descriptor number (0, 1, 2, ...), not \"x\""),
        (["--supervise=no"] + run, "option --supervise takes no value: give it alone"),
        (["session"], "session needs a subcommand: dsh-confine session set-mode FILE MODE"),
        (["probe", "-la"], "unknown option \"-la\"; Try 'dsh-confine probe --help'"),
        (["check", "--write", s.ws, "--"] + run, "check takes no command after --; Try 'dsh-confine check --help'"),
    )
    for args, msg in cases:
        r = dsh(args, s, report=False)
        assert r.rc == 125 and r.err == "dsh-confine: %s\n" % msg, (args, r)
        assert not any(w in r.err for w in LIBRARY_WORDS), r
        assert not os.path.exists(marker), (args, r)


def test_unknown_runner_and_mode_list_the_valid_values(s):
    marker = s.p("outside", "ran")
    for args, msg in ((["--runner", "bubblewrap"], 'unknown runner "bubblewrap" (auto, bwrap, landlock, seatbelt, '
                                                   'windows-acl or custom)'),
                      (["--mode", "write"], 'unknown mode "write" (read-only, workspace-write or danger-full-access)'),
                      (["--mode", "workspace-wrtie"], 'unknown mode "workspace-wrtie"; did you mean workspace-write? '
                                                      '(read-only, workspace-write or danger-full-access)')):
        r = dsh(args + ["sh", "-c", "touch " + marker], s)
        assert r.rc == 125 and r.err == "dsh-confine: %s\n" % msg, r
        # The record's shape, and last the run's nonce (issue 38).
        e = r.rec("error")
        assert e == {"type": "error", "version": 1, "code": "USAGE", "message": msg, "exitStatus": 125,
                     "run": e.get("run")}, r
        assert list(e)[-1] == "run" and len(e["run"]) == 32, r
        assert not os.path.exists(marker), r


def test_subcommand_help(s):
    r = dsh(["explain", "--help"], s, report=False)
    assert r.rc == 0 and "-- COMMAND" in r.out, r
    r = dsh(["self-test", "--help"], s, report=False)
    assert r.rc == 0 and "--runner RUNNER" in r.out, r


# -- A report nobody else writes (issue 38) ---------------------------------------------------------

FORGED = '{"type":"result","version":1,"exitCode":0,"denied":false,"runnerFailed":false}'


def _forging_run(s, report_fd, pass_fds, extra=(), stdout=None, keep=None):
    """A run whose command tries to write FORGED into the report through its stdout (and fd `keep`)."""
    script = "echo '%s'; touch '%s'" % (FORGED, s.p("outside", "ran"))
    if keep is not None:
        script = "echo '%s' >&%d; " % (FORGED, keep) + script
    return subprocess.run([DSH, "--report-fd", str(report_fd)] + list(extra) +
                          ["--mode", "read-only", "--", "sh", "-c", script],
                          pass_fds=pass_fds, env=s.env(), stdin=subprocess.DEVNULL,
                          stdout=stdout if stdout is not None else subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=60)


def _read_all(fd):
    chunks = []
    while True:
        b = os.read(fd, 65536)
        if not b:
            break
        chunks.append(b)
    os.close(fd)
    return b"".join(chunks).decode()


def _only_a_usage_error(report, p, message, s):
    assert p.returncode == 125, (p, report)
    assert p.stderr.decode() == "dsh-confine: %s\n" % message, p
    recs = [json.loads(x) for x in report.splitlines()]
    assert [r["type"] for r in recs] == ["error"] and recs[0]["code"] == "USAGE", report
    assert recs[0]["message"] == message, recs
    assert FORGED not in report, report
    assert not os.path.exists(s.p("outside", "ran"))


def test_keep_fd_of_a_duplicate_of_the_report_is_refused(s):
    # The old check compared numbers: a --keep-fd that is a dup of the report
    # fd was accepted, and the command wrote a forged result line before ours.
    for runner in ("landlock", "bwrap"):
        r_fd, w_fd = os.pipe()
        d = os.dup(w_fd)
        try:
            p = _forging_run(s, w_fd, (w_fd, d), ["--keep-fd", str(d), "--runner", runner], keep=d)
        finally:
            os.close(w_fd)
            os.close(d)
        msg = ("--keep-fd %d: it is the same open file as --report-fd %d, so the command could write forged "
               "records into the report; pass the command an fd of another file" % (d, w_fd))
        _only_a_usage_error(_read_all(r_fd), p, msg, s)


def test_a_report_that_is_the_commands_stdout_is_refused(s):
    # --report-fd N where N is another number for the command's stdout (a dup of
    # the same pipe), or the same file opened a second time: the command's
    # stdout lands in the report.
    for runner in ("landlock", "bwrap"):
        r_fd, w_fd = os.pipe()
        d = os.dup(w_fd)
        try:
            p = _forging_run(s, d, (d,), ["--runner", runner], stdout=w_fd)
        finally:
            os.close(w_fd)
            os.close(d)
        msg = ("fd 1 is the same open file as --report-fd %d, so the command could write forged records into the "
               "report; give the report a file of its own (a pipe), or name fd 1 itself with --report-fd 1 to "
               "share it on purpose" % d)
        _only_a_usage_error(_read_all(r_fd), p, msg, s)
    path = s.p("base", "report.jsonl")
    rep = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    out = os.open(path, os.O_WRONLY | os.O_APPEND)  # another open file description, the same file
    try:
        p = _forging_run(s, rep, (rep,), stdout=out)
    finally:
        os.close(rep)
        os.close(out)
    msg = ("fd 1 is the same open file as --report-fd %d, so the command could write forged records into the "
           "report; give the report a file of its own (a pipe), or name fd 1 itself with --report-fd 1 to share it "
           "on purpose" % rep)
    _only_a_usage_error(open(path).read(), p, msg, s)


def test_a_report_beside_the_commands_stdio_on_dev_null_runs(s):
    # Nobody reads /dev/null: a report there beside a command whose stdout is
    # /dev/null too is not a way to forge anything, and runs.
    need_landlock()
    null = os.open("/dev/null", os.O_WRONLY)
    try:
        p = subprocess.run([DSH, "--report-fd", str(null), "--runner", "landlock", "--", "true"], pass_fds=(null,),
                           env=s.env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           timeout=60)
    finally:
        os.close(null)
    assert p.returncode == 0, p


if __name__ == "__main__":
    main()
