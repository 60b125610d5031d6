#!/usr/bin/env python3
"""Runs one end-to-end test file as root or as an unprivileged user, printing TAP.

    run.py --as root|user tests/e2e/test_x.py

As root with --as user, it creates the system user `dsh-confine-test` (once, under a
lock), stages the binary, the helper tools and the test files in a directory that
user can read (the checkout may live under /root), and re-executes itself there
with the user's uid and gid. Everything a test needs to know comes through the
environment: DSH_CONFINE (the binary), DSH_TEST_TOOLS (helper binaries), DSH_TEST_AS.
"""
import fcntl
import os
import pwd
import shutil
import subprocess
import sys
import tempfile

USER = "dsh-confine-test"


def must_work():
    return os.environ.get("DSH_CONFINE_MUST_WORK") == "1"


def skip_all(reason):
    # A whole file that cannot run: skipped, or failed when CI demands it.
    if must_work():
        print("1..1\nnot ok 1 - cannot run: %s (DSH_CONFINE_MUST_WORK=1)" % reason)
        sys.exit(1)
    print("1..0 # SKIP %s" % reason)
    sys.exit(0)


def ensure_user():
    with open("/var/tmp/dsh-confine-test-user.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return pwd.getpwnam(USER)
        except KeyError:
            subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
                            "--shell", "/usr/sbin/nologin", USER], check=True,
                           stdout=subprocess.DEVNULL)
            return pwd.getpwnam(USER)


def stage():
    """Copies the binary, tools and tests somewhere readable and outside /tmp."""
    here = os.path.dirname(os.path.abspath(__file__))
    d = tempfile.mkdtemp(prefix="dsh-e2e-stage-", dir="/var/tmp")
    os.chmod(d, 0o755)
    binary = os.path.join(d, "dsh-confine")
    shutil.copy2(os.environ["DSH_CONFINE"], binary)
    tools = []
    for t in filter(None, os.environ.get("DSH_TEST_TOOLS", "").split(":")):
        dst = os.path.join(d, os.path.basename(t))
        shutil.copy2(t, dst)
        tools.append(dst)
    tests = os.path.join(d, "e2e")
    shutil.copytree(here, tests, ignore=shutil.ignore_patterns("__pycache__"))
    # The report's schema, where report_schema.py looks beside the staged tests.
    shutil.copy2(os.path.join(here, "..", "..", "share", "report.schema.json"), tests)
    # The README, beside e2e/ as in the tree: test_cli runs its demo as written.
    readme = os.path.join(here, "..", "..", "README.md")
    if os.path.exists(readme):
        shutil.copy2(readme, os.path.join(d, "README.md"))
    for root, dirs, files in os.walk(d):
        for n in dirs:
            os.chmod(os.path.join(root, n), 0o755)
        for n in files:
            p = os.path.join(root, n)
            os.chmod(p, os.stat(p).st_mode | 0o444)
    return d, binary, ":".join(tools), tests


def main():
    args = sys.argv[1:]
    if len(args) != 3 or args[0] != "--as" or args[1] not in ("root", "user"):
        sys.exit("usage: run.py --as root|user FILE")
    who, test_file = args[1], os.path.abspath(args[2])
    if os.environ.get("DSH_E2E_STAGED") == "1":
        return run_tests(test_file)
    if who == "root" and os.getuid() != 0:
        skip_all("the root variant needs root")
    env = dict(os.environ)
    env["DSH_TEST_AS"] = who
    d, binary, tools, tests = stage()
    env.update(DSH_CONFINE=binary, DSH_TEST_TOOLS=tools, DSH_E2E_STAGED="1", DSH_E2E_STAGE=d)
    staged_test = os.path.join(tests, os.path.basename(test_file))
    py = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    cmd = [py, os.path.join(tests, "run.py"), "--as", who, staged_test]
    if who == "user" and os.getuid() == 0:
        pw = ensure_user()
        env.update(HOME="/nonexistent", USER=USER, LOGNAME=USER)
        cmd = ["setpriv", "--reuid", str(pw.pw_uid), "--regid", str(pw.pw_gid), "--clear-groups",
               "--inh-caps=-all", "--bounding-set=-all"] + cmd
    try:
        rc = subprocess.run(cmd, env=env).returncode
    finally:
        shutil.rmtree(d, ignore_errors=True)
    sys.exit(rc)


def run_tests(test_file):
    sys.path.insert(0, os.path.dirname(test_file))
    import importlib.util
    spec = importlib.util.spec_from_file_location("e2e_module", test_file)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    import harness
    sys.exit(harness.run_module(mod))


if __name__ == "__main__":
    main()
