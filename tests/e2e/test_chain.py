"""The Linux runner chain: auto = bwrap (probed) then Landlock, never unconfined.

bwrap is replaced in a private mount namespace (for the unprivileged user, inside
a user namespace of its own), so the host is untouched.
"""
import os
import time

from harness import EXEC_SUPERVISE, SANDBOX_UNAVAILABLE, dsh, is_root, main, matrix, need_bwrap, need_landlock, tool

BWRAP = "/usr/bin/bwrap"


def _replaced(stub):
    # A private mount namespace whose /usr/bin/bwrap is `stub`; then exec the rest.
    # An unprivileged user gets one inside a user namespace of its own (-r: mapped
    # to uid 0 there, with no privilege over the host).
    userns = [] if is_root() else ["-U", "-r"]
    return ["unshare", "-m"] + userns + ["--propagation", "private", "sh", "-c",
            'mount --bind "$0" %s && exec "$@"' % BWRAP, stub]


def _need_runners():
    need_bwrap()
    need_landlock()


def _ws_run(s, pre, extra=(), script=None):
    script = script or "echo in > '%s'; echo out > '%s'; true" % (s.p("ws", "in"), s.p("outside", "out"))
    return dsh(["--mode", "workspace-write", "--root", s.ws] + list(extra) + ["--", "sh", "-c", script], s,
               pre=pre, timeout=60)


def test_auto_falls_back_to_landlock_when_bwrap_fails(s):
    _need_runners()
    stub = s.script("fake-bwrap", "#!/bin/sh\necho 'bwrap: fake setup failure' >&2\nexit 1\n")
    r = _ws_run(s, _replaced(stub))
    assert r.rc == 0, r
    c = r.rec("confinement")
    assert c["runner"] == "landlock", r
    skipped = {x["runner"]: x["reason"] for x in c["skippedRunners"]}
    assert "bwrap: fake setup failure" in skipped.get("bwrap", ""), r
    assert open(s.p("ws", "in")).read() == "in\n"
    assert not os.path.exists(s.p("outside", "out"))


def test_auto_falls_back_when_bwrap_is_not_executable(s):
    _need_runners()
    stub = s.script("not-exec-bwrap", "", mode=0o644)
    r = _ws_run(s, _replaced(stub))
    assert r.rc == 0, r
    assert r.rec("confinement")["runner"] == "landlock", r
    assert "bwrap" in [x["runner"] for x in r.rec("confinement")["skippedRunners"]], r
    assert not os.path.exists(s.p("outside", "out"))


def test_a_hanging_probe_is_cut_off_at_the_timeout(s):
    _need_runners()
    stub = s.script("hanging-bwrap", "#!/bin/sh\nexec sleep 30\n")
    t0 = time.time()
    r = _ws_run(s, _replaced(stub), extra=["--probe-timeout", "300"])
    elapsed = time.time() - t0
    assert r.rc == 0, r
    c = r.rec("confinement")
    assert c["runner"] == "landlock", r
    reason = {x["runner"]: x["reason"] for x in c["skippedRunners"]}["bwrap"]
    assert "did not finish within 300 ms" in reason, r
    assert elapsed < 25, elapsed  # not the stub's 30 s: the probe was killed
    assert not os.path.exists(s.p("outside", "out"))


def test_nothing_runs_when_neither_runner_is_usable(s):
    _need_runners()
    stub = s.script("fake-bwrap", "#!/bin/sh\necho 'bwrap: fake setup failure' >&2\nexit 1\n")
    pre = _replaced(stub) + [tool("sysfault"), "ENOSYS", "444,445,446", "--"]
    r = _ws_run(s, pre)
    assert r.rc == 125, r
    assert r.err == "dsh-confine: %s\n" % SANDBOX_UNAVAILABLE.format(mode="workspace-write"), r
    assert r.rec("error")["code"] == "SANDBOX_UNAVAILABLE" and r.rec("confinement") is None, r
    assert not os.path.exists(s.p("ws", "in")) and not os.path.exists(s.p("outside", "out"))


def test_forced_bwrap_never_falls_back(s):
    _need_runners()
    stub = s.script("fake-bwrap", "#!/bin/sh\necho 'bwrap: fake setup failure' >&2\nexit 1\n")
    r = _ws_run(s, _replaced(stub), extra=["--runner", "bwrap"])
    assert r.rc != 0, r
    assert r.rec("confinement") is None or r.rec("confinement")["runner"] == "bwrap", r
    assert not os.path.exists(s.p("ws", "in")) and not os.path.exists(s.p("outside", "out"))


@matrix(supervise=EXEC_SUPERVISE)
def test_forced_runner_refusal_names_the_option_and_the_fix(s, supervise):
    # Both runners usable, one forced that cannot hold one option: the line names the option and the
    # fix (drop it, or the other runner), never the seed's "no sandbox backend is usable ... switch
    # the consumer to danger-full-access", which is for no runner at all (issue 42).
    need_bwrap()
    need_landlock()
    marker = s.p("ws", "ran")
    for runner, option, other in (("landlock", "--private-tmp", "--runner bwrap"),
                                  ("bwrap", "--keep-descendants", "--runner landlock")):
        r = dsh(["--runner", runner, "--mode", "workspace-write", "--root", s.ws, option] + supervise +
                ["--", "sh", "-c", "echo ran > " + marker], s)
        assert r.rc == 125 and not os.path.exists(marker), r
        line = r.err[len("dsh-confine: "):-1]
        assert r.err.startswith("dsh-confine: --runner %s: " % runner) and r.err.count("\n") == 1, r
        assert option in line and "drop " + option in line and other in line, r
        assert "no sandbox backend" not in line and "danger-full-access" not in line, r
        e = r.rec("error")
        assert e["code"] == "SANDBOX_UNAVAILABLE" and e["message"] == line and r.rec("confinement") is None, r
        # The same options with auto run: the other runner holds them.
        r = dsh(["--mode", "workspace-write", "--root", s.ws, option] + supervise + ["--", "true"], s)
        assert r.rc == 0 and r.rec("confinement")["runner"] != runner, r


if __name__ == "__main__":
    main()
