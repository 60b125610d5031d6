#!/usr/bin/env python3
"""Issue 37, protection that holds the whole way (bwrap): every directory between a writable root
and a protected path is a mount point of its own, so none can be moved aside and replaced, and a
bind's destination reached through a link planted after the walk refuses the run.

Each attack runs as a hostile command would, under bwrap in workspace-write (the runner and mode
that claim the protection), in exec and supervise modes, as root and as the test user. After each,
an ordinary unconfined `git status` in the attacked repository must run nothing planted (a
core.fsmonitor that writes a marker), and the tree holds the same names as before.
"""
import json
import os
import subprocess

from harness import DSH, EXEC_SUPERVISE, dsh, is_root, main, matrix, need_runner
from test_carveouts import GIT_ENV, fake_home, git, listing, make_repo, read, run

BWRAP = ("bwrap",)


def unconfined_git_status(s, cwd):
    """What the user's next ordinary `git status` there does (its status is not asserted: an attack
    may have left the repository broken)."""
    e = s.env()
    e.update(GIT_ENV)
    e["GIT_CONFIG_GLOBAL"] = os.devnull
    subprocess.run(["git", "status", "--porcelain"], cwd=cwd, env=e, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=60)


def planting(marker):
    """Shell that makes directory $1 a fresh repository whose core.fsmonitor writes `marker` (what
    an attacker puts where a protected directory was)."""
    return ("plant() { mkdir -p \"$1\" && git init -q \"$1\" && git -C \"$1\" config core.fsmonitor "
            "'touch %s' && echo planted \"$1\"; }; "
            "plant_gitdir() { cp -a \"$1\" \"$2\" && git --git-dir=\"$2\" config core.fsmonitor 'touch %s' && "
            "echo planted \"$2\"; }; " % (marker, marker))


EXCHANGE = ("python3 -c 'import ctypes, sys; c = ctypes.CDLL(None, use_errno=True)\n"
            "sys.exit(c.renameat2(-100, sys.argv[1].encode(), -100, sys.argv[2].encode(), 2))' ")


@matrix(runner=BWRAP, supervise=EXEC_SUPERVISE)
def test_nested_repository_ancestor_moved_aside(s, runner, supervise):
    """A repository one level below the root: its directory renamed, exchanged (RENAME_EXCHANGE)
    with a planted one, removed, and the root's every child moved: each is refused (EBUSY), and
    the repository is the same directory afterwards."""
    sub = os.path.join(s.ws, "sub")
    make_repo(s, sub)
    marker = os.path.join(s.outside, "fsmonitor-ran")
    ino = os.stat(sub).st_ino
    names = listing(s.ws)
    script = planting(marker) + (
        "mv sub sub.old && plant sub; "
        "plant fresh && %s fresh sub && echo exchanged; rm -rf fresh; "
        "rmdir sub 2>/dev/null && plant sub; "
        "for d in */; do mv \"$d\" \"${d%%/}.moved\" && echo moved $d; done; "
        "mv sub/.git sub/.git.old && plant sub; true" % EXCHANGE)
    r = run(s, runner, s.ws, script, extra=supervise)
    unconfined_git_status(s, sub)
    assert not os.path.exists(marker), ("the planted command ran", r)
    assert r.rc == 0, r
    assert "planted sub" not in r.out and "exchanged" not in r.out and "moved" not in r.out, r
    assert "Device or resource busy" in r.err, r
    assert os.stat(sub).st_ino == ino and not os.path.exists(sub + ".old"), r
    assert git(s, sub, "log", "--oneline").count("\n") == 1
    assert listing(s.ws) == names, r


