"""Resource limits and the timeout (issue 21), end to end, under each Linux
runner, supervised and in exec mode, as root and as an unprivileged user.
Verified from outside: the processes that must be gone are looked for in
/proc, the cgroup leaves in the cgroup v2 hierarchy, the files on disk.

Bounds are generous (CI runs sanitized builds on a loaded 2-core machine):
each command stops itself within a few seconds whether or not the limit
holds, so a broken limit fails the test instead of hanging it."""
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time

from harness import (DSH, STARTUP, after_start, dsh, is_root, main, need_runner, need, need_bwrap, need_landlock, processes_naming, sh, skip,
                     sleepers)

RUNNERS = ["landlock", "bwrap"]


def limit_of(c, name):
    for l in c["limits"]["enforced"]:
        if l["limit"] == name:
            return l
    raise AssertionError("no %s limit in %r" % (name, c["limits"]))


def cgroup2_dir():
    """This process's cgroup v2 directory, or None."""
    mount = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            before, _, after = line.partition(" - ")
            if after.split()[:1] == ["cgroup2"] and before.split()[3] == "/":
                mount = before.split()[4]
                break
    if not mount:
        return None
    with open("/proc/self/cgroup") as f:
        for line in f:
            if line.startswith("0::"):
                rel = line.strip()[3:]
                return mount if rel == "/" else mount + rel
    return None


def v1_dir(controller):
    """This process's directory in the cgroup v1 hierarchy of `controller`, or None."""
    rel = None
    with open("/proc/self/cgroup") as f:
        for line in f:
            parts = line.rstrip("\n").split(":", 2)
            if len(parts) == 3 and controller in parts[1].split(","):
                rel = parts[2]
    if rel is None:
        return None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            before, _, after = line.partition(" - ")
            a, b = after.split(), before.split()
            if len(a) >= 3 and a[0] == "cgroup" and controller in a[2].split(","):
                root, mount = b[3], b[4]
                if root == "/":
                    return mount if rel == "/" else mount + rel
                if rel == root or rel.startswith(root + "/"):
                    return mount + rel[len(root):]
    return None


def v1_usable(controller):
    """Whether dsh-confine takes the v1 backend for `controller` here: no v2
    leaf with it, and a v1 directory we may write."""
    d = cgroup2_dir()
    if d and can_make_leaf():
        try:
            with open(os.path.join(d, "cgroup.subtree_control")) as f:
                if controller in f.read().split():
                    return False
        except OSError:
            pass
    v = v1_dir(controller)
    return v is not None and os.access(v, os.W_OK)


def need_v1(controller):
    """The v1 directory of `controller`. Skips as an unprivileged user (the
    rlimit fallback, tested above) and where no v1 hierarchy of it is mounted;
    as root with one mounted, it must be usable (DSH_CONFINE_MUST_WORK=1)."""
    if not is_root():
        skip("cgroup v1 leaves need write access to the hierarchy: root only here")
    v = v1_dir(controller)
    if v is None:
        skip("no cgroup v1 %s hierarchy is mounted here" % controller)
    if not v1_usable(controller):
        d = cgroup2_dir()
        with open(os.path.join(d, "cgroup.subtree_control")) as f:
            if controller in f.read().split():
                skip("a cgroup v2 %s controller is delegated here: v1 is not used" % controller)
    need(os.access(v, os.W_OK), "the cgroup v1 %s directory %s is not writable" % (controller, v))
    return v


def leaves(d):
    try:
        return sorted(n for n in os.listdir(d) if n.startswith("dsh-confine-"))
    except OSError:
        return []


def can_make_leaf():
    d = cgroup2_dir()
    return d is not None and os.access(d, os.W_OK) and os.access(os.path.join(d, "cgroup.procs"), os.W_OK)


def gone(pids, limit=20.0):
    """Whether every pid is gone (or a zombie nobody can signal) within `limit` seconds."""
    until = time.time() + limit
    while time.time() < until:
        alive = []
        for p in pids:
            try:
                with open("/proc/%d/stat" % p) as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
                if state not in ("Z", "X"):
                    alive.append(p)
            except OSError:
                pass
        if not alive:
            return True
        time.sleep(0.1)
    return False


