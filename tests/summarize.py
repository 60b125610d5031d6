#!/usr/bin/env python3
"""Adds up what every meson test run really checked, from meson's testlog.json files.

TAP output counts each `ok` / `not ok` / `# SKIP` line; Catch2's JUnit XML counts each
test case (and section); any other test counts once by its result. A test whose
runner failed without saying why counts as failed. Prints the ten slowest tests,
the skipped and failed names, then one last line: `N passed, N failed, N skipped`.
"""
import json
import re
import sys
import xml.etree.ElementTree as ET

TAP = re.compile(r"^(not ok|ok)\b[^#]*(#\s*(SKIP|TODO)\b(.*))?", re.IGNORECASE)


def count(entry):
    out = entry.get("stdout") or ""
    name = entry["name"]
    res = entry["result"]
    p = f = k = 0
    notes = []
    if "<testsuites" in out:
        # The first report only: a run killed mid-way (meson's timeout sends SIGTERM to the
        # group) can have forked test children print theirs after it, or leave it unclosed.
        start = out.index("<testsuites")
        end = out.find("</testsuites>", start)
        try:
            cases = list(ET.fromstring(out[start:end + len("</testsuites>")]).iter("testcase")) if end >= 0 else None
        except ET.ParseError:
            cases = None
        if cases is None:
            cases = []
            f += 1
            notes.append("FAILED %s: its JUnit report is cut off or unreadable (meson result %s)" % (name, res))
        for tc in cases:
            label = "%s: %s" % (name, tc.get("name"))
            if tc.find("failure") is not None or tc.find("error") is not None:
                f += 1
                notes.append("FAILED " + label)
            elif tc.find("skipped") is not None:
                k += 1
                notes.append("SKIPPED " + label)
            else:
                p += 1
    else:
        plan_skip = re.search(r"^1\.\.0\s*#\s*SKIP(.*)$", out, re.MULTILINE)
        lines = out.splitlines()
        for i, line in enumerate(lines):
            m = TAP.match(line)
            if not m:
                continue
            if m.group(1).lower() == "not ok":
                f += 1
                notes.append("FAILED %s: %s%s" % (name, line, why(lines[i + 1:])))
            elif m.group(3) and m.group(3).upper() == "SKIP":
                k += 1
                notes.append("SKIPPED %s: %s" % (name, line))
            else:
                p += 1
        if plan_skip and p + f + k == 0:
            k += 1
            notes.append("SKIPPED %s: whole file:%s" % (name, plan_skip.group(1)))
    if p + f + k == 0:
        if res == "OK":
            p = 1
        elif res == "SKIP":
            k = 1
            notes.append("SKIPPED " + name)
        else:
            f = 1
    # The runner's own verdict wins over what it printed: a crash after
    # printing `ok` lines, a timeout, or a non-zero exit is a failure.
    if res not in ("OK", "SKIP", "EXPECTEDFAIL") and f == 0:
        f = 1
        notes.append("FAILED %s: meson result %s" % (name, res))
    return p, f, k, notes


def why(after):
    """The last line of the traceback a harness prints (as `# ` comments) after a `not ok`:
    the assertion and its values, so that a failure seen only in this summary (CI shows its
    tail) says what went wrong."""
    last = ""
    for line in after:
        if TAP.match(line) or not line.startswith("# "):
            break
        text = line[2:].strip()
        if text and not re.match(r"^\w+: [\d.]+ s$", text):  # not the harness's timing line
            last = text
    return ("\n    why: " + last[:700]) if last else ""


def slowest(paths, n=10):
    """The n longest meson tests of these logs, for the next regression to be visible."""
    rows = []
    for path in paths:
        try:
            for line in open(path):
                if line.strip():
                    e = json.loads(line)
                    rows.append((e.get("duration", 0.0), path.split("/")[0], e["name"]))
        except OSError:
            pass
    rows.sort(reverse=True)
    print("slowest tests:")
    for d, where, name in rows[:n]:
        print("  %7.1f s  %s  %s" % (d, where, name))


def main(paths):
    tp = tf = tk = 0
    failed = []
    slowest(paths)
    for path in paths:
        try:
            lines = open(path).read().splitlines()
        except OSError as e:
            failed.append("FAILED %s: no test log (its stage did not set up or build)" % path)
            tf += 1
            continue
        for line in lines:
            if not line.strip():
                continue
            p, f, k, notes = count(json.loads(line))
            tp, tf, tk = tp + p, tf + f, tk + k
            for n in notes:
                # Failures last, next to the count: what a reader of the tail sees.
                failed.append(n) if n.startswith("FAILED") else print(n)
    for n in failed:
        print(n)
    print("%d passed, %d failed, %d skipped" % (tp, tf, tk))
    return 1 if tf else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
