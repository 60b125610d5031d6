#!/usr/bin/env python3
"""Wine smoke tests for the Windows pair (dsh-confine.exe, dsh-confine-acl-run.exe).

NOT TESTING ENFORCEMENT. Wine does not enforce ACLs or restricted tokens: a
write the helper's token should refuse lands under Wine. So nothing here
claims confinement. What Wine can show honestly, and this checks with exact
texts and exit statuses: argument handling, --version, explain, the exit
status of a command passing through dsh-confine.exe and the helper, the
helper's argument validation, and the helper's private temp directory being
created for the run and removed after it.

    tests/cross/wine-smoke.py [BUILD_DIR]    (default: build-win in the source tree)

Builds BUILD_DIR with tests/cross/build-windows.sh first (nothing to do when
the meson test cross-windows has just run). Runs Wine (Debian's wine64) in a
throwaway WINEPREFIX under a temporary directory, removed at the end. Without Wine: a skip (77) for a
developer, a failure when DSH_CONFINE_MUST_WORK=1 (CI).
"""
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MUST_WORK = os.environ.get("DSH_CONFINE_MUST_WORK") == "1"
LABEL = "wine-smoke (not testing enforcement)"
failures = []


def say(line):
    print(f"{LABEL}: {line}", flush=True)


def unavailable(why):
    say(why)
    sys.exit(1 if MUST_WORK else 77)


def find_wine():
    for name in ("wine64", "wine"):
        p = shutil.which(name)
        if p:
            return p
    # Debian 12's wine64 without its recommended wine package has no
    # wrapper on PATH: the loader lives here.
    p = "/usr/lib/wine/wine64"
    return p if os.access(p, os.X_OK) else None


def find_wineserver(wine):
    for p in (shutil.which("wineserver"), os.path.join(os.path.dirname(wine), "wineserver"),
              "/usr/lib/wine/wineserver64", "/usr/lib/wine/wineserver"):
        if p and os.access(p, os.X_OK):
            return p
    return None


def winpath(unix):
    """How Wine names a Unix path: the Z: drive maps /."""
    return "Z:" + unix.replace("/", "\\")


def crlf(text):
    """The C runtime's text mode on stdout/stderr writes \\r\\n for \\n."""
    return text.replace("\n", "\r\n")


def project_version():
    with open(os.path.join(SRC, "meson.build")) as f:
        m = re.search(r"version:\s*'([^']+)'", f.read())
    return m.group(1)


def sid_from(data):
    d = hashlib.sha256(data).digest()
    mod = (1 << 30) - 1
    a = int.from_bytes(d[0:4], "little") % mod + 1
    b = int.from_bytes(d[4:8], "little") % mod + 1
    return f"S-1-4-{a}-{b}"