@matrix(runner=BWRAP, supervise=EXEC_SUPERVISE)
def test_every_level_above_a_protected_path_holds(s, runner, supervise):
    """--protect a file three directories down: moving any of its ancestors aside (parent,
    grandparent, great-grandparent) is refused, so the path keeps naming the protected file."""
    deep = os.path.join(s.ws, "a", "b", "c")
    os.makedirs(deep)
    target = os.path.join(deep, "f.txt")
    with open(target, "w") as f:
        f.write("mine\n")
    script = ("for d in a/b/c a/b a; do mv $d $d.old && mkdir -p a/b/c && echo evil > a/b/c/f.txt && "
              "echo replaced $d; done; echo evil > a/b/c/f.txt; true")
    names = listing(s.ws)
    r = run(s, runner, s.ws, script, extra=list(supervise) + ["--protect", target])
    assert r.rc == 0 and "replaced" not in r.out, r
    assert read(target) == b"mine\n", r
    assert listing(s.ws) == names, r
    # The ancestors are in the record, pinned (writable inside: files can still be made there).
    r = run(s, runner, s.ws, "echo ok > a/b/new.txt && cat a/b/new.txt", extra=list(supervise) +
            ["--protect", target])
    assert r.rc == 0 and r.out == "ok\n", r
    es = {e["path"]: e for e in r.rec("confinement")["protectedPaths"]}
    for p in ("a", "a/b", "a/b/c"):
        e = es[os.path.join(s.ws, p)]
        assert e["what"] == "ancestor" and e["enforced"] == "mount-point", e


@matrix(runner=BWRAP, supervise=EXEC_SUPERVISE)
def test_own_config_ancestor_moved_aside_with_the_root_at_home(s, runner, supervise):
    """--root $HOME (a fake home this test makes): ~/.config, above dsh-confine's own config, cannot
    be moved aside and replaced by one holding a planted config for the next run."""
    h, env = fake_home(s)
    cfg = os.path.join(h, ".config", "dsh-confine", "config.json")
    names = listing(h)
    ino = os.stat(os.path.join(h, ".config")).st_ino
    script = ("mv ~/.config ~/.config.old && mkdir -p ~/.config/dsh-confine && "
              "echo '{\"mode\": \"danger-full-access\"}' > ~/.config/dsh-confine/config.json && echo planted; "
              "mkdir -p ~/fresh/dsh-confine && echo '{\"mode\": \"danger-full-access\"}' > "
              "~/fresh/dsh-confine/config.json && %s ~/fresh ~/.config && echo exchanged; rm -rf ~/fresh; true"
              % EXCHANGE)
    r = run(s, runner, h, script, extra=supervise, env=env)
    assert r.rc == 0 and "planted" not in r.out and "exchanged" not in r.out, r
    assert read(cfg) == b"{}\n" and os.stat(os.path.join(h, ".config")).st_ino == ino, r
    assert listing(h) == names, r


@matrix(runner=BWRAP, supervise=EXEC_SUPERVISE)
def test_submodule_git_dir_grandparent_moved_aside(s, runner, supervise):
    """A submodule's git directory lies two levels below the pinned .git (.git/modules/sub): moving
    .git/modules aside and planting a fresh one that sub/.git points into is refused."""
    src = os.path.join(s.outside, "subsrc")
    make_repo(s, src)
    make_repo(s, s.ws)
    git(s, s.ws, "submodule", "add", "-q", "file://" + src, "sub")
    git(s, s.ws, "commit", "-q", "-m", "sub")
    marker = os.path.join(s.outside, "fsmonitor-ran")
    script = planting(marker) + (
        "mv .git/modules .git/modules.old && mkdir .git/modules && "
        "plant_gitdir .git/modules.old/sub .git/modules/sub; "
        "mv .git/modules/sub .git/modules/sub.old && plant_gitdir .git/modules/sub.old .git/modules/sub; true")
    r = run(s, runner, s.ws, script, extra=supervise)
    unconfined_git_status(s, os.path.join(s.ws, "sub"))
    assert not os.path.exists(marker), ("the planted command ran", r)
    assert r.rc == 0 and "planted" not in r.out, r
    assert not os.path.exists(os.path.join(s.ws, ".git/modules.old")), r


HOOK = "#!/bin/sh\necho hook-ran >> \"$(git rev-parse --git-common-dir)/../hook.log\"\n"


