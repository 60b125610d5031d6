#!/usr/bin/env python3
"""`meson install --destdir` puts the binary, the man page and the completions
in the usual places, and lists everything it produced.

    install_tree.py MESON BUILD_DIR
"""
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import Tap  # noqa: E402


def fish_reads():
    """The directories fish loads completions from in a login without XDG_DATA_DIRS (a console, ssh),
    with nothing of the user's: None when fish is not installed."""
    if not shutil.which("fish"):
        return None
    home = tempfile.mkdtemp(prefix="dsh-fish-home-", dir="/var/tmp")
    try:
        env = {k: v for k, v in os.environ.items() if k not in ("XDG_DATA_DIRS", "XDG_CONFIG_HOME", "XDG_DATA_HOME")}
        env["HOME"] = home
        r = subprocess.run(["fish", "-c", "string join \\n -- $fish_complete_path"], capture_output=True,
                           text=True, env=env, timeout=60)
        return [d for d in r.stdout.splitlines() if d and not d.startswith(home)]
    finally:
        shutil.rmtree(home, ignore_errors=True)


def fish_completion_path(prefix, under):
    """Where the fish file must land: under the system prefixes, a directory fish itself reads (Debian 12's
    fish reads /usr/share/fish/vendor_completions.d, not /usr/local/share/..., unless XDG_DATA_DIRS says so);
    under any other prefix, datadir's (the README tells fish to look there)."""
    if prefix in ("/usr", "/usr/local"):
        dirs = fish_reads()
        vendor = [d for d in dirs or () if d.endswith("/vendor_completions.d")]
        d = vendor[0] if vendor else "/usr/share/fish/vendor_completions.d"
        return os.path.join(d, "dsh-confine.fish").lstrip("/")
    return under("datadir", "fish", "vendor_completions.d", "dsh-confine.fish")


def main():
    meson, build = sys.argv[1], sys.argv[2]
    t = Tap()
    opts = {o["name"]: o["value"] for o in json.loads(subprocess.run(
        [meson, "introspect", "--buildoptions", build], capture_output=True, text=True, check=True).stdout)}
    prefix = opts["prefix"]

    def under(key, *parts):
        d = opts[key]
        return os.path.join(d if os.path.isabs(d) else os.path.join(prefix, d), *parts).lstrip("/")

    dest = tempfile.mkdtemp(prefix="dsh-install-", dir="/var/tmp")
    files = []
    try:
        def install():
            r = subprocess.run([meson, "install", "-C", build, "--no-rebuild", "--destdir", dest, "--quiet"],
                               capture_output=True, text=True, timeout=120)
            assert r.returncode == 0, r.stdout + r.stderr
            for root, _, names in os.walk(dest):
                for n in names:
                    files.append(os.path.relpath(os.path.join(root, n), dest))
            files.sort()
            for f in files:
                t.diag("%8d  /%s" % (os.path.getsize(os.path.join(dest, f)), f))
        t.case("meson install --destdir succeeds", install)

        expected = {under("bindir", "dsh-confine"): "binary"}
        if opts.get("completions", True):
            expected[under("datadir", "bash-completion", "completions", "dsh-confine")] = "bash completion"
            expected[under("datadir", "zsh", "site-functions", "_dsh-confine")] = "zsh completion"
            expected[fish_completion_path(prefix, under)] = "fish completion"
        for ex in ("python/run_confined.py", "node/run-confined.js", "shell/run-confined.sh"):
            expected[under("datadir", "doc", "dsh-confine", "examples", os.path.basename(ex))] = "example " + ex
        expected[under("datadir", "dsh-confine", "report.schema.json")] = "report schema"
        if opts.get("man") != "disabled" and shutil.which("scdoc"):
            expected[under("mandir", "man1", "dsh-confine.1")] = "man page"

        def expected_files():
            missing = ["%s (/%s)" % (what, p) for p, what in expected.items() if p not in files]
            assert not missing, "not installed: %s\ninstalled: %s" % (missing, files)
        t.case("binary, man page, report schema, completions and examples are in the usual places", expected_files)

        def binary_runs():
            b = os.path.join(dest, under("bindir", "dsh-confine"))
            assert os.stat(b).st_mode & stat.S_IXUSR, "not executable"
            r = subprocess.run([b, "--version"], capture_output=True, text=True)
            assert r.returncode == 0 and r.stdout.startswith("dsh-confine "), r
        t.case("the installed binary runs", binary_runs)

        def no_test_programs():
            bad = [f for f in files if any(x in f for x in ("unit-tests", "static-probe", "dsh-confine-static",
                                                           "sysfault", "tiocsti"))]
            assert not bad, "test programs installed: %s" % bad
        t.case("no test program is installed", no_test_programs)

        def man_page_is_roff():
            p = under("mandir", "man1", "dsh-confine.1")
            if p not in files:
                t.skip("the man page is not built (scdoc missing or -Dman=disabled)")
            head = open(os.path.join(dest, p), encoding="utf-8").read(4000)
            assert ".TH" in head and "dsh-confine" in head, head[:200]
        t.case("the installed man page is roff", man_page_is_roff)
    finally:
        shutil.rmtree(dest, ignore_errors=True)
    sys.exit(t.done())


if __name__ == "__main__":
    main()
