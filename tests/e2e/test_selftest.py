"""`dsh-confine self-test`: passes here under each Linux runner, and fails loudly when
pointed at a program that does not confine (--binary)."""
import json
import os
import subprocess

from harness import DSH, dsh, main, need_bwrap, need_landlock, skip

# Checks that any runner which does not confine must fail, whoever runs it.
ESCAPES = {"write-outside", "read-only", "symlink-escape", "link-rename", "grandchild", "inherited-fd",
           "no-new-privs", "tmp", "proc-fd-reopen"}


def self_test(s, *args, binary=None):
    extra = ["--binary", binary] if binary else []
    r = dsh(["self-test"] + extra + list(args), s, report=False, timeout=300)
    return r


def parsed(r):
    try:
        return json.loads(r.out)
    except ValueError:
        raise AssertionError("self-test --json did not print JSON: %r" % r)


def _results(j, runner):
    for x in j["runners"]:
        if x["runner"] == runner:
            return x
    raise AssertionError("runner %s missing: %s" % (runner, j))


def _check_all_held(j, runner):
    x = _results(j, runner)
    assert x["usable"], x
    names = [c["name"] for c in x["checks"]]
    assert len(names) >= 18 and len(set(names)) == len(names), names
    bad = [c for c in x["checks"] if c["result"] == "FAILED"]
    assert bad == [], bad
    na = [c["name"] for c in x["checks"] if c["result"] == "n/a"]
    assert set(na) <= {"tiocsti"}, na  # only TIOCSTI may be impossible to try on a host


def test_self_test_passes_under_landlock(s):
    need_landlock()
    r = self_test(s, "--runner", "landlock", "--json")
    assert r.rc == 0, r
    j = parsed(r)
    assert j["type"] == "self-test" and j["ok"] is True and j["binary"] == os.path.realpath(DSH), j
    # In the order of every record of the report: `type` first, then `version`.
    assert list(j)[:2] == ["type", "version"] and list(j["runners"][0])[:2] == ["runner", "usable"], list(j)
    _check_all_held(j, "landlock")
    # The text form says the same.
    r = self_test(s, "--runner", "landlock")
    assert r.rc == 0 and "self-test passed: every check held." in r.out and "FAILED " not in r.out, r


def test_self_test_passes_under_bwrap(s):
    need_bwrap()
    if os.environ.get("DSH_BWRAP_RUNNER_BUILT") != "1":
        skip("this build has no bwrap runner yet (src/linux/bwrap_runner.cpp)")
    r = self_test(s, "--runner", "bwrap", "--json")
    assert r.rc == 0, r
    _check_all_held(parsed(r), "bwrap")


def test_self_test_without_runner_tries_every_linux_runner(s):
    need_landlock()
    r = self_test(s, "--json")
    assert r.rc == 0, r
    j = parsed(r)
    # Every runner of the registry that auto could take, in auto's order (a
    # custom runner only when one is configured).
    assert [x["runner"] for x in j["runners"]] == ["bwrap", "landlock"], j
    _check_all_held(j, "landlock")
    for x in j["runners"]:
        if x["usable"]:
            _check_all_held(j, x["runner"])
        else:
            assert x["reason"], x


def _fake(s, name, body):
    p = s.p("base", name)
    with open(p, "w") as f:
        f.write("#!/bin/sh\n" + body)
    os.chmod(p, 0o755)
    return p


# A "runner" that does not confine at all, yet writes a plausible report claiming full
# enforcement: the self-test must not believe the report.
UNCONFINED = r"""
fd=; mode=read-only; root=$PWD; runner=auto
while [ $# -gt 0 ]; do
  case "$1" in
    --report-fd) fd=$2; shift 2;;
    --mode) mode=$2; shift 2;;
    --root) root=$2; shift 2;;
    --runner) runner=$2; shift 2;;
    --) shift; break;;
    *) shift;;
  esac
done
if [ -n "$fd" ]; then
  printf '{"type":"confinement","version":1,"mode":"%s","workspaceRoot":"%s","runner":"%s","enforcement":"full","gaps":[],"writableRoots":[{"path":"%s","persists":true},{"path":"/tmp","persists":true}]}\n' \
    "$mode" "$root" "$runner" "$root" >&"$fd"
fi
exec "$@"
"""


def _failed_checks(j):
    return {c["name"] for x in j["runners"] if x["usable"] for c in x["checks"] if c["result"] == "FAILED"}


