#!/usr/bin/env python3
"""The man page renders without a single groff warning, and names every option
and subcommand that --help declares.

    man_check.py BUILT_PAGE DSH_CONFINE
"""
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from helpinfo import describe, long_options, subcommands  # noqa: E402
from tap import Tap  # noqa: E402


def main():
    page, binary = sys.argv[1], sys.argv[2]
    t = Tap()
    env = dict(os.environ, LC_ALL="C.UTF-8", MANWIDTH="80")

    def man_renders():
        if not shutil.which("man"):
            t.skip("man (man-db) is not installed")
        r = subprocess.run(["man", "--warnings=w", "-l", page], capture_output=True, text=True, env=env)
        assert r.returncode == 0, r
        assert r.stderr == "", "man -l printed warnings:\n" + r.stderr
        assert "EXIT STATUS" in r.stdout and "REPORT" in r.stdout, r.stdout[:500]
    t.case("man --warnings=w -l renders with no warning", man_renders)

    def groff_ww():
        if not shutil.which("groff"):
            t.skip("groff is not installed")
        # -k: preconv (the page is UTF-8); -ww: every warning; -z: no output.
        r = subprocess.run(["groff", "-k", "-ww", "-z", "-man", "-Tutf8", page], capture_output=True, text=True,
                           env=env)
        assert r.returncode == 0 and r.stderr == "", "groff -ww: rc=%d\n%s" % (r.returncode, r.stderr)
    t.case("groff -ww -man reports nothing", groff_ww)

    src = open(page, encoding="utf-8").read()
    # Turn roff font escapes and hyphen escapes back into plain text.
    plain = re.sub(r"\\f[BIRP]", "", src).replace("\\-", "-").replace("\\(em", "—")
    helps = describe(binary)

    def every_option():
        missing = []
        for sub, text in helps.items():
            for opt in long_options(text):
                if opt not in plain:
                    missing.append((sub or "(top)", opt))
        assert not missing, "options in --help but not in the man page: %s" % missing
    t.case("every option of --help is in the man page", every_option)

    def every_subcommand():
        missing = []
        for sub, text in helps.items():
            for s in subcommands(text):
                if not re.search(r"(^|\s)" + re.escape(s) + r"(\s|$)", plain):
                    missing.append(s)
        assert not missing, "subcommands missing from the man page: %s" % missing
    t.case("every subcommand is in the man page", every_subcommand)

    def sections_present():
        for name in ("NAME", "SYNOPSIS", "DESCRIPTION", "MODES", "RUNNERS", "OPTIONS", "EXIT STATUS", "REPORT",
                     "ENVIRONMENT", "FILES", "EXAMPLES"):
            assert re.search(r'^\.SH "?%s"?\s*$' % name, src, re.M), "section %s missing" % name
    t.case("the required sections are there", sections_present)
    sys.exit(t.done())


if __name__ == "__main__":
    main()