# A bounded fork bomb: forks children, up to 300 of them, for at most 20
# seconds (a loaded machine forked only 57 in 4, and the limit of 64 was never
# reached); prints how many it got and whether a fork was refused (EAGAIN).
# Each child lives until the forking is over (it reads a pipe whose write end
# only the parent holds, which the parent closes once it has counted), so the
# count is of children alive at once; none outlives that by a moment, nor the
# 20 seconds if the parent dies. It stops by itself whether the limit holds or not.
BOMB = r"""
import errno, os, select, sys, time
end = time.time() + 20
n = 0
refused = 0
r, w = os.pipe()
while time.time() < end and n < 300:
    try:
        pid = os.fork()
    except OSError as e:
        refused = e.errno
        break
    if pid == 0:
        os.close(w)
        select.select([r], [], [], max(0.0, end - time.time()))
        os._exit(0)
    n += 1
os.close(w)
print("forked %d refused %s" % (n, errno.errorcode.get(refused, refused)), flush=True)
while True:
    try:
        os.wait()
    except ChildProcessError:
        break
"""


def test_fork_bomb_under_max_procs(s):
    for runner in RUNNERS:
        need_runner(runner)
        for mode in (["--supervise"], []):
            r = dsh(["--runner", runner, "--max-procs", "64"] + mode + ["--", sys.executable, "-c", BOMB], s,
                    timeout=120)
            assert r.rc == 0, r
            c = r.rec("confinement")
            pids = limit_of(c, "pids")
            words = r.out.split()
            assert words[:1] == ["forked"], r
            forked = int(words[1])
            if is_root():
                # uid 0 is not bound by RLIMIT_NPROC: without a pids
                # controller (v2 delegated, or v1 writable) the record says
                # so instead of claiming a limit.
                assert pids["backend"] in ("none", "cgroup"), c["limits"]
                if pids["backend"] == "none":
                    assert not v1_usable("pids"), c["limits"]
                    assert [g["effect"] for g in pids["gaps"]] == ["uid-0-exempt"], pids
                else:
                    assert pids["gaps"] == [], pids
                    assert forked < 64 and words[3] == "EAGAIN", (runner, mode, r)
            else:
                assert pids["backend"] in ("rlimit", "cgroup"), c["limits"]
                if pids["backend"] == "rlimit":
                    assert pids["how"] == "RLIMIT_NPROC" and pids["gaps"][0]["effect"] == "per-uid", pids
                # Contained: at most 64 processes of the user, and a fork was refused.
                assert forked < 64 and words[3] == "EAGAIN", (runner, mode, r)
            if mode:
                res = r.rec("result")
                assert res["exitCode"] == 0 and res["limit"] is None, res



def without_controllers(*controllers):
    """The `pre` that runs dsh-confine with no cgroup controller at all, or ()
    where none of `controllers` is usable here anyway. As root where one is
    (v2 delegated, or a writable v1 hierarchy) every cgroup and cgroup2 mount
    is taken away in a private mount namespace, so that the "no controller"
    path runs instead of being skipped; as another user, skips."""
    d = cgroup2_dir()
    usable = any(v1_usable(c) for c in controllers)
    if d and can_make_leaf() and os.path.exists(os.path.join(d, "cgroup.subtree_control")):
        with open(os.path.join(d, "cgroup.subtree_control")) as f:
            usable = usable or any(c in f.read().split() for c in controllers)
    if not usable:
        return ()
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        skip("a %s controller is usable here and cannot be taken away as this user" % "/".join(controllers))
    mounts = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            before, _, after = line.partition(" - ")
            if after.split()[:1] in (["cgroup"], ["cgroup2"]):
                mounts.append(before.split()[4])
    # Deepest first, so that a mount under another goes before it.
    mounts.sort(key=len, reverse=True)
    return ("unshare", "--mount", "--propagation", "private", "sh", "-c",
            'for m in $0; do umount -l "$m" || exit 99; done; exec "$@"', " ".join(mounts))