@matrix(runner=BWRAP, supervise=EXEC_SUPERVISE)
def test_git_keeps_working_under_the_pins(s, runner, supervise):
    """Ten nested repositories, one with a hook and a core.hooksPath, a submodule: clone, commit,
    branch, rebase, stash, worktree add, gc and submodule update all work with every ancestor
    pinned, and the hooks run."""
    src = os.path.join(s.outside, "subsrc")
    make_repo(s, src)
    for i in range(10):
        make_repo(s, os.path.join(s.ws, "r%d" % i))
    repo = os.path.join(s.ws, "r0")
    os.makedirs(os.path.join(repo, ".githooks"))
    with open(os.path.join(repo, ".githooks", "post-commit"), "w") as f:
        f.write(HOOK)
    os.chmod(os.path.join(repo, ".githooks", "post-commit"), 0o755)
    git(s, repo, "config", "core.hooksPath", ".githooks")
    git(s, repo, "submodule", "add", "-q", "file://" + src, "sub")
    git(s, repo, "commit", "-q", "-m", "sub")
    names = listing(s.outside)
    log = os.path.join(repo, "hook.log")
    ran = read(log).count(b"hook-ran")
    script = ("set -e; cd r0; echo two >> a.txt; git commit -q -am two; git branch b1; git checkout -q b1; "
              "echo three >> a.txt; git commit -q -am three; git checkout -q main; echo dirty >> a.txt; "
              "git stash -q; git stash pop -q; git checkout -q -- a.txt; git checkout -q b1; git rebase -q main; "
              "git gc -q; git worktree add -q ../wt -b b2; git -C ../wt commit -q --allow-empty -m wt; "
              "git -c protocol.file.allow=always submodule update -q; "
              "git clone -q ../r1 ../clone; git -C ../clone commit -q --allow-empty -m c; "
              "git log --oneline | wc -l")
    r = run(s, runner, s.ws, script, extra=supervise)
    assert r.rc == 0 and r.out.strip() == "4", r
    assert read(log).count(b"hook-ran") == ran + 2, r
    assert listing(s.outside) == names, r


# git (2.39) takes such a top for a bare repository without a work tree: its core.pager runs at the
# next `git log` in a terminal there (core.fsmonitor would need a work tree).
BARE = ("mv {top}/.git/HEAD {top}/.git/HEAD.moved; cp -a {top}/.git/objects {top}/.git/refs {top}/; "
        "echo 'ref: refs/heads/main' > {top}/HEAD; printf '[core]\\n\\tpager = touch %s\\n' > {top}/config")

# name: (set-up before the run, the command, where the next unconfined git runs, what it runs)
ABSENT = {
    # git takes config and hooks/ from the common dir a commondir names.
    "commondir": (None, "cp -a .git evil && rm -f evil/commondir && git --git-dir=evil config core.fsmonitor "
                        "'touch %s' && echo ../evil > .git/commondir", ".", "status"),
    # A repository made without hooks/ (git init --template=, some clones).
    "hooks": (lambda s: __import__("shutil").rmtree(os.path.join(s.ws, ".git", "hooks")),
              "mkdir .git/hooks && printf '#!/bin/sh\\ntouch %s\\n' > .git/hooks/pre-commit && "
              "chmod +x .git/hooks/pre-commit", ".", "commit"),
    # read once the config turns extensions.worktreeConfig on (the config itself is bound read-only).
    "config-worktree": (lambda s: (git(s, s.ws, "config", "core.repositoryformatversion", "1"),
                                   git(s, s.ws, "config", "extensions.worktreeConfig", "true")),
                        "git config --worktree core.fsmonitor 'touch %s'", ".", "status"),
    # .git/HEAD moved aside and the top made a bare repository's layout with a config of the command's.
    "bare-root": (None, BARE.format(top="."), ".", "log"),
    "bare-nested": (lambda s: make_repo(s, os.path.join(s.ws, "sub")), BARE.format(top="sub"), "sub", "log"),
}


