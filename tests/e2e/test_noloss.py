#!/usr/bin/env python3
"""Issue 37, no silent loss of a protection, and `check` from the policy the runners enforce.

A protection asked for (--protect, --deny-read, --hide-secrets, and the default carve-outs in
workspace-write) holds on the runner that runs, or nothing runs: exit 125, PROTECTION_UNAVAILABLE,
one line naming the path, what would hold it and how to drop it. Landlock cannot carve, so forced
it is refused, auto never takes it for such a run, and --keep-descendants (which bwrap cannot give)
is refused with them. Each attack is checked from outside: the planted hook, the written file or
the read secret is not there. `check --write` / `check --read` answer as a real bwrap run does, for
each protected and hidden path (the answer and the attempt, side by side).
"""
import json
import os
import subprocess

from harness import dsh, main, need_runner

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}


def git(s, cwd, *args):
    e = s.env()
    e.update(GIT_ENV)
    r = subprocess.run(["git", "-c", "init.defaultBranch=main"] + list(args), cwd=cwd, env=e,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert r.returncode == 0, (args, r.stderr)
    return r.stdout.decode()


def make_repo(s, path):
    os.makedirs(path, exist_ok=True)
    git(s, path, "init", "-q", ".")
    with open(os.path.join(path, "a.txt"), "w") as f:
        f.write("one\n")
    git(s, path, "add", "a.txt")
    git(s, path, "commit", "-q", "-m", "one")
    os.makedirs(os.path.join(path, ".git", "hooks"), exist_ok=True)


def read(p):
    with open(p, "rb") as f:
        return f.read()


def write(p, body):
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w") as f:
        f.write(body)


def run(s, args, script, env=None, cwd=None):
    e = dict(GIT_ENV)
    if env:
        e.update(env)
    return dsh(list(args) + ["--", "sh", "-c", script], s, cwd=cwd or s.ws, env=e)


def refused(r, line):
    """Nothing ran: exit 125, one line, the error record with the same text."""
    assert r.rc == 125, r
    assert r.out == "", r
    assert r.err == "dsh-confine: " + line + "\n", r
    err = r.rec("error")
    assert err and err["code"] == "PROTECTION_UNAVAILABLE" and err["message"] == line, r
    assert r.rec("confinement") is None, r


def landlock_text(what, path, more, instead, drop):
    return "landlock cannot %s %s%s, which this run asks for, and would run without it: %s; or %s" % (
        what, path, " (and %d more)" % more if more else "", instead, drop)


USE_BWRAP = "use --runner bwrap (or auto)"
KEEP_TEXT = ("--keep-descendants rules out bwrap, whose PID namespace ends the command's background processes with "
             "it, so drop --keep-descendants")

# A hook git runs at the next bare commit, outside any sandbox.
PLANT_HOOK = "printf '#!/bin/sh\\ntouch %s\\n' > .git/hooks/post-commit; chmod +x .git/hooks/post-commit; touch ran"


def planted_hook_runs(s, marker):
    """An ordinary unconfined commit in the workspace: whether a planted hook ran."""
    git(s, s.ws, "commit", "-q", "--allow-empty", "-m", "next")
    return os.path.exists(marker)


def repo_refusal(s):
    """The refusal's line for the workspace repository (its .git, hooks, config, info/attributes
    ... whatever the walk lists, counted from explain under bwrap)."""
    r = dsh(["explain", "--json", "--mode", "workspace-write", "--root", s.ws, "--runner", "bwrap", "--", "true"], s,
            cwd=s.ws, report=False)
    assert r.rc == 0, r
    es = [e for e in json.loads(r.out)["confinement"]["protectedPaths"] if e["enforced"]]
    assert es[0]["path"] == s.ws + "/.git", es
    # The way out: --unprotect of the deepest directory holding them all (here .git itself).
    common = os.path.commonpath([e["path"] for e in es])
    return landlock_text("protect", s.ws + "/.git", len(es) - 1, USE_BWRAP,
                         "--unprotect %s to let the command write what is protected below it" % common)


def hidden_refusal(s, args, env, instead):
    """The refusal's line for --hide-secrets: the first hidden path that exists and how many more,
    as explain shows them under bwrap (what the list holds is the secrets table's business)."""
    r = dsh(["explain", "--json", "--runner", "bwrap"] + args + ["--", "true"], s, cwd=s.ws, env=env, report=False)
    assert r.rc == 0, r
    hs = [h for h in json.loads(r.out)["confinement"]["hiddenPaths"] if h["exists"]]
    assert hs, r
    return landlock_text("hide", hs[0]["path"], len(hs) - 1, instead, "drop --hide-secrets (config hideSecrets)")


def test_forced_landlock_refuses_the_default_git_carve_outs(s):
    """workspace-write in a repository, --runner landlock, exec and supervise: refused, the planted
    hook never lands and the next commit runs nothing; --unprotect of the root is the explicit way
    to run there, and the record then says the defaults were dropped and claims none."""
    need_runner("landlock")
    make_repo(s, s.ws)
    marker = os.path.join(s.outside, "pwned")
    line = repo_refusal(s)
    for extra in ([], ["--supervise"]):
        r = run(s, ["--mode", "workspace-write", "--root", s.ws, "--runner", "landlock"] + extra,
                PLANT_HOOK % marker)
        refused(r, line)
        assert not os.path.exists(os.path.join(s.ws, "ran")), r
        assert not os.path.exists(os.path.join(s.ws, ".git/hooks/post-commit")), r
        assert not planted_hook_runs(s, marker)
    # The opt-out, named in the record: nothing is claimed as protected.
    r = run(s, ["--mode", "workspace-write", "--root", s.ws, "--runner", "landlock", "--unprotect", s.ws], "touch ran")
    assert r.rc == 0 and os.path.exists(os.path.join(s.ws, "ran")), r
    c = r.rec("confinement")
    assert c["runner"] == "landlock" and c["unprotected"] == [s.ws], c
    assert [e for e in c["protectedPaths"] if e["enforced"]] == [], c
    assert "protected-paths" not in [g["effect"] for g in c["gaps"]], c
    # ... and the gaps name what is writable for it.
    gap = [g for g in c["gaps"] if g["effect"] == "unprotected-paths"]
    assert len(gap) == 1 and gap[0]["detail"].endswith(": " + s.ws) and not gap[0]["ownEffect"], c


def test_forced_landlock_refuses_protect_deny_read_and_hide_secrets(s):
    """Each explicit protection alone, where no default one exists (a plain directory root): refused
    under landlock with its own fix, in read-only and workspace-write; bwrap holds each one."""
    need_runner("landlock")
    notes = os.path.join(s.ws, "notes.txt")
    write(notes, "mine\n")
    secret = os.path.join(s.outside, "secret")
    write(secret, "SECRET\n")
    home = os.path.join(s.base, "khome")
    write(os.path.join(home, ".ssh", "id_ed25519"), "PRIVATE\n")
    cases = [
        (["--mode", "workspace-write", "--protect", notes], "echo evil > %s; touch ran" % notes,
         landlock_text("protect", notes, 0, USE_BWRAP, "drop --protect " + notes), {}),
        (["--mode", "workspace-write", "--deny-read", secret], "cat %s; touch ran" % secret,
         landlock_text("hide", secret, 0, USE_BWRAP, "drop --deny-read " + secret), {}),
        (["--mode", "read-only", "--deny-read", secret], "cat %s" % secret,
         landlock_text("hide", secret, 0, USE_BWRAP, "drop --deny-read " + secret), {}),
        (["--mode", "workspace-write", "--hide-secrets"], "cat $HOME/.ssh/id_ed25519; touch ran",
         hidden_refusal(s, ["--mode", "workspace-write", "--root", s.ws, "--hide-secrets"],
                        {"HOME": home, "SSH_AUTH_SOCK": None}, USE_BWRAP),
         {"HOME": home, "SSH_AUTH_SOCK": None}),
    ]
    for args, script, line, env in cases:
        for extra in ([], ["--supervise"]):
            r = run(s, ["--root", s.ws, "--runner", "landlock"] + args + extra, script, env=env)
            refused(r, line)
            assert read(notes) == b"mine\n" and not os.path.exists(os.path.join(s.ws, "ran")), r
    # bwrap holds each of them: the same runs go, and nothing leaks.
    need_runner("bwrap")
    for args, script, line, env in cases:
        r = run(s, ["--root", s.ws, "--runner", "bwrap"] + args, script + "; true", env=env)
        assert r.rc == 0 and "SECRET" not in r.out and "PRIVATE" not in r.out, r
        assert read(notes) == b"mine\n", r


def test_keep_descendants_with_a_protection_never_runs_unprotected(s):
    """--keep-descendants rules bwrap out, and Landlock would drop the protections: auto refuses,
    saying both, rather than take Landlock (which planted a post-commit hook and read a hidden key
    before). Without any protection it still runs under Landlock."""
    need_runner("landlock")
    need_runner("bwrap")
    make_repo(s, s.ws)
    marker = os.path.join(s.outside, "pwned")
    line = repo_refusal(s).replace(USE_BWRAP, KEEP_TEXT)
    for extra in ([], ["--supervise"]):
        r = run(s, ["--mode", "workspace-write", "--root", s.ws, "--keep-descendants"] + extra, PLANT_HOOK % marker)
        refused(r, line)
        assert not planted_hook_runs(s, marker) and not os.path.exists(os.path.join(s.ws, "ran")), r
    # A hidden key, read-only mode.
    home = os.path.join(s.base, "khome")
    write(os.path.join(home, ".ssh", "id_ed25519"), "PRIVATE\n")
    r = run(s, ["--mode", "read-only", "--keep-descendants", "--hide-secrets"], "cat $HOME/.ssh/id_ed25519",
            env={"HOME": home, "SSH_AUTH_SOCK": None})
    refused(r, hidden_refusal(s, ["--mode", "read-only", "--hide-secrets"], {"HOME": home, "SSH_AUTH_SOCK": None},
                              KEEP_TEXT))
    # No protection in play: Landlock keeps the descendants, as before.
    plain = os.path.join(s.base, "plain")
    os.mkdir(plain)
    r = run(s, ["--mode", "workspace-write", "--root", plain, "--keep-descendants"], "touch ran", cwd=plain)
    assert r.rc == 0 and r.rec("confinement")["runner"] == "landlock", r
    assert os.path.exists(os.path.join(plain, "ran"))


def test_auto_without_a_usable_bwrap_refuses_rather_than_drop(s):
    """bwrap unusable (a bwrapPath that fails its probe): auto does not fall back to Landlock for a
    run with a protection; the line says why bwrap was not taken."""
    need_runner("landlock")
    make_repo(s, s.ws)
    # bwrapPath only from a sealed config (issue 37): root's, in /etc/dsh-confine (skipped as a user).
    cfg = s.sealed_config({"bwrapPath": "/bin/false"})
    r = run(s, ["--mode", "workspace-write", "--root", s.ws, "--config", cfg], "touch ran")
    assert r.rc == 125 and not os.path.exists(os.path.join(s.ws, "ran")), r
    err = r.rec("error")
    assert err["code"] == "PROTECTION_UNAVAILABLE", r
    assert err["message"].startswith("landlock cannot protect %s/.git (and " % s.ws), r
    assert ", which this run asks for, and would run without it: bwrap, which can, is not usable here (" in \
        err["message"], r
    assert err["message"].endswith("; or --unprotect %s/.git to let the command write what is protected below it"
                                   % s.ws), r


# check answers, and a real bwrap run's attempt, for each path: (relative path, access, allowed).
def check_cases(s):
    ws = s.ws
    return [
        (".git/config", "write", False),
        (".git/hooks/post-commit", "write", False),  # inside a protected directory, absent itself
        (".git/info/attributes", "write", False),
        (".vscode/settings.json", "write", False),
        ("notes.txt", "write", False),               # --protect
        ("secrets/key", "write", False),             # inside a --deny-read directory
        ("secrets/key", "read", False),
        ("token", "read", False),                    # a --deny-read file
        ("token", "write", False),
        (".git/objects/probe", "write", True),       # the pinned .git is writable inside
        ("a.txt", "write", True),
        ("a.txt", "read", True),
        (".git/config", "read", True),               # protected is read-only, not hidden
        (".envrc", "write", False),                  # protected but absent: renamed aside after the run
    ], ["--protect", ws + "/notes.txt", "--deny-read", ws + "/secrets", "--deny-read", ws + "/token"]


def attempt(s, args, rel, access):
    """What a real bwrap run does: the write (seen from outside) or the read (its output)."""
    p = os.path.join(s.ws, rel)
    if access == "read":
        # Read means the file's bytes reached the command (a hidden file reads as an empty /dev/null).
        want = read(p).decode()
        assert want, p
        r = run(s, args, "cat %s 2>/dev/null; true" % p)
        assert r.rc == 0, r
        return r.out == want
    before = read(p) if os.path.isfile(p) else None
    r = run(s, args, "echo wrote-%d >> %s 2>/dev/null; true" % (os.getpid(), p))
    # An absent protected name the write created is renamed aside: the run's integrity status.
    assert r.rc == 0 or (r.rc == 123 and r.rec("integrity")["quarantined"]), r
    after = read(p) if os.path.isfile(p) else None
    landed = after is not None and after != before and after.endswith(b"wrote-%d\n" % os.getpid())
    if landed:  # put it back, so the next case starts from the same tree
        if before is None:
            os.unlink(p)
        else:
            with open(p, "wb") as f:
                f.write(before)
    return landed


def test_check_agrees_with_a_real_bwrap_run(s):
    """check --write / --read (exit status, text and JSON) against the attempt under bwrap, for each
    protected and hidden path and plain ones beside them."""
    need_runner("bwrap")
    make_repo(s, s.ws)
    write(os.path.join(s.ws, ".git", "info", "attributes"), "* -text\n")
    write(os.path.join(s.ws, ".vscode", "settings.json"), "{}\n")
    write(os.path.join(s.ws, "notes.txt"), "mine\n")
    write(os.path.join(s.ws, "secrets", "key"), "KEY\n")
    write(os.path.join(s.ws, "token"), "TOKEN\n")
    cases, extra = check_cases(s)
    policy = ["--mode", "workspace-write", "--root", s.ws] + extra
    run_args = policy + ["--runner", "bwrap"]
    for rel, access, allowed in cases:
        path = os.path.join(s.ws, rel)
        c = dsh(["check", "--" + access, path, "--json"] + policy, s, cwd=s.ws, report=False)
        assert c.rc == (0 if allowed else 1), (rel, access, c)
        j = json.loads(c.out)
        assert j[access] is allowed, (rel, access, j)
        t = dsh(["check", "--" + access, path] + policy, s, cwd=s.ws, report=False)
        assert t.rc == c.rc and t.out.startswith("yes: " if allowed else "no: "), (rel, access, t)
        assert attempt(s, run_args, rel, access) is allowed, (rel, access, "the real run disagrees with check")
    # What decided, in the JSON: the carve-out, and whether it holds.
    j = json.loads(dsh(["check", "--write", s.ws + "/.git/config", "--json"] + policy, s, report=False).out)
    assert j["protectedPath"] == {"path": s.ws + "/.git/config", "what": "git", "source": "default", "held": True}, j
    j = json.loads(dsh(["check", "--read", s.ws + "/secrets/key", "--json"] + policy, s, report=False).out)
    assert j["hiddenPath"] == {"path": s.ws + "/secrets", "source": "flag"}, j
    t = dsh(["check", "--write", s.ws + "/.envrc"] + policy, s, report=False)
    assert t.out.startswith("no: \"%s/.envrc\" is a protected path absent when the run starts" % s.ws), t
    # --hide-secrets: a key is not read, per check and per run.
    home = os.path.join(s.base, "khome")
    key = home + "/.ssh/id_ed25519"
    write(key, "PRIVATE\n")
    hs = ["--mode", "workspace-write", "--root", s.ws, "--hide-secrets"]
    env = {"HOME": home, "SSH_AUTH_SOCK": None}
    c = dsh(["check", "--read", key] + hs, s, env=env, report=False)
    assert c.rc == 1 and c.out.startswith("no: \"%s\" is hidden from the command" % key), c
    r = run(s, hs + ["--runner", "bwrap"], "cat %s; true" % key, env=env)
    assert r.rc == 0 and "PRIVATE" not in r.out, r


def test_check_needs_one_access(s):
    for args in (["check"], ["check", "--read", "/x", "--write", "/x"]):
        r = dsh(args, s, report=False)
        assert r.rc == 125, r
        assert r.err.startswith("dsh-confine: check asks about one path and one access: dsh-confine check --write "
                                "PATH, or check --read PATH"), r


if __name__ == "__main__":
    main()