def test_self_test_fails_loudly_on_a_runner_that_does_not_confine(s):
    fake = _fake(s, "unconfined-runner", UNCONFINED)
    r = self_test(s, "--runner", "landlock", binary=fake)
    assert r.rc == 1, r
    assert "SELF-TEST FAILED" in r.out and "FAILED  write-outside" in r.out, r
    r = self_test(s, "--runner", "landlock", "--json", binary=fake)
    assert r.rc == 1, r
    j = parsed(r)
    assert j["ok"] is False and j["binary"] == fake, j
    failed = _failed_checks(j)
    assert ESCAPES <= failed, sorted(ESCAPES - failed)
    assert set(NEW_CHECKS) <= failed, sorted(set(NEW_CHECKS) - failed)
    # The fake's report looked right: the world, not the report, caught it.
    assert "report" not in failed, failed
    # Nothing the fake let through was left outside the self-test's scratch.
    assert j["scratch"].startswith("/var/tmp/dsh-confine-self-test-"), j
    assert not os.path.exists(j["scratch"]), "scratch left behind"


# A subtler one: the real dsh-confine, but one extra writable root (the workspace's
# parent) slipped in. The report is genuine; the policy is not what was asked.
WIDENED = r"""
root=; prev=; ww=
for a in "$@"; do
  if [ "$prev" = --root ]; then root=$a; fi
  if [ "$a" = workspace-write ]; then ww=1; fi
  prev=$a
done
# Only where it widens: --writable in read-only is refused outright (issue 42).
if [ -n "$ww" ]; then exec "%s" --writable "$(dirname "$root")" "$@"; fi
exec "%s" "$@"
"""


def test_self_test_catches_a_runner_that_widens_the_policy(s):
    need_landlock()
    fake = _fake(s, "widening-runner", WIDENED % (os.path.realpath(DSH), os.path.realpath(DSH)))
    r = self_test(s, "--runner", "landlock", "--json", binary=fake)
    assert r.rc == 1, r
    failed = _failed_checks(parsed(r))
    assert {"write-outside", "symlink-escape", "link-rename", "grandchild"} <= failed, failed
    assert "no-capabilities" not in failed and "tiocsti" not in failed, failed


# Issue 42: the network, carve-outs, hidden paths and limits are checked too, from outside.
NEW_CHECKS = ("net-off", "protected-path", "hidden-path", "limit-file-size", "limit-timeout")

# The real binary with one of its options dropped from the command line (and its value): that one
# protection is broken, everything else is as asked.
STRIP = """#!/usr/bin/python3
import os, sys
a, out, i = sys.argv[1:], [], 0
while i < len(a):
    if a[i] == "--":
        out += a[i:]
        break
    if a[i] == %r:
        i += 2
        continue
    out.append(a[i])
    i += 1
os.execv(%r, [%r] + out)
"""


def test_self_test_checks_network_carveouts_hidden_paths_and_limits(s):
    need_bwrap()
    r = self_test(s, "--runner", "bwrap", "--json")
    assert r.rc == 0, r
    x = _results(parsed(r), "bwrap")
    got = {c["name"]: c["result"] for c in x["checks"]}
    assert all(got.get(n) == "held" for n in NEW_CHECKS), got
    r = self_test(s, "--runner", "bwrap")
    assert r.rc == 0 and all("held    %s" % n in r.out for n in NEW_CHECKS), r


def test_self_test_new_checks_fail_when_their_protection_is_broken(s):
    need_bwrap()
    real = os.path.realpath(DSH)
    for option, check in (("--net", "net-off"), ("--protect", "protected-path"), ("--deny-read", "hidden-path"),
                          ("--file-size", "limit-file-size"), ("--timeout", "limit-timeout")):
        fake = s.p("base", "strip" + option)
        with open(fake, "w") as f:
            f.write(STRIP % (option, real, real))
        os.chmod(fake, 0o755)
        r = self_test(s, "--runner", "bwrap", "--json", binary=fake)
        assert r.rc == 1, (option, r)
        failed = _failed_checks(parsed(r))
        # That check, and no other: each fails for its own protection.
        assert failed == {check}, (option, failed)


def test_self_test_with_an_unusable_named_runner_fails(s):
    r = self_test(s, "--runner", "seatbelt")
    assert r.rc == 1, r
    assert "runner seatbelt: not usable here: " in r.out and "SELF-TEST FAILED" in r.out, r


if __name__ == "__main__":
    main()
