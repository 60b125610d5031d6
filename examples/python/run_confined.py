#!/usr/bin/env python3
"""Calling dsh-confine from Python.

run_confined() starts `dsh-confine --supervise --report-fd N -- COMMAND`,
hands it the write end of a pipe with pass_fds, reads the JSON-lines report
from the read end, and returns what happened:

    out = run_confined(["make", "test"], mode="workspace-write", root=repo)
    if out.error:            # nothing ran: out.error["code"], out.error["message"]
    elif out.denied:         # the sandbox stopped a write: ask for a wider mode?
    else:                    # out.exit_status is the command's own

`python3 run_confined.py --self-test` runs a short demonstration that checks
itself (it is part of dsh-confine's test suite). DSH_CONFINE names the binary.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading

DSH_CONFINE = os.environ.get("DSH_CONFINE", "dsh-confine")


class Outcome:
    def __init__(self, exit_status, stdout, stderr, records):
        self.exit_status = exit_status
        self.stdout, self.stderr = stdout, stderr
        self.records = records
        self.confinement = self._first("confinement")
        self.error = self._first("error")    # present: the command did not run (or could not start)
        self.result = self._first("result")  # --supervise: how it ended, classified by dsh-confine
        self.denied = bool(self.result and self.result["denied"])

    def _first(self, type_):
        return next((r for r in self.records if r.get("type") == type_), None)


def run_confined(argv, mode="read-only", root=None, options=(), input=None):
    read_end, write_end = os.pipe()
    cmd = [DSH_CONFINE, "--supervise", "--report-fd", str(write_end), "--mode", mode]
    if root:
        cmd += ["--root", root]
    cmd += list(options) + ["--"] + list(argv)
    chunks = []

    # Read the report while the command runs: dsh-confine holds the pipe until
    # it exits, and a reader that waited for stdout first could deadlock.
    def read_report():
        while True:
            data = os.read(read_end, 65536)
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=read_report, daemon=True)
    try:
        proc = subprocess.Popen(cmd, pass_fds=[write_end], stdin=subprocess.PIPE if input else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    finally:
        os.close(write_end)  # ours: only dsh-confine holds the write end now
    reader.start()
    stdout, stderr = proc.communicate(input)
    reader.join()
    os.close(read_end)
    records = [json.loads(line) for line in b"".join(chunks).decode().splitlines() if line.strip()]
    return Outcome(proc.returncode, stdout.decode(errors="replace"), stderr.decode(errors="replace"), records)


def self_test():
    ws = tempfile.mkdtemp(prefix="dsh-example-py-", dir="/var/tmp")
    failures = []

    def expect(cond, what, out):
        print(("ok     " if cond else "FAILED ") + what)
        if not cond:
            failures.append(what)
            print("       exit=%s records=%s stderr=%r" % (out.exit_status, out.records, out.stderr[-500:]))

    try:
        note = os.path.join(ws, "note.txt")
        script = "echo hello > " + note
        out = run_confined(["sh", "-c", script], mode="read-only", root=ws)
        if out.error and out.error["code"] == "SANDBOX_UNAVAILABLE":
            print("skipped: no sandbox usable here: " + out.error["message"])
            return 77
        expect(out.confinement is not None and out.denied and out.exit_status != 0,
               "read-only: the write is denied (result.denied)", out)
        expect(not os.path.exists(note), "read-only: nothing was written", out)

        # Acting on `denied`: this caller decides a workspace write is fine and retries once.
        if out.denied:
            out = run_confined(["sh", "-c", script], mode="workspace-write", root=ws)
        expect(out.exit_status == 0 and not out.denied, "workspace-write: the retry succeeds", out)
        expect(os.path.exists(note) and open(note).read() == "hello\n", "workspace-write: the file landed", out)

        out = run_confined(["sh", "-c", "exit 7"], root=ws)
        expect(out.exit_status == 7 and out.result["exitCode"] == 7 and not out.denied,
               "the command's own status comes through", out)

        out = run_confined(["no-such-command-dsh-example"], root=ws)
        expect(out.exit_status == 127 and out.error and out.error["code"] == "COMMAND_NOT_FOUND"
               and out.confinement is None, "a missing command is an error record, exit 127", out)

        out = run_confined(["sh", "-c", "echo permission denied >&2"], root=ws)
        expect(out.exit_status == 0 and not out.denied, "the words alone, with exit 0, are not a denial", out)
    finally:
        shutil.rmtree(ws, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(self_test())
    if not sys.argv[1:]:
        sys.exit("usage: run_confined.py [--self-test | COMMAND [ARG...]]")
    o = run_confined(sys.argv[1:], mode=os.environ.get("MODE", "read-only"))
    sys.stdout.write(o.stdout)
    sys.stderr.write(o.stderr)
    if o.error:
        print("dsh-confine did not run the command: %s" % o.error["message"], file=sys.stderr)
    elif o.denied:
        print("the sandbox denied a write under %s mode" % o.confinement["mode"], file=sys.stderr)
    sys.exit(o.exit_status)
