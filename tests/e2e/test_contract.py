#!/usr/bin/env python3
"""The seed contract where a conformance pass found deviations (issue 16).

A runner that cannot be started is SANDBOX_UNAVAILABLE with the seed's exact text and
" Runner failure: <detail>", exit 125, `runnerFailed: true` in supervise mode: never the
command's 126/127 ("your command does not exist" when the sandbox never started).
"""
import json
import os

from harness import SANDBOX_UNAVAILABLE, dsh, main


def _config(s, runner_command):
    cfg = s.p("base", "config.json")
    with open(cfg, "w") as f:
        json.dump({"runnerCommand": runner_command, "runnerFailureSignatures": ["bwrap: "]}, f)
    os.chmod(cfg, 0o644)
    return cfg


def _runner_cases(s):
    missing = s.p("base", "no-such-runner")
    not_exec = s.p("base", "not-executable")
    with open(not_exec, "w") as f:
        f.write("#!/bin/sh\nexec \"$@\"\n")
    os.chmod(not_exec, 0o644)
    bad_interp = s.p("base", "bad-interpreter")
    with open(bad_interp, "w") as f:
        f.write("#!/nonexistent/dsh-e2e-interpreter\n")
    os.chmod(bad_interp, 0o755)
    return [
        (missing, "cannot start the runner %s: command not found" % missing),
        (not_exec, "cannot start the runner %s: permission denied" % not_exec),
        (bad_interp, "cannot start the runner %s: No such file or directory" % bad_interp),
    ]


def test_custom_runner_that_cannot_start_is_sandbox_unavailable(s):
    mark = s.p("outside", "ran")
    for runner, detail in _runner_cases(s):
        cfg = _config(s, [runner])
        for extra in ([], ["--supervise"]):
            r = dsh(["--config", cfg, "--mode", "read-only"] + extra + ["--", "sh", "-c", "echo ran > '%s'" % mark],
                    s)
            message = SANDBOX_UNAVAILABLE.format(mode="read-only") + " Runner failure: " + detail
            assert r.rc == 125, r
            assert r.err.endswith("dsh-confine: %s\n" % message), r
            assert not os.path.exists(mark), r
            err = r.rec("error")
            assert err is not None and err["code"] == "SANDBOX_UNAVAILABLE" and err["message"] == message, r
            # Supervise: a runner refused before the spawn leaves only the error
            # record (nothing ran); one that fails at exec leaves a result too.
            res = r.rec("result")
            if res is not None:
                assert extra and res["runnerFailed"] is True and res["exitCode"] == 125, r
                assert res["runnerFailure"] == detail and res["denied"] is False, r


if __name__ == "__main__":
    main()
