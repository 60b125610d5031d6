#!/usr/bin/env python3
"""Times the rows of bench/run.sh interleaved: each round runs every row once,
in a fresh random order, so a machine whose load drifts during the run (a
shared host, other builds) slows every row alike instead of whichever rows
hyperfine happened to be running at the time. Writes hyperfine's JSON shape
(results[]: command_name, command, times, min, mean, median, user, system),
which bench/report.py reads.

    bench/interleave.py CMDS OUT.json --runs N --warmup N

CMDS holds pairs of lines: a row's name, then its command line (split like a
shell would, no shell run: hyperfine -N's rules). A row whose command fails
stops the run, as hyperfine does.
"""
import argparse
import json
import os
import random
import shlex
import statistics
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmds")
    ap.add_argument("out")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    a = ap.parse_args()
    lines = open(a.cmds).read().splitlines()
    rows = [(lines[i], lines[i + 1], shlex.split(lines[i + 1])) for i in range(0, len(lines) - 1, 2)]
    devnull = os.open(os.devnull, os.O_RDWR)
    fa = [(os.POSIX_SPAWN_DUP2, devnull, 0), (os.POSIX_SPAWN_DUP2, devnull, 1), (os.POSIX_SPAWN_DUP2, devnull, 2)]
    times = {name: [] for name, _c, _v in rows}
    user = {name: [] for name, _c, _v in rows}
    system = {name: [] for name, _c, _v in rows}
    rng = random.Random(14)
    for rnd in range(a.warmup + a.runs):
        order = list(rows)
        rng.shuffle(order)
        for name, cmd, argv in order:
            t0 = time.perf_counter_ns()
            pid = os.posix_spawnp(argv[0], argv, os.environ, file_actions=fa)
            _pid, status, ru = os.wait4(pid, 0)
            t1 = time.perf_counter_ns()
            if os.waitstatus_to_exitcode(status) != 0:
                sys.exit("bench/interleave.py: %s exited with %d: %s" % (name, os.waitstatus_to_exitcode(status), cmd))
            if rnd >= a.warmup:
                times[name].append((t1 - t0) / 1e9)
                user[name].append(ru.ru_utime)
                system[name].append(ru.ru_stime)
    results = []
    for name, cmd, _v in rows:
        t = times[name]
        results.append({"command_name": name, "command": cmd, "times": t, "min": min(t), "max": max(t),
                        "mean": statistics.mean(t), "median": statistics.median(t),
                        "stddev": statistics.pstdev(t), "user": statistics.mean(user[name]),
                        "system": statistics.mean(system[name])})
    json.dump({"results": results, "interleaved": True}, open(a.out, "w"), indent=1)
    w = max(len(n) for n, _c, _v in rows)
    for r in results:
        print("%-*s  median %7.2f ms  min %7.2f ms  (%d runs)" % (w, r["command_name"], r["median"] * 1e3,
                                                               r["min"] * 1e3, len(r["times"])))


if __name__ == "__main__":
    main()