def test_max_procs_required_without_a_pids_controller_runs_nothing(s):
    pre = without_controllers("pids")
    marker = s.p("ws", "ran")
    for runner in RUNNERS:
        need_runner(runner)
        r = sh("touch %s" % marker, s, mode="workspace-write", root=s.ws, runner=runner,
               extra=["--max-procs", "64", "--limits", "required"], pre=pre)
        assert r.rc == 125, r
        assert not os.path.exists(marker), r
        e = r.rec("error")
        assert e["code"] == "LIMIT_UNAVAILABLE" and e["message"].startswith("--max-procs cannot be enforced"), r
        assert r.rec("confinement") is None, r
        assert r.err.count("\n") == 1 and r.err.startswith("dsh-confine: --max-procs"), r


def test_file_size_write_fails_with_efbig(s):
    big = s.p("ws", "big")
    # Python ignores SIGXFSZ, so the write itself fails with EFBIG.
    py = ("import errno, os, sys\n"
          "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)\n"
          "data = b'x' * (2 << 20)\n"
          "off = 0\n"
          "try:\n"
          "    while off < len(data):\n"
          "        off += os.write(fd, data[off:])\n"
          "    print('wrote')\n"
          "except OSError as e:\n"
          "    print(errno.errorcode[e.errno]); sys.exit(3)\n")
    for runner in RUNNERS:
        need_runner(runner)
        for mode in (["--supervise"], []):
            if os.path.exists(big):
                os.unlink(big)
            r = dsh(["--mode", "workspace-write", "--root", s.ws, "--runner", runner, "--file-size", "1M"] + mode +
                    ["--", sys.executable, "-c", py, big], s)
            assert r.rc == 3 and r.out.strip() == "EFBIG", (runner, mode, r)
            assert os.path.getsize(big) <= 1 << 20, r
            fs = limit_of(r.rec("confinement"), "file-size")
            assert fs == {"limit": "file-size", "value": 1 << 20, "backend": "rlimit", "how": "RLIMIT_FSIZE",
                          "gaps": []}, fs
            # A program that does not ignore SIGXFSZ dies of it, and the
            # result record names the limit.
            os.unlink(big)
            r = sh("exec head -c 2000000 /dev/zero > %s" % big, s, mode="workspace-write", root=s.ws,
                   runner=runner, extra=["--file-size", "1M"] + mode)
            assert os.path.getsize(big) == 1 << 20, r
            if mode:
                res = r.rec("result")
                assert res["limit"] == "file-size" and res["signal"] == signal.SIGXFSZ, res
                assert r.rc == 128 + signal.SIGXFSZ, r
            else:
                # Exec mode: dsh-confine is the command, or re-raises its death.
                assert r.rc == -signal.SIGXFSZ, r


def test_timeout_kills_a_setsid_grandchild_that_ignores_sigterm(s):
    for runner in RUNNERS:
        need_runner(runner)
        for mode in (["--supervise"], []):
            token = "3600.%d%d" % (os.getpid(), int(time.time() * 1000) % 100000)
            # The grandchild: double-forked, its own session, SIGTERM ignored;
            # it says "started" once it ignores SIGTERM (the timeout found it
            # running), then becomes `sleep TOKEN`.
            script = ("( setsid sh -c 'trap \"\" TERM; echo started; exec sleep %s' & ) ; trap '' TERM; "
                      "sleep 60") % token
            t0 = time.time()
            # after_start: under the sanitizers and load, the set-up alone took over 1 s, and the
            # timeout came before the grandchild could say "started".
            r = sh(script, s, runner=runner, extra=["--timeout", after_start(3), "--kill-after", "200ms"] + mode, timeout=90)
            took = time.time() - t0
            assert r.rc == 124, (runner, mode, r)
            assert "started" in r.out, r
            assert took < 45, (took, r)
            # From outside: nothing of the command is left.
            assert gone(processes_naming(token)), (runner, mode, processes_naming(token), r)
            t = limit_of(r.rec("confinement"), "timeout")
            assert t["value"] == 3000 * STARTUP and t["backend"] in ("cgroup", "process-tree"), t
            if mode:
                res = r.rec("result")
                assert res["limit"] == "timeout", res
                assert res["signal"] in (signal.SIGTERM, signal.SIGKILL) or res["exitCode"] is not None, res
            else:
                assert r.rec("result") is None, r


