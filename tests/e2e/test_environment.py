"""--clearenv, --setenv, --unsetenv, --scrub-secrets: what the command sees, and the report."""
import json
import os
import socket
import subprocess

from harness import DSH, RUNNERS, check_records, dsh, main, matrix, need_landlock

SECRET_VALUE = "s3cr3t-value-that-must-not-leak"


def env_of(r):
    """The command's environment as printed by `env -0`."""
    return dict(e.split("=", 1) for e in r.out.split("\0") if e)


def run_env(s, extra, env=None):
    need_landlock()
    return dsh(["--mode", "read-only"] + extra + ["--", "env", "-0"], s, env=env)


def test_no_flag_inherits_everything(s):
    r = run_env(s, [], env={"GITHUB_TOKEN": SECRET_VALUE, "FOO": "bar"})
    assert r.rc == 0, r
    e = env_of(r)
    assert e["GITHUB_TOKEN"] == SECRET_VALUE and e["FOO"] == "bar", r
    assert r.rec("confinement")["environment"] == {"cleared": False, "set": [], "unset": [], "scrubbed": []}, r


def test_clearenv_gives_empty_environment(s):
    r = run_env(s, ["--clearenv"], env={"FOO": "bar"})
    assert r.rc == 0, r
    assert env_of(r) == {}, r
    assert r.rec("confinement")["environment"]["cleared"] is True, r


def test_clearenv_then_setenv(s):
    r = run_env(s, ["--clearenv", "--setenv", "A=x=y\nz", "--setenv", "B="])
    assert r.rc == 0, r
    assert env_of(r) == {"A": "x=y\nz", "B": ""}, r
    assert r.rec("confinement")["environment"]["set"] == ["A", "B"], r


def test_unsetenv(s):
    r = run_env(s, ["--unsetenv", "FOO", "--unsetenv", "ABSENT"], env={"FOO": "bar", "KEEP": "1"})
    assert r.rc == 0, r
    e = env_of(r)
    assert "FOO" not in e and e["KEEP"] == "1", r
    assert r.rec("confinement")["environment"]["unset"] == ["FOO"], r


def test_scrub_secrets(s):
    secrets = {"GITHUB_TOKEN": SECRET_VALUE, "aws_secret_access_key": SECRET_VALUE, "MY_API_KEY": SECRET_VALUE,
               "PGPASSWORD": SECRET_VALUE, "GOOGLE_APPLICATION_CREDENTIALS": "/x/" + SECRET_VALUE,
               "AZURE_CLIENT_SECRET": SECRET_VALUE, "DATABASE_URL": "postgres://u:%s@h/db" % SECRET_VALUE}
    # Ordinary words, identifiers and trust stores stay (TLS needs the CA bundle).
    keep = {"GIT_AUTHOR_NAME": "me", "LANG": "C.UTF-8", "FOO": "bar", "KEYBOARD": "us", "MONKEY": "1",
            "AWS_CA_BUNDLE": "/etc/ssl/certs/ca-certificates.crt", "AZURE_CLIENT_ID": "id",
            "PIP_INDEX_URL": "https://pypi.org/simple"}
    r = run_env(s, ["--scrub-secrets"], env=dict(secrets, **keep))
    assert r.rc == 0, r
    e = env_of(r)
    for k in secrets:
        assert k not in e, (k, r)
    for k, v in keep.items():
        assert e[k] == v, (k, r)
    assert e["HOME"] == s.home and "PATH" in e, r
    rec = r.rec("confinement")
    assert set(secrets) <= set(rec["environment"]["scrubbed"]), r
    # Names only: no value reaches the report or stderr.
    assert SECRET_VALUE not in json.dumps(r.report) and SECRET_VALUE not in r.err, r


def test_setenv_beats_scrub(s):
    r = run_env(s, ["--scrub-secrets", "--setenv", "GITHUB_TOKEN=given"], env={"GITHUB_TOKEN": SECRET_VALUE})
    assert r.rc == 0, r
    assert env_of(r)["GITHUB_TOKEN"] == "given", r
    env = r.rec("confinement")["environment"]
    assert "GITHUB_TOKEN" in env["scrubbed"] and env["set"] == ["GITHUB_TOKEN"], r
    assert SECRET_VALUE not in json.dumps(r.report), r


