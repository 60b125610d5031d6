#!/usr/bin/env python3
"""The protected-path set-up's cost with ancestor pins (issue 37): a workspace-write run of `true`
under bwrap on a root holding 10 nested repositories (each with hooks/, config and .vscode), against
the same root with no repository in it (no carve-out at all), interleaved, median of N each.

    bench/pins.py BINARY [BINARY_B] [N]

With a second binary (the one before the change), that binary's runs on the repositories are
measured too, interleaved with the others, so the difference is the change's alone. Wall time from
fork to exit, as a caller sees it; the machine's load shows in the spread (printed as p25..p75)."""
import os
import statistics
import subprocess
import sys
import tempfile
import time


def tree(base, repos):
    root = os.path.join(base, "with" if repos else "without")
    os.makedirs(root)
    env = dict(os.environ, GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
    for i in range(10):
        d = os.path.join(root, "r%d" % i)
        os.makedirs(d)
        with open(os.path.join(d, "a.txt"), "w") as f:
            f.write("one\n")
        if repos:
            subprocess.run(["git", "init", "-q", d], check=True, env=env)
            os.makedirs(os.path.join(d, ".vscode"))
    return root


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    a = sys.argv[1]
    b = sys.argv[2] if len(sys.argv) > 2 and not sys.argv[2].isdigit() else None
    n = int(sys.argv[-1]) if sys.argv[-1].isdigit() else 200
    base = tempfile.mkdtemp(prefix="dsh-bench-pins-", dir="/var/tmp")
    roots = {"repos": tree(base, True), "none": tree(base, False)}
    cases = [("new, 10 repositories", a, roots["repos"]), ("new, no repository", a, roots["none"])]
    if b:
        cases.append(("old, 10 repositories", b, roots["repos"]))
    times = {c[0]: [] for c in cases}
    for _ in range(n):
        for name, binary, root in cases:
            t = time.perf_counter()
            r = subprocess.run([binary, "--mode", "workspace-write", "--runner", "bwrap", "--root", root, "--",
                                "true"], cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            times[name].append(time.perf_counter() - t)
            assert r.returncode == 0, (name, r.returncode)
    for name, ts in times.items():
        q = statistics.quantiles(ts, n=4)
        print("%-24s median %.2f ms  (p25 %.2f .. p75 %.2f, n=%d)" % (name, statistics.median(ts) * 1e3, q[0] * 1e3,
                                                                   q[2] * 1e3, len(ts)))
    subprocess.run(["rm", "-rf", base])
    return 0


if __name__ == "__main__":
    sys.exit(main())