def test_timeout_sigterm_first(s):
    """A command that handles SIGTERM ends on it, within the grace period. The timeouts of this
    file whose command must print first are after_start(3): under the sanitizers and load, set-up
    alone took over 1 s."""
    for runner in RUNNERS:
        need_runner(runner)
        r = sh("trap 'echo got-term; exit 7' TERM; sleep 60 & wait", s, runner=runner,
               extra=["--timeout", after_start(3), "--kill-after", "30s", "--supervise"], timeout=90)
        assert r.rc == 124, r
        assert "got-term" in r.out, r
        res = r.rec("result")
        assert res["exitCode"] == 7 and res["limit"] == "timeout", res
        assert res["durationMs"] < 25000, res


def test_no_timeout_no_limit(s):
    for runner in RUNNERS:
        need_runner(runner)
        r = sh("exit 3", s, runner=runner, extra=["--timeout", "60s", "--supervise"])
        assert r.rc == 3, r
        assert r.rec("result")["limit"] is None, r


def test_memory_with_rlimits_fails_the_allocation(s):
    py = ("try:\n"
          "    b = bytearray(512 << 20)\n"
          "    print('allocated')\n"
          "except MemoryError:\n"
          "    print('MemoryError')\n")
    for runner in RUNNERS:
        need_runner(runner)
        for mode in (["--supervise"], []):
            r = dsh(["--runner", runner, "--memory", "256M"] + mode + ["--", sys.executable, "-c", py], s)
            c = r.rec("confinement")
            mem = limit_of(c, "memory")
            if mem["backend"] == "cgroup":
                continue  # a delegated memory controller: not this host's case
            assert mem["backend"] == "rlimit" and mem["how"] == "RLIMIT_AS", mem
            assert [g["effect"] for g in mem["gaps"]] == ["address-space"], mem
            assert r.rc == 0 and r.out.strip() == "MemoryError", (runner, mode, r)
            # Without the limit the same allocation succeeds (the test can fail).
        r = dsh(["--runner", runner, "--", sys.executable, "-c", py], s)
        assert r.out.strip() == "allocated", r


def test_memory_required_without_a_memory_controller_runs_nothing(s):
    pre = without_controllers("memory")
    marker = s.p("ws", "ran")
    for runner in RUNNERS:
        need_runner(runner)
        for mode in (["--supervise"], []):
            r = sh("touch %s" % marker, s, mode="workspace-write", root=s.ws, runner=runner,
                   extra=["--memory", "64M", "--limits", "required"] + mode, pre=pre)
            assert r.rc == 125, r
            assert not os.path.exists(marker), r
            assert r.rec("error")["code"] == "LIMIT_UNAVAILABLE", r
            assert "--memory cannot be enforced as asked" in r.err, r
    # The same from the config's keys.
    cfg = s.p("base", "config.json")
    with open(cfg, "w") as f:
        json.dump({"memory": "64M", "limits": "required"}, f)
    r = sh("touch %s" % marker, s, mode="workspace-write", root=s.ws, extra=["--config", cfg], pre=pre)
    assert r.rc == 125 and not os.path.exists(marker), r


