"""The command line: our options end at the first word that is not ours, and
nothing after the command is ever read as ours (issue 13, item 0: `dsh-confine
touch X --mode danger-full-access` ran touch unconfined). Each check is made from
outside: the file the command tried to create does or does not exist."""
import os

from harness import dsh, main, need_bwrap, need_landlock

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
                      (["--mode", "write"], 'unknown mode "write" (read-only, workspace-write or danger-full-access)')):
        r = dsh(args + ["sh", "-c", "touch " + marker], s)
        assert r.rc == 125 and r.err == "dsh-confine: %s\n" % msg, r
        assert r.rec("error") == {"type": "error", "version": 1, "code": "USAGE", "message": msg,
                                  "exitStatus": 125}, r
        assert not os.path.exists(marker), r


def test_subcommand_help(s):
    r = dsh(["explain", "--help"], s, report=False)
    assert r.rc == 0 and "-- COMMAND" in r.out, r
    r = dsh(["self-test", "--help"], s, report=False)
    assert r.rc == 0 and "--runner RUNNER" in r.out, r


if __name__ == "__main__":
    main()