class Wine:
    def __init__(self, wine, top):
        self.wine = wine
        self.env = dict(os.environ)
        self.env.update({
            "WINEPREFIX": os.path.join(top, "prefix"),
            # Debian's Wine makes its server's socket dir with mkdtemp under
            # TMPDIR (else /tmp/wine-XXXXXX, left behind): kept in ours.
            "TMPDIR": top,
            "WINEDEBUG": "-all",
            # No Mono or Gecko download prompts; no window.
            "WINEDLLOVERRIDES": "mscoree,mshtml=",
        })
        self.env.pop("DISPLAY", None)
        self.env.pop("WAYLAND_DISPLAY", None)

    def run(self, argv, cwd, timeout=60):
        start = time.monotonic()
        try:
            return subprocess.run([self.wine] + argv, cwd=cwd, env=self.env, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
        finally:
            elapsed = time.monotonic() - start
            if elapsed > 5:
                say(f"slow: {argv[0]} took {elapsed:.1f} s")


def check(name, result, status, stdout=None, stderr=b""):
    """Exact exit status, stdout and stderr (bytes, or a compiled regex for stdout)."""
    problems = []
    if result.returncode != status:
        problems.append(f"exit status {result.returncode}, expected {status}")
    if stdout is not None:
        if hasattr(stdout, "fullmatch"):
            if not stdout.fullmatch(result.stdout):
                problems.append(f"stdout {result.stdout!r} does not match {stdout.pattern!r}")
        elif result.stdout != stdout:
            problems.append(f"stdout {result.stdout!r}, expected {stdout!r}")
    if stderr is not None and result.stderr != stderr:
        problems.append(f"stderr {result.stderr!r}, expected {stderr!r}")
    if problems:
        failures.append(name)
        say(f"not ok - {name}: " + "; ".join(problems))
    else:
        say(f"ok - {name}")
    return not problems


def explain_text(mode, cmd, root, temp, build):
    """explain's text for `explain --mode MODE -- cmd`, as plan_text (src/explain.cpp) prints it."""
    helper = build + "\\dsh-confine-acl-run.exe"

    def q(v, **kw):
        return json.dumps(v, separators=(",", ":"), **kw)
    lines = [
        f"command:     {q(cmd)} {q(['cmd'])}",
        f"mode:        {mode} (from --mode)",
        f"root:        {q(root)} (from current directory)",
    ]
    if mode == "workspace-write":
        lines += [f"writable:    {q(root)} (workspace)", f"             {q(temp)} (tmpdir, discarded at exit)"]
    else:
        lines += ["writable:    nothing"]
    lines += [
        "network:     host (from default)",
        "at exit:     processes the command leaves running are killed (job-object)",
        "config:      none found",
        "runner:      windows-acl (asked: auto from default), enforcement partial",
        "layer:       windows-acl (partial)",
        "gap:         everyone-writable-objects: the write-restricted token keeps Everyone and the logon SID as "
        "restricting SIDs (process start-up needs them), so any object whose ACL grants them write access stays "
        "writable",
        "gap:         hard-links: an NTFS hard link aliases one file object across the workspace and other paths",
        "gap:         fat-volumes: FAT and exFAT volumes carry no ACLs: writes there are not governed",
        "not covered: grandchild-stdio: no piped stdio for grandchildren of the confined command",
        "not covered: process-visibility: other processes stay visible",
        f"exec:        {q(helper)} " + q([helper, "--workspace", root, "--temp", temp, "--mode", mode, "--", "cmd"]),
        "(nothing was run)",
    ]
    return crlf("\n".join(lines) + "\n").encode()


def main():
    build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(SRC, "build-win"))
    exe = os.path.join(build, "dsh-confine.exe")
    helper_exe = os.path.join(build, "dsh-confine-acl-run.exe")
    wine = find_wine()
    if not wine:
        unavailable("wine64 not found (apt install wine64)")
    # Always through build-windows.sh: it builds a missing or stale pair
    # (nothing to do when cross-windows has just run) and skips or fails
    # without mingw-w64 as that test does.
    r = subprocess.run([os.path.join(SRC, "tests", "cross", "build-windows.sh"), build])
    if r.returncode != 0:
        say(f"build-windows.sh exited {r.returncode}")
        sys.exit(r.returncode)
    if not (os.path.isfile(exe) and os.path.isfile(helper_exe)):
        say(f"missing {exe} or {helper_exe}")
        sys.exit(1)
    wineserver = find_wineserver(wine)
    say(f"{wine} on {build}; Wine enforces no ACL and no restricted token, so no check here is about confinement")

    server_dirs = set(glob.glob("/tmp/wine-*"))
    top = tempfile.mkdtemp(prefix="dsh-wine-")
    w = Wine(wine, top)
    try:
        # One wineserver for the whole test (-p: it stays without clients),
        # and Wine's services started once by wineboot, both with their
        # output in a file: a server or service started by a checked run
        # would inherit its pipes and hold them open for seconds after the
        # run ends (and restart for the next run).
        os.makedirs(w.env["WINEPREFIX"])
        log_path = os.path.join(top, "wineboot.log")
        with open(log_path, "wb") as log:
            if wineserver:
                subprocess.run([wineserver, "-p"], env=w.env, timeout=60, stdout=log, stderr=log)
            try:
                boot = subprocess.run([w.wine, "wineboot", "-i"], cwd=top, env=w.env, stdin=subprocess.DEVNULL,
                                      stdout=log, stderr=log, timeout=240)
            except subprocess.TimeoutExpired:
                unavailable("wineboot did not finish in 240 s")
        if boot.returncode != 0:
            with open(log_path, "rb") as log:
                unavailable(f"wineboot exited {boot.returncode}: {log.read().decode(errors='replace').strip()}")
        run_checks(w, top, build)
    finally:
        if wineserver:
            subprocess.run([wineserver, "-k"], env=w.env, timeout=60,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            subprocess.run([wineserver, "-w"], env=w.env, timeout=60,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(top, ignore_errors=True)
    if os.path.exists(top):
        failures.append("prefix removed")
        say(f"not ok - the throwaway WINEPREFIX {top} was not removed")
    left = sorted(set(glob.glob("/tmp/wine-*")) - server_dirs)
    if left:
        failures.append("no wine dir left in /tmp")
        say(f"not ok - Wine left {left} in /tmp")
    if failures:
        say(f"{len(failures)} failed: {', '.join(failures)}")
        return 1
    say("all passed (not testing enforcement)")
    return 0


def run_checks(w, top, build_unix):
    exe = os.path.join(build_unix, "dsh-confine.exe")
    helper = os.path.join(build_unix, "dsh-confine-acl-run.exe")
    build = winpath(build_unix)
    ws_unix = os.path.join(top, "ws")
    tmp_unix = os.path.join(top, "tmp")
    os.makedirs(ws_unix)
    os.makedirs(tmp_unix)
    ws, tmp = winpath(ws_unix), winpath(tmp_unix)
    prefix = w.env["WINEPREFIX"]

    def dsh(*args):
        return w.run([exe] + list(args), cwd=ws_unix)

    def acl(*args):
        return w.run([helper] + list(args), cwd=ws_unix)

    def err(line):
        return crlf(line + "\n").encode("utf-8")

    # The user's temp dir as Windows reports it (GetTempPath), and where it
    # lies in the prefix.
    r = w.run(["cmd", "/c", "echo", "%TEMP%"], cwd=ws_unix)
    user_temp = r.stdout.decode().strip()
    m = re.fullmatch(r"C:\\users\\([^\\]+)\\Temp", user_temp)
    if not m:
        failures.append("user temp")
        say(f"not ok - %TEMP% is {user_temp!r}, not C:\\users\\<name>\\Temp")
        return
    user_temp_unix = os.path.join(prefix, "drive_c", "users", m.group(1), "Temp")

    # dsh-confine.exe: arguments.
    check("--version", dsh("--version"), 0, crlf(f"dsh-confine {project_version()}\n").encode())
    check("-V", dsh("-V"), 0, crlf(f"dsh-confine {project_version()}\n").encode())
    usage = err("dsh-confine: no command given: dsh-confine [OPTIONS] -- COMMAND [ARG...]")
    check("-- and nothing after it: usage error 125", dsh("--"), 125, b"", usage)
    check("unknown option: the --help hint", dsh("--bogus"), 125, b"",
          err("dsh-confine: unknown option \"--bogus\"; Try 'dsh-confine --help'"))
    check("after --, --version is the command", dsh("--mode", "danger-full-access", "--", "--version"), 127, b"",
          err("dsh-confine: --version: command not found"))
    check("after --, explain is the command", dsh("--", "explain"), 127, b"",
          err("dsh-confine: explain: command not found"))
    check("--supervise refused on Windows", dsh("--supervise", "--", "cmd", "/c", "exit", "0"), 125, b"",
          err("dsh-confine: --supervise is not built for Windows yet"))

    # Refused, never run differently from what was asked (125).
    check("--timeout refused on Windows", dsh("--timeout", "5s", "--", "cmd", "/c", "exit", "0"), 125, b"",
          err("dsh-confine: resource limits and --timeout cannot be enforced on this platform yet; nothing was run: "
              "drop it"))
    check("--memory refused on Windows", dsh("--memory", "512M", "--", "cmd", "/c", "exit", "0"), 125, b"",
          err("dsh-confine: resource limits and --timeout cannot be enforced on this platform yet; nothing was run: "
              "drop it"))

    def no_backend(mode):
        return err(f"dsh-confine: sandbox mode \"{mode}\" is requested but no sandbox backend is usable on this host; "
                   "refusing to run the command unconfined. Install bubblewrap or run a Landlock-enforcing kernel "
                   "(Linux), ensure sandbox-exec is usable (macOS), or ensure the ACL restricted-token runner can start "
                   "(Windows) \u2014 otherwise switch the consumer to danger-full-access.")
    check("--net off refused by windows-acl", dsh("--net", "off", "--", "cmd", "/c", "exit", "0"), 125, b"",
          no_backend("read-only"))
    os.makedirs(os.path.join(top, "extra"))
    check("--writable refused by windows-acl", dsh("--mode", "workspace-write", "--writable",
                                                   winpath(os.path.join(top, "extra")), "--", "cmd", "/c", "exit",
                                                   "0"), 125, b"", no_backend("workspace-write"))

    # explain: the plan for each mode, nothing run.
    for mode in ("read-only", "workspace-write"):
        check(f"explain --mode {mode}", dsh("explain", "--mode", mode, "--", "cmd"), 0,
              explain_text(mode, "C:\\windows\\system32\\cmd.exe", ws, user_temp, build), b"")

    # Exit statuses passing through. Under Wine the helper's token confines
    # nothing: these show the status mapping only.
    check("read-only: the command's status passes through the helper",
          dsh("--", "cmd", "/c", "exit", "3"), 3, b"", b"")
    check("danger-full-access (no helper): the command's status", dsh("--mode", "danger-full-access", "cmd", "/c",
                                                                      "exit", "7"), 7, b"", b"")
    check("danger-full-access: success is 0", dsh("--mode", "danger-full-access", "cmd", "/c", "exit", "0"), 0,
          b"", b"")
    check("command not found: 127", dsh("--mode", "danger-full-access", "--", "no-such-command-dsh"), 127, b"",
          err("dsh-confine: no-such-command-dsh: command not found"))
    check("a directory as the command: 126", dsh("--mode", "danger-full-access", "--", ws), 126, b"",
          err(f"dsh-confine: {ws}: is a directory"))

    # workspace-write through dsh-confine.exe: the helper's private temp dir
    # is the command's TEMP while it runs, and gone after.
    before = set(os.listdir(user_temp_unix))
    r = dsh("--mode", "workspace-write", "--", "cmd", "/c", "if", "exist", "%TEMP%", "set", "TEMP")
    check("workspace-write: TEMP is a fresh dsh- dir under the user's temp dir while the command runs", r, 0,
          re.compile(re.escape(f"TEMP={user_temp}\\dsh-").encode() + rb"[a-z0-9]{6}\r\n"), b"")
    left = sorted(set(os.listdir(user_temp_unix)) - before)
    check("workspace-write: the dsh- dir is removed after the run",
          subprocess.CompletedProcess([], 0 if not left else 1, b"", b""), 0)

    # dsh-confine-acl-run.exe: its own argument validation (exit 127, one
    # line on stderr; fwrite in text mode, so \r\n).
    def bad(name, args, detail):
        check(f"helper: {name}", acl(*args), 127, b"", err("windows-acl-run: " + detail))

    base = ["--workspace", ws, "--temp", tmp]
    ws_sid = sid_from(ws.encode())
    tmp_sid = sid_from(b"temp\0" + tmp.encode()) + "-1"
    bad("no arguments", [], "missing --workspace")
    bad("unknown argument", ["--bogus"], "unknown argument: --bogus")
    bad("a flag without its value", ["--workspace"], "--workspace requires a value")
    bad("a flag twice", ["--workspace", ws, "--workspace", ws], "--workspace given more than once")
    bad("missing --temp", ["--workspace", ws, "--mode", "read-only", "--", "cmd"], "missing --temp")
    bad("missing --mode", base + ["--", "cmd"], "missing --mode")
    bad("missing -- <command>", base + ["--mode", "read-only"], "missing -- <command>")
    bad("-- with no command", base + ["--mode", "read-only", "--"], "missing -- <command>")
    bad("unknown mode", base + ["--mode", "danger-full-access", "--", "cmd"], "unknown mode: danger-full-access")
    bad("read-only with a SID", base + ["--mode", "read-only", "--write-sid", ws_sid, "--", "cmd"],
        "read-only does not accept --write-sid or --temp-write-sid")
    bad("one SID of two", base + ["--mode", "workspace-write", "--write-sid", ws_sid, "--", "cmd"],
        "workspace-write requires --write-sid and --temp-write-sid together")
    missing = ws + "\\missing"
    bad("workspace not a directory", ["--workspace", missing, "--temp", tmp, "--mode", "read-only", "--", "cmd"],
        "--workspace is not an existing directory: " + missing)
    bad("temp not a directory", ["--workspace", ws, "--temp", missing, "--mode", "read-only", "--", "cmd"],
        "--temp is not an existing directory: " + missing)
    bad("a SID for another workspace", base + ["--mode", "workspace-write", "--write-sid", sid_from(b"C:\\other"),
                                               "--temp-write-sid", tmp_sid, "--", "cmd"],
        "--write-sid does not match --workspace")
    bad("a temp SID for another dir", base + ["--mode", "workspace-write", "--write-sid", ws_sid,
                                              "--temp-write-sid", ws_sid + "-1", "--", "cmd"],
        "--temp-write-sid does not match --temp")
    inner = ws + "\\t"
    os.makedirs(os.path.join(ws_unix, "t"))
    bad("temp inside the workspace", ["--workspace", ws, "--temp", inner, "--mode", "workspace-write", "--", "cmd"],
        f"Windows ACL temp root must be outside the workspace: workspace={ws}; temp={inner}")

    # Why nothing here is about enforcement: under Wine a write the
    # read-only token must refuse on Windows lands. Checked, so the claim in
    # the docs stays true (if this ever fails, Wine enforces and this test
    # could say more).
    target = ws + "\\wine-does-not-enforce.txt"
    r = acl(*base, "--mode", "read-only", "--", "cmd", "/c", "copy", "NUL", target)
    landed = os.path.exists(os.path.join(ws_unix, "wine-does-not-enforce.txt"))
    check("Wine enforces nothing: a write in read-only mode lands (not an enforcement test)",
          subprocess.CompletedProcess([], 0 if landed and r.returncode == 0 else 1, b"", b""), 0)

    # The helper runs the command and exits with its status.
    check("helper read-only: the command's status", acl(*base, "--mode", "read-only", "--", "cmd", "/c", "exit", "5"),
          5, b"", b"")
    # Agentless workspace-write: mkdtemp(<temp>\dsh-XXXXXX), TMP and TEMP
    # pointed at it, removed on exit.
    r = acl(*base, "--mode", "workspace-write", "--", "cmd", "/c", "if", "exist", "%TMP%", "set", "TEMP")
    check("helper workspace-write: TEMP is its private dsh- dir under --temp, existing while the command runs", r, 0,
          re.compile(re.escape(f"TEMP={tmp}\\dsh-").encode() + rb"[a-z0-9]{6}\r\n"), b"")
    left = os.listdir(tmp_unix)
    check(f"helper workspace-write: the private dir is removed (left: {left})",
          subprocess.CompletedProcess([], 0 if not left else 1, b"", b""), 0)
    r = acl(*base, "--mode", "workspace-write", "--", "cmd", "/c", "exit", "9")
    check("helper workspace-write: the command's status, private dir removed", r, 9, b"", b"")
    if os.listdir(tmp_unix):
        failures.append("temp removed after exit 9")
        say(f"not ok - after exit 9 --temp holds {os.listdir(tmp_unix)}")
    # With the SIDs given (the session shape), the helper makes no dir of
    # its own.
    r = acl(*base, "--mode", "workspace-write", "--write-sid", ws_sid, "--temp-write-sid", tmp_sid, "--", "cmd", "/c",
            "exit", "0")
    check("helper workspace-write with SIDs: runs, creates no dir", r, 0, b"", b"")
    if os.listdir(tmp_unix):
        failures.append("no dir with SIDs")
        say(f"not ok - with SIDs given --temp holds {os.listdir(tmp_unix)}")
    # A command that cannot start: the helper's own failure, 127 and one line
    # written with WriteFile (so \n, not \r\n); Win32 2 is ERROR_FILE_NOT_FOUND.
    check("helper: a command that cannot start: 127 and one windows-acl-run: line",
          acl(*base, "--mode", "read-only", "--", "no-such-command-dsh"), 127, b"",
          b"windows-acl-run: CreateProcessAsUserW failed (Win32 2)\n")


if __name__ == "__main__":
    sys.exit(main())