def test_command_is_found_on_its_final_path(s):
    need_landlock()
    bindir = s.p("ws", "bin")
    os.mkdir(bindir)
    prog = os.path.join(bindir, "only-here")
    with open(prog, "w") as f:
        f.write("#!/bin/sh\necho found-on-final-path\n")
    os.chmod(prog, 0o755)
    r = dsh(["--", "only-here"], s)
    assert r.rc == 127, r
    r = dsh(["--setenv", "PATH=" + bindir + ":/usr/bin:/bin", "--", "only-here"], s)
    assert r.rc == 0 and r.out == "found-on-final-path\n", r
    assert r.rec("confinement")["command"] == prog, r


def test_clearenv_without_path_uses_default_search(s):
    # execvp's default search when PATH is unset: /usr/local/bin:/usr/bin:/bin.
    r = run_env(s, ["--clearenv"])
    assert r.rc == 0 and r.rec("confinement")["command"] in ("/usr/bin/env", "/bin/env"), r


def test_path_pointing_nowhere_is_127_and_nothing_runs(s):
    marker = s.p("outside", "ran")
    r = dsh(["--mode", "danger-full-access", "--setenv", "PATH=/nonexistent", "--", "sh", "-c",
             "touch " + marker], s)
    assert r.rc == 127, r
    assert not os.path.exists(marker), r
    assert r.rec("error")["code"] == "COMMAND_NOT_FOUND", r


def test_bad_names_are_usage_errors(s):
    marker = s.p("outside", "ran")
    for args, msg in ((["--setenv", "=v"], "dsh-confine: --setenv: the variable name is empty"),
                      (["--unsetenv", "X=1"], "dsh-confine: --unsetenv X=1: a variable name cannot contain '='")):
        r = dsh(["--mode", "danger-full-access"] + args + ["--", "sh", "-c", "touch " + marker], s)
        assert r.rc == 125, r
        assert r.err == msg + "\n", r
        assert r.rec("error")["code"] == "USAGE", r
        assert not os.path.exists(marker), r


def test_setenv_is_one_word_and_never_swallows_the_command(s):
    # The two-word form is refused, loudly: its second word would otherwise be
    # the command (or the command's first word a value). Nothing runs.
    marker = s.p("outside", "ran")
    r = dsh(["--mode", "danger-full-access", "--setenv", "A", "sh", "-c", "touch " + marker], s)
    assert r.rc == 125, r
    assert r.err == 'dsh-confine: option --setenv takes one word NAME=VALUE, not "A": --setenv A=VALUE\n', r
    assert not os.path.exists(marker), r


def test_repeated_unsetenv_before_a_bare_command(s):
    # Issue 15: "--unsetenv HOME USER env" ran USER. Each option takes one
    # value; the first word that is not ours is the command.
    r = dsh(["--unsetenv", "HOME", "--unsetenv", "USER", "env", "-0"], s, env={"HOME": "/h", "USER": "u", "KEEP": "1"})
    assert r.rc == 0, r
    e = env_of(r)
    assert "HOME" not in e and "USER" not in e and e["KEEP"] == "1", r
    assert r.rec("confinement")["command"].endswith("/env"), r
    r = dsh(["--setenv", "A=1", "--setenv=B=2", "env", "-0"], s)
    assert r.rc == 0 and env_of(r)["A"] == "1" and env_of(r)["B"] == "2", r


def test_danger_full_access_applies_env_too(s):
    r = dsh(["--mode", "danger-full-access", "--clearenv", "--setenv", "ONLY=1", "--", "env", "-0"], s)
    assert r.rc == 0 and env_of(r) == {"ONLY": "1"}, r


# ---- make's jobserver (issue 42) ---------------------------------------------------------------

def jobserver_run(s, runner, makeflags, fds, script, extra=()):
    return dsh(["--mode", "workspace-write", "--root", s.ws, "--runner", runner] + list(extra) +
               ["--", "bash", "-c", script], s, env={"MAKEFLAGS": makeflags}, extra_fds=fds)