def test_core_dumps_off_by_default(s):
    soft, hard = resource.getrlimit(resource.RLIMIT_CORE)
    if hard == 0:
        skip("the caller's hard core limit is 0: --allow-core has nothing to keep")
    resource.setrlimit(resource.RLIMIT_CORE, (hard, hard))
    try:
        want = "unlimited" if hard == resource.RLIM_INFINITY else str(hard // 1024)
        # The sanitizer runtime sets its own process's RLIMIT_CORE to 0 unless told not to.
        asan = os.environ.get("ASAN_OPTIONS")
        env = {"ASAN_OPTIONS": asan + ":disable_coredump=0"} if asan else None
        for runner in RUNNERS:
            need_runner(runner)
            for mode in (["--supervise"], []):
                r = sh("ulimit -c", s, runner=runner, extra=mode, env=env)
                assert r.rc == 0 and r.out.strip() == "0", r
                assert limit_of(r.rec("confinement"), "core")["value"] == 0, r
                r = sh("ulimit -c", s, runner=runner, extra=["--allow-core"] + mode, env=env)
                assert r.rc == 0 and r.out.strip() == want, r
                assert all(l["limit"] != "core" for l in r.rec("confinement")["limits"]["enforced"]), r
    finally:
        resource.setrlimit(resource.RLIMIT_CORE, (soft, hard))


def test_no_cgroup_left_behind(s):
    d = cgroup2_dir()
    if not can_make_leaf():
        # No leaf to make: the timeout kills the process tree, and says so.
        r = sh("true", s, extra=["--timeout", "10s", "--supervise"])
        assert limit_of(r.rec("confinement"), "timeout")["backend"] == "process-tree", r
        skip("the cgroup v2 hierarchy is not delegated to this user: no leaf is made")
    # Other runs (other users of this machine) may make and remove leaves
    # meanwhile: only this test's own leaves are looked at.
    def own_leaf(out):
        for line in out.splitlines():
            if line.startswith("0::"):
                name = line[3:].rsplit("/", 1)[-1]
                assert name.startswith("dsh-confine-"), out
                return name
        raise AssertionError("no cgroup v2 line in %r" % out)

    # Normal exit, a timeout: the leaf exists while the command runs, not after.
    for runner in RUNNERS:
        need_runner(runner)
        for mode in (["--supervise"], []):
            r = sh("cat /proc/self/cgroup", s, runner=runner, extra=["--timeout", "60s"] + mode)
            assert r.rc == 0, r
            assert limit_of(r.rec("confinement"), "timeout")["backend"] == "cgroup", r
            leaf = own_leaf(r.out)
            assert leaf not in leaves(d), (leaf, leaves(d))
            r = sh("cat /proc/self/cgroup; sleep 60", s, runner=runner,
                   extra=["--timeout", after_start(3), "--kill-after", "200ms"] + mode, timeout=60)
            assert r.rc == 124, r
            leaf = own_leaf(r.out)
            assert leaf not in leaves(d), (leaf, leaves(d))
    # A SIGKILL of dsh-confine: its leaf (with the grandchild in it) stays
    # until the next run that makes one, which removes it.
    token = "3600.%d9" % os.getpid()
    proc = subprocess.Popen([DSH, "--timeout", "60s", "--supervise", "--", "sh", "-c",
                             "( setsid sleep %s & ) ; sleep 60" % token],
                            cwd=s.base, env=s.env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    until = time.time() + 30
    while time.time() < until and not sleepers(token):
        time.sleep(0.1)
    assert sleepers(token), "the grandchild never started"
    # dsh-confine-<pid ns>-<pid>-<start time>
    mine = [n for n in leaves(d) if n.split("-")[3:4] == [str(proc.pid)]]
    assert len(mine) == 1, leaves(d)
    proc.kill()
    proc.wait()
    r = sh("true", s, extra=["--timeout", "60s", "--supervise"])
    assert r.rc == 0, r
    assert mine[0] not in leaves(d), leaves(d)
    assert gone(sleepers(token)), sleepers(token)


# A memory hog that stops itself: touches up to 384 MiB in 16 MiB steps.
HOG = r"""
chunks = []
for i in range(24):
    chunks.append(b"x" * (16 << 20))
print("survived", flush=True)
"""


def test_memory_v1_leaf_kills_the_hog(s):
    """As root where memory is bound to cgroup v1: the kernel holds the
    command to --memory (an OOM kill in our leaf), and the result says so."""
    need_v1("memory")
    for runner in RUNNERS:
        need_runner(runner)
        for mode in (["--supervise"], []):
            r = dsh(["--runner", runner, "--memory", "64M"] + mode + ["--", sys.executable, "-c", HOG], s, timeout=120)
            mem = limit_of(r.rec("confinement"), "memory")
            assert mem == {"limit": "memory", "value": 64 << 20, "backend": "cgroup",
                           "how": "memory.limit_in_bytes (cgroup v1)", "gaps": []}, mem
            assert "survived" not in r.out, (runner, mode, r)
            if mode:
                # The status as without dsh-confine's interpretation: killed by SIGKILL.
                assert r.rc == 128 + signal.SIGKILL, (runner, mode, r)
                res = r.rec("result")
                assert res["limit"] == "memory" and res["signal"] == signal.SIGKILL, res
            else:
                # Exec mode: the forwarder dies of the command's signal (a shell says 137).
                assert r.rc == -signal.SIGKILL, (runner, mode, r)
    # Without the limit the same command survives (the test can fail).
    r = dsh(["--supervise", "--", sys.executable, "-c", HOG], s, timeout=120)
    assert r.rc == 0 and "survived" in r.out, r


# BOMB that fails (as a real fork bomb dies of its failed fork) when one is refused.
FAILING_BOMB = BOMB + "\nsys.exit(3 if refused else 0)\n"


def test_fork_bomb_as_root_contained_by_the_v1_pids_leaf(s):
    need_v1("pids")
    for runner in RUNNERS:
        need_runner(runner)
        for mode in (["--supervise"], []):
            r = dsh(["--runner", runner, "--max-procs", "64"] + mode + ["--", sys.executable, "-c", FAILING_BOMB], s,
                    timeout=120)
            pids = limit_of(r.rec("confinement"), "pids")
            assert pids == {"limit": "pids", "value": 64, "backend": "cgroup", "how": "pids.max (cgroup v1)",
                            "gaps": []}, pids
            words = r.out.split()
            assert words[:1] == ["forked"], r
            assert int(words[1]) < 64 and words[3] == "EAGAIN", (runner, mode, r)
            assert r.rc == 3, (runner, mode, r)
            if mode:
                assert r.rec("result")["limit"] == "pids", r


def test_limits_required_met_by_v1(s):
    need_v1("memory")
    need_v1("pids")
    marker = s.p("ws", "ran")
    for runner in RUNNERS:
        need_runner(runner)
        for mode in (["--supervise"], []):
            if os.path.exists(marker):
                os.unlink(marker)
            r = sh("touch %s" % marker, s, mode="workspace-write", root=s.ws, runner=runner,
                   extra=["--limits", "required", "--memory", "64M", "--max-procs", "64"] + mode)
            assert r.rc == 0 and os.path.exists(marker), r
            c = r.rec("confinement")
            assert c["limits"]["required"] is True, c["limits"]
            assert limit_of(c, "memory")["backend"] == "cgroup" and limit_of(c, "pids")["backend"] == "cgroup", c


def own_v1_leaves(out):
    """{controller: leaf name} from a `cat /proc/self/cgroup` of the command."""
    found = {}
    for line in out.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for ctl in ("memory", "pids"):
                if ctl in parts[1].split(","):
                    name = parts[2].rsplit("/", 1)[-1]
                    assert name.startswith("dsh-confine-"), out
                    found[ctl] = name
    assert set(found) == {"memory", "pids"}, out
    return found


def test_no_v1_leaf_left_behind(s):
    dirs = {"memory": need_v1("memory"), "pids": need_v1("pids")}
    lim = ["--memory", "64M", "--max-procs", "64"]
    # Normal exit, a timeout (no cgroup.kill in v1: the process tree, and
    # every pid the leaves list): the leaves exist while the command runs,
    # not after. Other runs may make leaves meanwhile: only ours are looked at.
    for runner in RUNNERS:
        need_runner(runner)
        for mode in (["--supervise"], []):
            r = sh("cat /proc/self/cgroup", s, runner=runner, extra=lim + mode)
            assert r.rc == 0, r
            for ctl, name in own_v1_leaves(r.out).items():
                assert name not in leaves(dirs[ctl]), (ctl, name, leaves(dirs[ctl]))
            token = "3600.%d%d" % (os.getpid(), int(time.time() * 1000) % 100000)
            r = sh("cat /proc/self/cgroup; ( setsid sh -c 'trap \"\" TERM; echo started; exec sleep %s' & ); "
                   "sleep 60" % token, s,
                   runner=runner, extra=lim + ["--timeout", after_start(3), "--kill-after", "200ms"] + mode, timeout=60)
            assert r.rc == 124, r
            assert "started" in r.out, r
            for ctl, name in own_v1_leaves(r.out).items():
                assert name not in leaves(dirs[ctl]), (ctl, name, leaves(dirs[ctl]))
            assert gone(sleepers(token)), sleepers(token)
    # A SIGKILL of dsh-confine: its leaves (with the grandchild in them) stay
    # until the next run that makes them, which removes them.
    token = "3600.%d7" % os.getpid()
    proc = subprocess.Popen([DSH, "--runner", "landlock" if "landlock" in RUNNERS else "bwrap"] + lim +
                            ["--supervise", "--", "sh", "-c", "( setsid sleep %s & ) ; sleep 60" % token],
                            cwd=s.base, env=s.env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    until = time.time() + 30
    while time.time() < until and not sleepers(token):
        time.sleep(0.1)
    assert sleepers(token), "the grandchild never started"
    mine = {c: [n for n in leaves(d) if n.split("-")[3:4] == [str(proc.pid)]] for c, d in dirs.items()}
    assert all(len(v) == 1 for v in mine.values()), mine
    proc.kill()
    proc.wait()
    r = sh("true", s, extra=lim + ["--supervise"])
    assert r.rc == 0, r
    for c, d in dirs.items():
        assert mine[c][0] not in leaves(d), (c, leaves(d))
    assert gone(sleepers(token)), sleepers(token)


def test_timeout_with_v1_leaves_only(s):
    """Without cgroup v2 (here: its mount taken away in a private mount
    namespace) the timeout is the process tree's and the limits are v1
    leaves (no cgroup.kill): a setsid'd grandchild that ignores SIGTERM is
    still ended, and both leaves are removed."""
    dirs = {"memory": need_v1("memory"), "pids": need_v1("pids")}
    need(shutil.which("unshare") is not None, "unshare(1) is not installed")
    v2 = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            before, _, after = line.partition(" - ")
            if after.split()[:1] == ["cgroup2"]:
                v2.append(before.split()[4])
    pre = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
           'for m in "$0"; do [ -z "$m" ] || umount -l "$m" || exit 99; done; exec "$@"', " ".join(v2)]
    for runner in RUNNERS:
        need_runner(runner)
        for mode in (["--supervise"], []):
            token = "3600.%d%d" % (os.getpid(), int(time.time() * 1000) % 100000)
            r = dsh(["--runner", runner, "--memory", "64M", "--max-procs", "64", "--timeout", after_start(3), "--kill-after",
                     "200ms"] + mode + ["--", "sh", "-c",
                                        "cat /proc/self/cgroup; ( setsid sh -c 'trap \"\" TERM; echo started; "
                                        "exec sleep %s' & ); trap '' TERM; sleep 60" % token], s, pre=pre, timeout=60)
            assert r.rc == 124, (runner, mode, r)
            assert "started" in r.out, (runner, mode, r)
            c = r.rec("confinement")
            assert limit_of(c, "timeout")["backend"] == "process-tree", c["limits"]
            assert limit_of(c, "memory")["how"] == "memory.limit_in_bytes (cgroup v1)", c["limits"]
            assert limit_of(c, "pids")["how"] == "pids.max (cgroup v1)", c["limits"]
            for ctl, name in own_v1_leaves(r.out).items():
                assert name not in leaves(dirs[ctl]), (ctl, name, leaves(dirs[ctl]))
            assert gone(sleepers(token)), (runner, mode, sleepers(token))
            if mode:
                assert r.rec("result")["limit"] == "timeout", r


if __name__ == "__main__":
    main()
