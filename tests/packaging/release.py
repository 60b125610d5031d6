#!/usr/bin/env python3
"""Release artifacts (issue 20): `.ci/release` makes the source tarball, the
Debian package built from it and the static binary with their SHA-256 sums;
the package is lintian-clean and installs into an empty root (made here)
where the installed binary runs and confines a command.

    release.py SOURCE_ROOT

Needs dpkg-buildpackage and lintian (.ci/packages); root for the chroot run.
Prints TAP.
"""
import glob
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

from tap import Tap

src = sys.argv[1]
t = Tap()
work = tempfile.mkdtemp(prefix="dsh-release-", dir="/var/tmp")
out = os.path.join(work, "out")
made = {}


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def release():
    for tool in ("dpkg-buildpackage", "lintian", "git"):
        if not shutil.which(tool):
            t.skip("%s is not installed (.ci/packages)" % tool)
    if not os.path.isdir(os.path.join(src, ".git")):
        t.skip("the source is not a git checkout")
    r = run([os.path.join(src, ".ci", "release"), out], timeout=1500)
    assert r.returncode == 0, r.stderr[-4000:]
    made["deb"] = glob.glob(os.path.join(out, "dsh-confine_*.deb"))[0]
    made["tar"] = glob.glob(os.path.join(out, "dsh-confine-*.tar.xz"))[0]
    made["bin"] = glob.glob(os.path.join(out, "dsh-confine-*-linux-*"))[0]
    sums = run(["sha256sum", "-c", "SHA256SUMS"], cwd=out)
    assert sums.returncode == 0 and sums.stdout.count(": OK") == 3, sums


def need_release():
    if not made:
        t.skip("no release was made")


def tarball():
    need_release()
    with tarfile.open(made["tar"]) as tf:
        names = tf.getnames()
    top = os.path.basename(made["tar"])[: -len(".tar.xz")]
    for f in ("meson.build", "debian/control", "debian/rules", "src/main.cpp", "man/dsh-confine.1.scd",
              "README.md"):
        assert "%s/%s" % (top, f) in names, f
    assert not any("/build/" in n or n.endswith("/build") for n in names), "a build directory was packed"


def static_binary():
    need_release()
    r = run(["file", made["bin"]])
    assert "statically linked" in r.stdout and "ELF" in r.stdout, r.stdout
    r = run([made["bin"], "--version"])
    assert r.returncode == 0 and r.stdout.startswith("dsh-confine "), r


def lintian_clean():
    need_release()
    # Errors and warnings (lintian's default levels) fail; the overrides in
    # debian/dsh-confine.lintian-overrides carry their reasons.
    r = run(["lintian", "--fail-on", "error,warning", made["deb"]])
    assert r.returncode == 0, r.stdout + r.stderr


def installs_into_an_empty_root():
    need_release()
    if os.getuid() != 0:
        t.skip("chroot needs root")
    root = os.path.join(work, "root")
    for d in ("var/lib/dpkg/info", "var/lib/dpkg/updates", "var/lib/dpkg/triggers", "tmp"):
        os.makedirs(os.path.join(root, d))
    open(os.path.join(root, "var/lib/dpkg/status"), "w").close()
    r = run(["dpkg", "--root=" + root, "--log=/dev/null", "-i", made["deb"]])
    assert r.returncode == 0, r
    for f in ("usr/bin/dsh-confine", "usr/share/man/man1/dsh-confine.1.gz",
              "usr/share/bash-completion/completions/dsh-confine", "usr/share/zsh/site-functions/_dsh-confine",
              "usr/share/fish/vendor_completions.d/dsh-confine.fish", "usr/share/doc/dsh-confine/copyright"):
        assert os.path.exists(os.path.join(root, f)), f
    r = run(["chroot", root, "/usr/bin/dsh-confine", "--version"])
    assert r.returncode == 0 and r.stdout.startswith("dsh-confine "), r
    # The same write, bare and confined, inside the root that holds nothing
    # else: the bare one lands, the confined one (read-only) is refused.
    # (The session log's checks read /proc: a proc mount of the root's own,
    # removed again below.)
    setmode = ["/usr/bin/dsh-confine", "session", "set-mode"]
    os.makedirs(os.path.join(root, "proc"))
    assert run(["mount", "-t", "proc", "proc", os.path.join(root, "proc")]).returncode == 0
    try:
        r = run(["chroot", root] + setmode + ["/tmp/bare.jsonl", "read-only"])
        assert r.returncode == 0 and os.path.exists(os.path.join(root, "tmp/bare.jsonl")), r
        r = run(["chroot", root, "/usr/bin/dsh-confine", "--runner", "landlock", "--mode", "read-only", "--"] +
                setmode + ["/tmp/confined.jsonl", "read-only"])
        assert r.returncode == 125 and "Permission denied" in r.stderr, r
        assert not os.path.exists(os.path.join(root, "tmp/confined.jsonl")), r
    finally:
        run(["umount", os.path.join(root, "proc")])
    r = run(["dpkg", "--root=" + root, "--log=/dev/null", "-r", "dsh-confine"])
    assert r.returncode == 0 and not os.path.exists(os.path.join(root, "usr/bin/dsh-confine")), r


try:
    t.case("release: tarball, package and static binary made, SHA256SUMS verify", release)
    t.case("release: the tarball is the source tree, with debian/ and without build directories", tarball)
    t.case("release: the binary artifact is static and runs", static_binary)
    t.case("release: lintian finds no error or warning", lintian_clean)
    t.case("release: dpkg installs it into an empty root, where it runs and confines; dpkg removes it",
           installs_into_an_empty_root)
finally:
    shutil.rmtree(work, ignore_errors=True)
sys.exit(t.done())