@matrix(runner=BWRAP, attack=tuple(ABSENT), supervise=EXEC_SUPERVISE)
def test_absent_name_created(s, runner, attack, supervise):
    """A protected name that does not exist when the run starts (nothing can be mounted there without
    a file on the host) and that the command creates is renamed aside when the run ends, in both
    modes: the user's next ordinary git command runs nothing of the command's."""
    make_repo(s, s.ws)
    setup, script, where, then = ABSENT[attack]
    if setup:
        setup(s)
    marker = os.path.join(s.outside, "planted-ran")
    r = run(s, runner, s.ws, script % marker, extra=supervise)
    cwd = os.path.join(s.ws, where)
    e = s.env()
    e.update(GIT_ENV)
    e["GIT_CONFIG_GLOBAL"] = os.devnull
    if then == "status":
        unconfined_git_status(s, cwd)
    elif then == "log":
        # In a terminal, as a person would run it (git starts its pager only there).
        for k in ("GIT_PAGER", "PAGER"):
            e.pop(k, None)
        subprocess.run(["script", "-qc", "git log", "/dev/null"], cwd=cwd, env=e, stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
    else:
        subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "next"], cwd=cwd, env=e,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
    assert not os.path.exists(marker), ("the planted command ran", r)
    # In both modes: the run fails with the integrity status and record (issue 37).
    assert r.rc == 123 and "dsh-confine-quarantine" in r.err, r
    q = r.rec("integrity")["quarantined"]
    assert q and all(e["movedTo"] and os.path.lexists(e["movedTo"]) and not os.path.lexists(e["path"])
                     for e in q), r
    if supervise:
        assert r.rec("result")["quarantined"] == q, r
        q = r.rec("result")["quarantined"]
        assert q and all(e["movedTo"] and os.path.lexists(e["movedTo"]) and not os.path.lexists(e["path"])
                         for e in q), r