@matrix(runner=RUNNERS)
def test_make_jobserver_pipe_is_kept_and_recorded(s, runner):
    r, w = os.pipe()
    os.set_inheritable(r, True)
    os.set_inheritable(w, True)
    try:
        # The command takes a token back from the pipe and returns it, as a sub-make does.
        os.write(w, b"+")
        res = jobserver_run(s, runner, "s -j4 --jobserver-auth=%d,%d -- X=1" % (r, w), (r, w),
                            "head -c1 <&%d && printf + >&%d" % (r, w))
        assert res.rc == 0 and res.out == "+", res
        assert os.read(r, 1) == b"+"
        c = res.rec("confinement")
        assert c["keptFds"] == [r, w], c["keptFds"]
        assert c["jobserver"] == {"source": "MAKEFLAGS", "auth": "fds", "fds": [r, w], "kept": True,
                                  "whyNot": None}, c["jobserver"]
        # --unsetenv MAKEFLAGS: the command's make cannot use them, so they are not kept.
        res = jobserver_run(s, runner, "-j4 --jobserver-auth=%d,%d" % (r, w), (r, w), "true",
                            extra=["--unsetenv", "MAKEFLAGS"])
        c = res.rec("confinement")
        assert c["keptFds"] == [] and c["jobserver"]["kept"] is False, c
        assert "MAKEFLAGS is not the caller's" in c["jobserver"]["whyNot"], c
    finally:
        os.close(r)
        os.close(w)


@matrix(runner=RUNNERS)
def test_make_jobserver_naming_a_host_file_keeps_nothing(s, runner):
    # MAKEFLAGS is the caller's environment, which anyone upstream may have written: naming a file
    # outside the root, open for reading and for writing (the right ends, one inode), a directory or
    # a socket must not pass it to the command.
    target = s.p("outside", "jobserver-target")
    with open(target, "w"):
        pass
    rd = os.open(target, os.O_RDONLY)
    wr = os.open(target, os.O_WRONLY)
    dfd = os.open(s.p("outside"), os.O_RDONLY | os.O_DIRECTORY)
    sa, sb = socket.socketpair()
    pr, pw = os.pipe()
    qr, qw = os.pipe()
    cases = [((rd, wr), "a regular file"), ((dfd, pw), "a directory"), ((sa.fileno(), sb.fileno()), "a socket"),
             ((pr, qw), "not the two ends of one pipe"), ((pw, pr), "not open for reading")]
    held = [rd, wr, dfd, sa.fileno(), sb.fileno(), pr, pw, qr, qw]
    for fd in held:
        os.set_inheritable(fd, True)
    try:
        for (a, b), why in cases:
            res = jobserver_run(s, runner, "-j4 --jobserver-auth=%d,%d" % (a, b), held,
                                "echo pwned >&%d; echo pwned >&%d; ls /proc/self/fd/%d /proc/self/fd/%d" % (a, b, a, b))
            c = res.rec("confinement")
            assert c["keptFds"] == [], (why, c["keptFds"])
            assert c["jobserver"]["kept"] is False and why in c["jobserver"]["whyNot"], (why, c["jobserver"])
            assert "No such file" in res.err, (why, res)  # neither fd reached the command
        assert open(target).read() == ""
    finally:
        for fd in (rd, wr, dfd, pr, pw, qr, qw):
            os.close(fd)
        sa.close()
        sb.close()


@matrix(runner=RUNNERS)
def test_make_jobserver_naming_the_report_keeps_nothing(s, runner):
    # The report's own pipe, both ends passed: the command could forge records through it.
    r, w = os.pipe()
    os.set_inheritable(r, True)
    os.set_inheritable(w, True)
    env = s.env()
    env["MAKEFLAGS"] = "-j4 --jobserver-auth=%d,%d" % (r, w)
    p = subprocess.Popen([DSH, "--report-fd", str(w), "--mode", "workspace-write", "--root", s.ws, "--runner",
                          runner, "--", "sh", "-c", 'echo \'{"type":"forged"}\' >&%d' % w], env=env,
                         pass_fds=(r, w), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = p.communicate(timeout=60)
    os.close(w)
    lines = []
    with os.fdopen(r, "rb") as f:
        lines = [json.loads(x) for x in f.read().splitlines()]
    check_records(lines)
    assert all(x.get("type") != "forged" for x in lines), lines
    c = [x for x in lines if x["type"] == "confinement"][0]
    assert c["keptFds"] == [] and "reaches the --report-fd" in c["jobserver"]["whyNot"], c


if __name__ == "__main__":
    main()