def test_a_quarantine_the_command_blocked_is_named_as_not_moved(s):
    # A command that reads the report learns the run's id, and so the quarantine name of a
    # protected name it creates: it can take that name first, and the rename aside fails. The run
    # still fails with the integrity status, and stderr says the name is where it was (it used to
    # say every name was renamed).
    need_runner("bwrap")
    make_repo(s, s.ws)
    report = os.path.join(s.outside, "report.jsonl")
    script = ("run=$(sed -n '1s/.*\"run\":\"\\([0-9a-f]*\\)\".*/\\1/p' %s); "
              "echo ../evil > .git/commondir; mkdir .git/commondir.dsh-confine-quarantine-$run; echo $run") % report
    r = subprocess.run([DSH, "--report-file", report, "--mode", "workspace-write", "--root", s.ws, "--runner",
                        "bwrap", "--supervise", "--", "sh", "-c", script], cwd=s.ws, env=s.env(),
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    run_id = r.stdout.decode().strip()
    recs = [json.loads(l) for l in open(report)]
    q = [x for x in recs if x["type"] == "integrity"][0]["quarantined"]
    path = os.path.join(os.path.realpath(s.ws), ".git/commondir")
    assert run_id and q == [{"path": path, "movedTo": None}], (q, r)
    assert r.returncode == 123, r
    err = r.stderr.decode()
    assert "could not be moved aside" in err and path in err and "was renamed" not in err, err
    os.unlink(path)  # nothing for the test's own git to read


def test_a_root_below_a_bare_repository_of_any_name_is_refused(s):
    # A root below a git directory named .git was refused (issue 37); one below a bare repository
    # of another name (`--writable ~/bare.git/hooks`) was not, and the command wrote the hooks the
    # next push to it runs. git's own test (HEAD, objects/, refs/) on each directory above.
    bare = os.path.join(s.outside, "project.git")
    subprocess.run(["git", "init", "-q", "--bare", bare], check=True)
    hook = os.path.join(bare, "hooks", "post-receive")
    for runner in ("bwrap", "landlock"):
        need_runner(runner)
        r = dsh(["--runner", runner, "--mode", "workspace-write", "--root", s.ws, "--writable",
                 os.path.join(bare, "hooks"), "--", "sh", "-c", "echo planted > %s" % hook], s)
        assert r.rc == 125 and r.rec("error")["code"] == "UNSAFE_STATE", (runner, r)
        assert "is inside the git directory %s" % bare in r.err, r
        assert not os.path.exists(hook), r


def test_bind_destination_reached_through_a_planted_link(s):
    """bwrap before 0.12 follows a symlink on the way to a bind's destination and makes what is
    missing there, on the host. A bwrap wrapper (standing for anything running beside the run)
    swaps a nested repository's directory for a link to another directory once the launcher has
    opened what it protects: the run is refused before anything of the command runs (a root
    caller's stage finds another inode; an unprivileged caller's finds bwrap's bind elsewhere)."""
    need_runner("bwrap")
    sub = os.path.join(s.ws, "sub")
    make_repo(s, sub)
    hooks = os.path.join(sub, ".git", "hooks")
    # Inside the root, where bwrap's new root is writable (outside every root it is read-only there).
    elsewhere = os.path.join(s.ws, "elsewhere")
    os.makedirs(elsewhere)
    stub = s.script("linking-bwrap", "#!/bin/sh\nfor a; do last=$a; done\n"
                    "held() { for f in /proc/$PPID/fd/*; do [ \"$(readlink \"$f\")\" = '%s' ] && return 0; done; "
                    "return 1; }\n"
                    "if [ \"$last\" != __dsh_confine_probe_v1 ]; then\n"
                    "  i=0; until held; do i=$((i+1)); [ $i -lt 2000 ] || exit 8; sleep 0.005; done\n"
                    "  mv '%s' '%s.real' && ln -s elsewhere '%s' || exit 9\nfi\n"
                    "exec /usr/bin/bwrap \"$@\"\n" % (hooks, sub, sub, sub))
    # bwrapPath only from a sealed config (issue 37): root's, in /etc/dsh-confine (skipped as a user).
    cfg = s.sealed_config({"bwrapPath": stub})
    cache = s.p("base", "cache")
    os.makedirs(cache, mode=0o700, exist_ok=True)
    names = listing(elsewhere)
    r = run(s, "bwrap", s.ws, "touch ran", extra=["--config", cfg],
            env={"XDG_RUNTIME_DIR": None, "XDG_CACHE_HOME": cache})
    assert r.rc == 125 and not os.path.exists(os.path.join(s.ws, "ran")), r
    assert ("%s was replaced after dsh-confine opened it" % sub in r.err or
            "%s is not the directory or file dsh-confine opened" % sub in r.err), r
    assert listing(elsewhere) == names, r
    # The link stands where the protected directory was, at a protected path's place: renamed aside
    # once the run ended, like a name the command created.
    assert not os.path.lexists(sub), r
    assert [n for n in os.listdir(s.ws) if n.startswith("sub.dsh-confine-quarantine-")], r



@matrix(runner=("bwrap", "landlock"), supervise=EXEC_SUPERVISE)
def test_a_root_that_is_a_git_directory_keeps_its_hooks_and_config(s, runner, supervise):
    """A bare repository, or a .git named as the root, is a git directory: its hooks/ and config are
    what the next git run follows (an attack pass wrote both under --root ~/bare.git). bwrap keeps
    them read-only; Landlock, which cannot, refuses the run; a root inside a .git is refused."""
    bare = s.p("base", "bare.git")
    git(s, s.base, "init", "-q", "--bare", bare)
    work = s.p("base", "work")
    git(s, s.base, "init", "-q", work)
    for root in (bare, os.path.join(work, ".git")):
        before = {n: read(os.path.join(root, n)) for n in ("config",)}
        r = run(s, runner, root, "printf '#!/bin/sh\\ntouch %s/ran\\n' > hooks/post-update; chmod +x hooks/post-update; "
                "echo '[core] fsmonitor = touch %s/ran' >> config" % (s.base, s.base), extra=supervise)
        if runner == "landlock":
            assert r.rc == 125 and r.rec("error")["code"] == "PROTECTION_UNAVAILABLE", (root, r)
        else:
            assert r.rc != 0 and "Read-only file system" in r.err, (root, r)
        assert not os.path.exists(os.path.join(root, "hooks", "post-update")), root
        assert {n: read(os.path.join(root, n)) for n in ("config",)} == before, root
    inside = os.path.join(work, ".git", "hooks")
    r = run(s, runner, inside, "true", extra=supervise)
    assert r.rc == 125 and "inside the git directory" in r.err, r

if __name__ == "__main__":
    main()
