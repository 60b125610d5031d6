"""Drop-in: prefixing a command with `dsh-confine --mode workspace-write --` changes nothing but the
denied effects (issue 15).

Each everyday case runs twice, bare and confined, each in a workspace of its own (same layout,
same environment, same stdin), and compares what a caller sees: stdout and stderr byte for byte,
the exit status, and the side effects the mode allows (files in the workspace, in /tmp, in
$TMPDIR). Every case runs under each runner (bwrap, landlock) in exec and supervise modes, as one
test function each: test_<case>__<runner>__<exec|supervise>.

Paths that differ only because the two runs have different workspaces are compared with the
workspace's path replaced by "$WS".

The signal cases (a trap on TERM, INT and HUP sent to dsh-confine's pid alone or to its whole
process group, one the command sends to its own group, a trap under timeout(1), kill -STOP/-CONT
to the group, sleep killed by timeout) run under every runner in both modes: without a pty the
command shares the caller's process group under every runner, so a group signal reaches it from
the kernel, and dsh-confine forwards only what was sent to it alone (its sentinel tells which;
docs/DECISIONS.md, issue 15, "Process groups without a terminal"). Each marker is one constant,
named for what it waited on; they are False now and kept so that a regression has its name.
"""
import os
import shutil
import signal
import subprocess
import threading
import time

from harness import DSH, STARTUP, dsh, STD_PATH, after_start, main, need_bwrap, need_landlock, proc_argv, proc_stat, processes_naming, skip, tool

# Under bwrap a signal reaches the command only once dsh-confine stays as its forwarding parent
# (issue 15, "Signals and terminals"). Set to False when that lands: the signal cases then run
# under bwrap too, in both modes.
NEEDS_FORWARDER = False
FORWARDER_REASON = "until the forwarding parent lands (NEEDS_FORWARDER in test_dropin.py)"

# Under --supervise a signal sent to the whole process group (Ctrl-C) reaches the command from
# the kernel and once more forwarded by supervise: its trap runs twice ("cleanup" printed twice,
# seen under landlock). Set to False once supervise forwards only what the command did not get.
SUPERVISE_FORWARDS_GROUP_SIGNALS_TWICE = False
SUPERVISE_TWICE_REASON = ("supervise forwards a group-delivered SIGINT the command already got "
                          "(SUPERVISE_FORWARDS_GROUP_SIGNALS_TWICE in test_dropin.py)")

# Under bwrap dsh-confine's child (bwrap) starts a session of its own, so that a group's SIGINT or
# SIGTERM cannot kill bwrap (and the sandbox with it): a SIGSTOP sent to dsh-confine's process group
# stops dsh-confine alone, and the command runs on (docs/DECISIONS.md, issue 15, "Process groups
# without a terminal"). Set to False once bwrap stays in the caller's group with the forwarded
# signals ignored and the stage puts the caller's dispositions back.
BWRAP_GROUP_STOP_STOPS_ONLY_THE_PARENT = False
BWRAP_STOP_REASON = ("a SIGSTOP to the caller's group stops dsh-confine, not bwrap's session "
                     "(BWRAP_GROUP_STOP_STOPS_ONLY_THE_PARENT in test_dropin.py)")

# The command's argv travels on bwrap's own command line, which bwrap caps at 9000 words: a
# command with more arguments fails under bwrap ("bwrap: Exceeded maximum number of arguments
# 9000"). Set to False once the argv reaches the stage another way (the record's memfd).

RUNNERS = ("bwrap", "landlock")
MODES = (("exec", []), ("supervise", ["--supervise"]))
BIG = 50 * 1024 * 1024


class Run:
    """One side's outcome: exit status (as Popen reports it), stdout, stderr (bytes)."""

    def __init__(self, rc, out, err):
        self.rc, self.out, self.err = rc, out, err

    def __repr__(self):
        return "rc=%r out=%r err=%r" % (self.rc, self.out[-600:], self.err[-600:])


class Side:
    """Runs argv bare or confined, in its own workspace, with the same environment."""

    def __init__(self, s, name, runner, extra):
        self.s, self.name, self.runner, self.extra = s, name, runner, extra
        self.ws = s.ws if name == "confined" else s.p("base", "bare-ws")
        os.makedirs(self.ws, exist_ok=True)
        os.chmod(self.ws, 0o755)
        self.confined = name == "confined"

    def env(self, extra_env=None):
        e = self.s.env()
        e.pop("PWD", None)
        e.pop("OLDPWD", None)
        if extra_env:
            e.update(extra_env)
        return e

    def argv(self, argv, dashdash=True, wrap=()):
        if not self.confined:
            return list(wrap) + list(argv)
        ours = [DSH, "--mode", "workspace-write", "--root", self.ws, "--runner", self.runner] + self.extra
        return list(wrap) + ours + (["--"] if dashdash else []) + list(argv)

    def popen(self, argv, dashdash=True, env=None, stdin=subprocess.DEVNULL, wrap=(), **kw):
        return subprocess.Popen(self.argv(argv, dashdash, wrap), cwd=self.ws, env=self.env(env), stdin=stdin,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)

    def run(self, argv, input=None, dashdash=True, env=None, timeout=120, wrap=()):
        p = self.popen(argv, dashdash, env, subprocess.PIPE if input is not None else subprocess.DEVNULL, wrap)
        try:
            out, err = p.communicate(input=input, timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            raise AssertionError("%s timed out: %r %r" % (self.name, argv, err[-1000:]))
        return Run(p.returncode, out, err)

    def norm(self, b):
        return b.replace(self.ws.encode(), b"$WS")


def shell_status(rc):
    """A Popen status as a shell reports it: 128+n for a death by signal n."""
    return 128 - rc if rc < 0 else rc


def same(bare, conf, r_bare, r_conf, status=True, err=True):
    """The comparison every case makes: stdout, stderr and the exit status."""
    assert bare.norm(r_bare.out) == conf.norm(r_conf.out), (r_bare, r_conf)
    if err:
        assert bare.norm(r_bare.err) == conf.norm(r_conf.err), (r_bare, r_conf)
    if status:
        assert shell_status(r_bare.rc) == shell_status(r_conf.rc), (r_bare, r_conf)


def both(bare, conf, argv, **kw):
    rb, rc = bare.run(argv, **kw), conf.run(argv, **kw)
    same(bare, conf, rb, rc)
    return rb, rc


def tree(root):
    """{relative path: contents or None for a directory} under root, .git's objects left out."""
    out = {}
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if x != "objects"]
        rel = os.path.relpath(d, root)
        for n in dirs:
            out[os.path.join(rel, n)] = None
        for n in files:
            p = os.path.join(d, n)
            if os.path.islink(p):
                out[os.path.join(rel, n)] = ("symlink", os.readlink(p))
                continue
            with open(p, "rb") as f:
                out[os.path.join(rel, n)] = f.read() if os.path.getsize(p) < 65536 else os.path.getsize(p)
    return out


# ---- the everyday cases ------------------------------------------------------------------------
# Each takes (s, bare, conf) and asserts. CASES keeps their order.

CASES = []
SIGNAL_CASES = []


def case(fn):
    CASES.append(fn)
    return fn


def signal_case(fn):
    SIGNAL_CASES.append(fn)
    return fn


@case
def exit_statuses(s, bare, conf):
    for n in (0, 1, 2, 42, 125, 126, 127, 128, 255):
        rb, rc = both(bare, conf, ["sh", "-c", "exit %d" % n])
        assert rc.rc == n, (n, rc)


@case
def binary_round_trip_50mb(s, bare, conf):
    data = os.urandom(BIG)
    rb, rc = both(bare, conf, ["cat"], input=data)
    assert rc.out == data and len(rc.out) == BIG


@case
def binary_output_every_byte(s, bare, conf):
    rb, rc = both(bare, conf, ["sh", "-c", "i=0; while [ $i -lt 256 ]; do printf \"\\\\$(printf %o $i)\"; "
                                           "i=$((i+1)); done"])
    assert rc.out == bytes(range(256)), rc


@case
def stderr_into_stdout_keeps_its_order(s, bare, conf):
    rb, rc = both(bare, conf, ["sh", "-c", "for i in 1 2 3 4 5; do echo out$i; echo err$i >&2; done 2>&1"])
    assert rc.out == b"".join(b"out%d\nerr%d\n" % (i, i) for i in range(1, 6)), rc


@case
def pipeline(s, bare, conf):
    rb, rc = both(bare, conf, ["sh", "-c", "printf 'b\\na\\nc\\n' | sort | tr a-z A-Z | sed 's/^/> /'"])
    assert rc.out == b"> A\n> B\n> C\n", rc


@case
def heredoc(s, bare, conf):
    rb, rc = both(bare, conf, ["sh", "-c", "cat <<EOF\nhello $X\n  indented `echo sub`\nEOF\n"],
                  env={"X": "world"})
    assert rc.out == b"hello world\n  indented sub\n", rc


@case
def make_j_in_the_root(s, bare, conf):
    mk = ("all: a b c\n\techo done > all\n"
          "a:\n\techo a > a\n"
          "b:\n\techo b > b\n"
          "c: a b\n\tcat a b > c\n")
    for side in (bare, conf):
        with open(os.path.join(side.ws, "Makefile"), "w") as f:
            f.write(mk)
    rb, rc = bare.run(["make", "-j4"]), conf.run(["make", "-j4"])
    # -j4 runs a and b in either order: the lines, not their order, must match.
    assert sorted(rb.out.splitlines()) == sorted(rc.out.splitlines()), (rb, rc)
    assert rb.err == rc.err and rb.rc == rc.rc == 0, (rb, rc)
    assert tree(bare.ws) == tree(conf.ws)
    assert open(os.path.join(conf.ws, "c")).read() == "a\nb\n"


# Two jobs that each wait (up to 10 s) for the other to start: both see the other only when make runs
# them at once, which a sub-make does only with the jobserver its parent passed.
SUB_MAKEFILE = "all: a b\n\t@echo both\n" + "".join(
    "%s:\n\t@touch %s.started; i=0; while [ ! -e %s.started ] && [ $$i -lt 100 ]; do sleep 0.1; i=$$((i+1)); "
    "done; if [ -e %s.started ]; then echo %s saw %s; else echo %s ran alone; fi\n" % (me, me, other, other, me, other, me)
    for me, other in (("a", "b"), ("b", "a")))


@case
def make_j4_keeps_its_jobserver_in_a_recursive_confined_make(s, bare, conf):
    # The scenario (issue 42): `make -j4` outside, whose '+' rule runs dsh-confine -- make -C
    # sub; the inner make must get the jobserver (no "jobserver unavailable: using -j1" warning).
    for side in (bare, conf):
        os.makedirs(os.path.join(side.ws, "sub"))
        with open(os.path.join(side.ws, "outer.mk"), "w") as f:
            f.write("all:\n\t+$(RUN)\n")
        with open(os.path.join(side.ws, "sub", "Makefile"), "w") as f:
            f.write(SUB_MAKEFILE)
    wrap = ["sh", "-c", 'exec make -s -j4 -f outer.mk RUN="$*"', "sh"]
    rb, rc = bare.run(["make", "-C", "sub"], wrap=wrap), conf.run(["make", "-C", "sub"], wrap=wrap)
    assert sorted(rb.out.splitlines()) == sorted(rc.out.splitlines()), (rb, rc)
    assert rb.err == rc.err == b"" and rb.rc == rc.rc == 0, (rb, rc)
    assert sorted(rc.out.splitlines()) == [b"a saw b", b"b saw a", b"both"], rc


@case
def git_init_and_commit_in_the_root(s, bare, conf):
    env = {"GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "T",
           "GIT_COMMITTER_EMAIL": "t@example.org", "GIT_AUTHOR_DATE": "2020-01-01T00:00:00Z",
           "GIT_COMMITTER_DATE": "2020-01-01T00:00:00Z", "GIT_CONFIG_NOSYSTEM": "1"}
    script = ("git init -q -b main . && echo hello > f && git add f && git commit -q -m first && "
              "git log --format='%H %s' && git status --short && echo ok")
    rb, rc = both(bare, conf, ["sh", "-c", script], env=env)
    assert rc.out.endswith(b" first\nok\n"), rc
    assert os.path.isdir(os.path.join(conf.ws, ".git", "objects"))


@case
def tmp_round_trip_with_the_host(s, bare, conf):
    tag = "dsh-dropin-%d-%s" % (os.getpid(), conf.runner)
    host_file = "/tmp/%s-from-host" % tag
    with open(host_file, "w") as f:
        f.write("put there by the test\n")
    try:
        outs = {}
        for side in (bare, conf):
            out = "/tmp/%s-%s" % (tag, side.name)
            outs[side.name] = out
            r = side.run(["sh", "-c", 'cat "$1" && echo "written by $2" > "$3" && cat "$3"', "sh", host_file,
                          "the command", out])
            assert r.rc == 0 and r.out == b"put there by the test\nwritten by the command\n", (side.name, r)
        # What the command wrote is the host's /tmp, seen from outside.
        for name, out in outs.items():
            assert open(out).read() == "written by the command\n", name
    finally:
        for p in [host_file] + ["/tmp/%s-%s" % (tag, n) for n in ("bare", "confined")]:
            if os.path.exists(p):
                os.unlink(p)


@case
def a_command_installed_under_tmp_runs(s, bare, conf):
    d = "/tmp/dsh-dropin-bin-%d-%s" % (os.getpid(), conf.runner)
    os.mkdir(d)
    os.chmod(d, 0o755)
    try:
        prog = os.path.join(d, "hello-tool")
        with open(prog, "w") as f:
            f.write("#!/bin/sh\necho \"tool says $*\"\n")
        os.chmod(prog, 0o755)
        rb, rc = both(bare, conf, [prog, "a", "b c"])
        assert rc.out == b"tool says a b c\n" and rc.rc == 0, rc
        # By name, on $PATH.
        env = {"PATH": d + ":" + STD_PATH}
        rb, rc = both(bare, conf, ["hello-tool", "x"], env=env)
        assert rc.out == b"tool says x\n", rc
    finally:
        shutil.rmtree(d, ignore_errors=True)


@case
def a_nested_dsh_confine_narrows_the_mode(s, bare, conf):
    # The binary copied under /tmp, too: it must still be there, and still confine.
    d = "/tmp/dsh-dropin-nested-%d-%s" % (os.getpid(), conf.runner)
    os.mkdir(d)
    os.chmod(d, 0o755)
    try:
        inner = os.path.join(d, "dsh-confine")
        shutil.copy2(DSH, inner)
        for binary in (DSH, inner):
            script = ('echo before > w; "$1" --mode read-only --runner landlock -- sh -c "echo inner > n" '
                      '2>/dev/null; echo "inner=$?"; "$1" --mode read-only -- cat w')
            rb, rc = both(bare, conf, ["sh", "-c", script, "sh", binary])
            assert rc.out == b"inner=2\nbefore\n", (binary, rc)
            assert not os.path.exists(os.path.join(conf.ws, "n")) and not os.path.exists(os.path.join(bare.ws, "n"))
    finally:
        shutil.rmtree(d, ignore_errors=True)


@case
def a_background_job_whose_output_lands(s, bare, conf):
    # The job writes once the shell has written fg2 (a FIFO the shell opens after that), as a job
    # that takes a while would.
    rb, rc = both(bare, conf, ["sh", "-c", "echo fg1; mkfifo go; (read _ < go; echo bg; echo bg-file > bg.txt) & echo fg2; "
                                           "echo > go; rm go; wait; cat bg.txt"])
    assert rc.out == b"fg1\nfg2\nbg\nbg-file\n", rc


@case
def options_after_the_command_are_the_commands(s, bare, conf):
    for words in (["--mode", "danger-full-access"], ["--supervise"], ["--root", "/"], ["--writable", "/x", "y"],
                  ["--", "--help"], ["-h"], ["--markers", "--dry-run"]):
        rb, rc = both(bare, conf, ["echo"] + words, dashdash=False)
        assert rc.out == (" ".join(words) + "\n").encode(), (words, rc)


@case
def env_with_a_variable_set(s, bare, conf):
    rb, rc = both(bare, conf, ["sh", "-c", "env | LC_ALL=C sort"], env={"DROPIN_VAR": "some value=with=equals"})
    assert b"DROPIN_VAR=some value=with=equals\n" in rc.out, rc


@case
def cd_and_pwd(s, bare, conf):
    for side in (bare, conf):
        os.makedirs(os.path.join(side.ws, "sub dir", "deeper"))
    rb, rc = both(bare, conf, ["sh", "-c", 'pwd; cd "sub dir/deeper" && pwd && cd ../.. && pwd -P && echo "$PWD"'])
    assert conf.norm(rc.out) == b"$WS\n$WS/sub dir/deeper\n$WS\n$WS\n", rc


@case
def umask_is_kept_and_honoured(s, bare, conf):
    script = "umask; touch a; stat -c %a a; umask 077; touch b; stat -c %a b"
    for mask in (0o022, 0o002, 0o027):
        rb, rc = both(bare, conf, ["sh", "-c", script], wrap=["sh", "-c", "umask %03o; exec \"$@\"" % mask, "sh"])
        assert rc.out.splitlines()[0] == b"%04o" % mask, (mask, rc)


@case
def ulimit_n_is_kept(s, bare, conf):
    rb, rc = both(bare, conf, ["sh", "-c", "ulimit -n; ulimit -Sn 64; ulimit -n; ulimit -Hn"],
                  wrap=["sh", "-c", "ulimit -Sn 512; exec \"$@\"", "sh"])
    assert rc.out.splitlines()[:2] == [b"512", b"64"], rc


@case
def the_cpu_affinity_is_the_callers(s, bare, conf):
    # The command runs on the CPUs the bare command would: all, or the one
    # the caller chose (a launcher that narrowed its own mask to place its
    # child, as one measured in session 15, must give the caller's back).
    cpus = sorted(os.sched_getaffinity(0))
    script = "grep Cpus_allowed_list /proc/self/status; nproc"
    rb, rc = both(bare, conf, ["sh", "-c", script])
    assert rc.out.endswith(b"\n%d\n" % len(cpus)), rc
    rb, rc = both(bare, conf, ["sh", "-c", script], wrap=["taskset", "-c", str(cpus[-1])])
    assert rc.out.endswith(b"\n1\n"), rc


@case
def argv_with_spaces_newlines_and_non_utf8(s, bare, conf):
    args = ["a b", "x\ny", "", " lead", "tab\there", os.fsdecode(b"\xff\xfe latin \xe9"), "quote'\"", "*", "$HOME"]
    rb, rc = both(bare, conf, ["printf", "[%s]\\n"] + args)
    assert rc.out == b"".join(b"[" + os.fsencode(a) + b"]\n" for a in args), rc


@case
def a_large_argv(s, bare, conf):
    args = ["argument-%05d-%s" % (i, "x" * 150) for i in range(5000)]  # ~800 KB
    rb, rc = both(bare, conf, ["sh", "-c", 'echo $#; printf "%s\\n" "$@" | md5sum', "sh"] + args)
    assert rc.out.splitlines()[0] == b"5000", rc


@case
def more_than_9000_arguments(s, bare, conf):
    # bwrap refuses a command line of more than 9000 words in all (its MAX_ARGS): a
    # command that long reaches the stage through the launcher's record instead,
    # word for word (a word that is not UTF-8 included).
    args = ["a%d" % i for i in range(20000)] + [os.fsdecode(b"non-utf8-\xff-word")]
    rb, rc = both(bare, conf, ["sh", "-c", 'echo $#; printf "%s\\n" "$@" | md5sum', "sh"] + args)
    assert rc.out.splitlines()[0] == b"20001", rc


@case
def a_script_by_its_shebang(s, bare, conf):
    for side in (bare, conf):
        p = os.path.join(side.ws, "script.sh")
        with open(p, "w") as f:
            f.write("#!/bin/sh\necho \"script $0 got $# args: $*\"\nexit 3\n")
        os.chmod(p, 0o755)
    rb, rc = both(bare, conf, ["./script.sh", "one", "two"])
    assert rc.out == b"script ./script.sh got 2 args: one two\n" and rc.rc == 3, rc


@case
def exec_replacement(s, bare, conf):
    rb, rc = both(bare, conf, ["sh", "-c", 'echo before; exec sh -c "echo replaced; exit 9"; echo never'])
    assert rc.out == b"before\nreplaced\n" and rc.rc == 9, rc


@case
def read_from_a_stdin_pipe(s, bare, conf):
    rb, rc = both(bare, conf, ["sh", "-c", 'read a; read b; echo "<$b><$a>"; cat'],
                  input=b"line one\nline two\nrest\n")
    assert rc.out == b"<line two><line one>\nrest\n", rc


@case
def stderr_only_output(s, bare, conf):
    rb, rc = both(bare, conf, ["sh", "-c", "echo only-on-stderr >&2; exit 3"])
    assert rc.out == b"" and rc.err == b"only-on-stderr\n" and rc.rc == 3, rc


@case
def empty_output(s, bare, conf):
    rb, rc = both(bare, conf, ["true"])
    assert rc.out == rc.err == b"" and rc.rc == 0, rc


@case
def a_pipe_closed_early_inside(s, bare, conf):
    rb, rc = both(bare, conf, ["sh", "-c", "yes | head -n 3; echo after"])
    assert rc.out == b"y\ny\ny\nafter\n", rc


@case
def the_callers_pipe_closed_early(s, bare, conf):
    # The reader of dsh-confine's stdout goes away: the command gets SIGPIPE, as it would bare.
    statuses = []
    for side in (bare, conf):
        p = side.popen(["yes"])
        assert p.stdout.read(4096).startswith(b"y\n")
        p.stdout.close()
        p.wait(timeout=30)
        p.stderr.close()
        statuses.append(shell_status(p.returncode))
    assert statuses == [128 + signal.SIGPIPE] * 2, statuses


@case
def python_multiprocessing_pool_lock_and_process_pool(s, bare, conf):
    # Issue 42: POSIX semaphores and shared memory live in /dev/shm. bwrap gives the command a
    # private, writable one (workspace-write), so the run equals the bare one. Landlock alone has
    # no mount namespace: the host's /dev/shm is never granted, and the report says so (gap shm):
    # that is the stated difference, asserted here, not skipped.
    script = ("import multiprocessing as m, concurrent.futures as f\n"
              "with m.Pool(2) as p: print(p.map(abs, [-1, -2, -3]))\n"
              "l = m.Lock(); l.acquire(); l.release(); print('lock')\n"
              "with f.ProcessPoolExecutor(2) as e: print(list(e.map(abs, [-4, -5])))\n")
    argv = ["python3", "-c", script]
    rb = bare.run(argv)
    assert rb.rc == 0 and rb.out == b"[1, 2, 3]\nlock\n[4, 5]\n", rb
    if conf.runner == "bwrap":
        same(bare, conf, rb, conf.run(argv))
        return
    rc = conf.run(argv)
    assert rc.rc != 0 and b"PermissionError" in rc.err, rc
    r = dsh(["--mode", "workspace-write", "--root", conf.ws, "--runner", "landlock"] + conf.extra + ["--", "true"],
            s, cwd=conf.ws)
    gaps = {g["effect"]: g for g in r.rec("confinement")["gaps"]}
    assert "shm" in gaps and "--runner bwrap" in gaps["shm"]["detail"] and not gaps["shm"]["ownEffect"], r


@case
def writes_the_mode_allows_and_the_one_it_denies(s, bare, conf):
    outs = {}
    for side in (bare, conf):
        outs[side.name] = os.path.join(side.s.base, "outside-" + side.name)
        os.mkdir(outs[side.name])
    script = ('mkdir -p d/e && echo in > d/e/f && ln -s d/e/f link && mv d/e/f d/g && cat link 2>/dev/null; '
              'cat d/g; echo t > "$TMPDIR/t-$2" && cat "$TMPDIR/t-$2"; '
              'echo out > "$1/o" 2>/dev/null; echo "outside=$?"')
    r = {}
    for side in (bare, conf):
        r[side.name] = side.run(["sh", "-c", script, "sh", outs[side.name], side.name])
    # Inside the root and $TMPDIR: the same.
    assert tree(bare.ws) == tree(conf.ws)
    assert r["bare"].out == b"in\nt\noutside=0\n", r
    # Outside: denied confined, and only there; nothing landed.
    assert r["confined"].out == b"in\nt\noutside=2\n", r
    assert r["bare"].rc == r["confined"].rc == 0, r
    assert os.path.exists(os.path.join(outs["bare"], "o"))
    assert not os.path.exists(os.path.join(outs["confined"], "o"))


@case
def locale_and_utf8_output(s, bare, conf):
    env = {"LC_ALL": "C.UTF-8"}
    rb, rc = both(bare, conf, ["sh", "-c", "printf 'h\\303\\251llo \\342\\234\\223 \\360\\237\\246\\200\\n'; "
                                           "printf '\\303\\274\\303\\266' | wc -m; locale charmap"], env=env)
    assert rc.out == "héllo ✓ 🦀\n2\nUTF-8\n".encode(), rc


@case
def dev_null_and_tee(s, bare, conf):
    rb, rc = both(bare, conf, ["sh", "-c", "echo gone > /dev/null; echo kept | tee t.txt; cat t.txt </dev/null; "
                                           "cat /dev/null | wc -c"])
    assert rc.out == b"kept\nkept\n0\n", rc


@case
def mktemp_in_tmpdir_and_in_tmp(s, bare, conf):
    rb, rc = both(bare, conf, ["sh", "-c", 'f=$(mktemp) && g=$(mktemp -p /tmp) && echo hi > "$f" && echo ho > "$g" '
                                           '&& cat "$f" "$g" && rm "$f" "$g" && echo cleaned'])
    assert rc.out == b"hi\nho\ncleaned\n", rc


@case
def xargs_in_parallel(s, bare, conf):
    rb, rc = both(bare, conf, ["sh", "-c", "printf '3\\n1\\n2\\n' | xargs -n1 -P3 sh -c 'echo item $0' | sort"])
    assert rc.out == b"item 1\nitem 2\nitem 3\n", rc


@case
def identity_and_a_missing_command(s, bare, conf):
    rb, rc = both(bare, conf, ["sh", "-c", "id -u; id -g; hostname >/dev/null && echo host; "
                                           "no-such-command-dropin 2>/dev/null; echo \"missing=$?\""])
    assert rc.out.endswith(b"host\nmissing=127\n"), rc


# ---- signal cases ------------------------------------------------------------------------------

def _read_until(p, token, timeout=10):
    """Reads p's stdout until `token` appears; returns what was read."""
    buf = b""
    deadline = time.time() + timeout
    fd = p.stdout.fileno()
    os.set_blocking(fd, False)
    while token not in buf and time.time() < deadline:
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:
            time.sleep(0.02)
            continue
        if not chunk:
            break
        buf += chunk
    os.set_blocking(fd, True)
    return buf


def unique_sleep(seconds):
    """A `sleep` argument of `seconds` (and a few millionths) that no other process of the machine has."""
    return "%.1f%06d%06d" % (seconds, os.getpid() % 1000000, int(time.time() * 1e6) % 1000000)


def sleeping(token):
    """Pids of `sleep TOKEN`, with their state (S, T, ...)."""
    found = {}
    for pid in processes_naming(token):
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                if f.read() != b"sleep\0" + token.encode() + b"\0":
                    continue
            with open("/proc/%d/stat" % pid) as f:
                found[pid] = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            pass
    return found


def command_states(token):
    """The states (S, T, ...) of the command's own processes: the shell whose script names
    `token` (under bwrap, bwrap's copies of that argv are not the command's) and its sleep."""
    states = []
    for pid in processes_naming(token):
        argv, st = proc_argv(pid), proc_stat(pid)
        if argv and st and argv[:2] in ([b"sh", b"-c"], [b"sleep", token.encode()]):
            states.append(st[1])
    return states


def _wait_for(what, cond, timeout=10):
    deadline = time.time() + timeout
    while not cond() and time.time() < deadline:
        time.sleep(0.01)
    assert cond(), what


def _signalled(side, sig, to_group, wrap=()):
    # Signalled once the shell waits for its job (the job's sleep, found by its unique argument,
    # runs): its trap is set and the job's pid is known, whatever the load.
    token = unique_sleep(30)
    p = side.popen(["sh", "-c", 'trap "echo cleanup $1; kill \\$! 2>/dev/null; exit 0" %s; echo ready; sleep %s >/dev/null & wait'
                    % (sig.name[3:], token), "sh", sig.name], start_new_session=True, wrap=wrap)
    seen = _read_until(p, b"ready\n")
    _wait_for("the job never ran", lambda: any(st not in ("Z", "X") for st in sleeping(token).values()))
    if to_group:
        os.killpg(p.pid, sig)
    else:
        p.send_signal(sig)
    out, err = p.communicate(timeout=20)
    return Run(p.returncode, seen + out, err)


def _trap(sig, to_group=False):
    def check(s, bare, conf):
        # To the group: the command gets it from the kernel, and dsh-confine
        # does not forward it once more (issue 15).
        if to_group and SUPERVISE_FORWARDS_GROUP_SIGNALS_TWICE:
            skip(SUPERVISE_TWICE_REASON)
        rb, rc = _signalled(bare, sig, to_group), _signalled(conf, sig, to_group)
        same(bare, conf, rb, rc)
        assert rc.out == b"ready\ncleanup %s\n" % sig.name.encode() and rc.rc == 0, rc
    check.__name__ = "a_trap_on_" + sig.name[3:].lower() + ("_sent_to_the_group" if to_group else "") + "_runs"
    return check


signal_case(_trap(signal.SIGTERM))
signal_case(_trap(signal.SIGINT))
signal_case(_trap(signal.SIGINT, to_group=True))  # as Ctrl-C sends it: to the foreground group
signal_case(_trap(signal.SIGHUP))
signal_case(_trap(signal.SIGTERM, to_group=True))  # as a service manager's KillMode sends it
signal_case(_trap(signal.SIGHUP, to_group=True))


@signal_case
def a_trap_on_term_runs_where_no_pidfd_can_be_opened(s, bare, conf):
    # A kernel or a seccomp profile (a container's) that refuses pidfd_open,
    # for dsh-confine, bwrap and the stage alike: the signal still reaches
    # the command (under bwrap by the stage's pid, which the kernel gives
    # with its ready line), and its handler runs once, as bare.
    wrap = [tool("sysfault"), "ENOSYS", "434", "--"]
    rb, rc = _signalled(bare, signal.SIGTERM, False, wrap), _signalled(conf, signal.SIGTERM, False, wrap)
    same(bare, conf, rb, rc)
    assert rc.out == b"ready\ncleanup SIGTERM\n" and rc.rc == 0, rc


@signal_case
def a_trap_on_term_the_command_sends_to_its_own_group_runs_once(s, bare, conf):
    # kill(0, SIGTERM) from inside: the group is the caller's (dsh-confine and,
    # under bwrap, bwrap itself are in it); the trap runs once, as bare, and
    # nothing of the runner dies of it.
    argv = ["sh", "-c", 'trap "echo cleanup; exit 0" TERM; echo ready; kill -TERM 0; sleep 5; echo missed']

    def one(side):
        p = side.popen(argv, start_new_session=True)
        out, err = p.communicate(timeout=20)
        return Run(p.returncode, out, err)
    rb, rc = one(bare), one(conf)
    same(bare, conf, rb, rc)
    assert rc.out == b"ready\ncleanup\n" and rc.rc == 0, rc


@signal_case
def a_trap_under_timeout_runs_once(s, bare, conf):
    # timeout(1) sends TERM to its child (dsh-confine) and then to its whole
    # group: the command gets the group's copy, and the direct one is not
    # forwarded on top (issue 15's first report: the trap never ran).
    # The bare command gets both copies itself, and on a loaded machine the
    # second can land while its trap still runs (dash then runs it again):
    # its output is one or two lines, where the confined command's is one.
    # after_start(3), not 1 s: under the sanitizers and load, set-up alone took over 1 s (no trap
    # yet). The sleep outlasts it, so that only the timeout ends the shell.
    argv = ["sh", "-c", 'trap "echo cleanup; exit 0" TERM; sleep %d & wait' % (8 * STARTUP)]
    rb, rc = bare.run(argv, wrap=["timeout", after_start(3)]), conf.run(argv, wrap=["timeout", after_start(3)])
    assert rb.out in (b"cleanup\n", b"cleanup\ncleanup\n") and rb.rc == 124, rb
    assert bare.norm(rb.err) == conf.norm(rc.err), (rb, rc)
    assert rc.out == b"cleanup\n" and rc.rc == 124, rc  # timeout's own status for a command it timed out


@signal_case
def signals_the_caller_ignores_stay_ignored_and_no_others(s, bare, conf):
    # bwrap starts with the terminating forwarded signals ignored (it shares
    # the caller's group); the stage puts the caller's dispositions back: the
    # command ignores exactly what the bare command would (nohup's SIGHUP).
    def ignore():
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    def one(side, pre):
        p = side.popen(["grep", "^SigIgn", "/proc/self/status"], preexec_fn=pre)
        out, err = p.communicate(timeout=60)
        return Run(p.returncode, out, err)
    for pre in (None, ignore):
        rb, rc = one(bare, pre), one(conf, pre)
        same(bare, conf, rb, rc)
        mask = int(rc.out.split()[1], 16)
        assert bool(mask & (1 << (signal.SIGHUP - 1))) == (pre is not None), rc
        assert not mask & (1 << (signal.SIGTERM - 1)) and not mask & (1 << (signal.SIGINT - 1)), rc


@signal_case
def kill_stop_and_cont(s, bare, conf):
    if conf.runner == "bwrap" and BWRAP_GROUP_STOP_STOPS_ONLY_THE_PARENT:
        skip(BWRAP_STOP_REASON)

    def one(side):
        token = unique_sleep(0.6)
        p = side.popen(["sh", "-c", "echo ready; sleep %s; echo done" % token], start_new_session=True)
        try:
            seen = _read_until(p, b"ready\n")
            ready = time.time()
            os.killpg(p.pid, signal.SIGSTOP)  # as a shell's job control stops a job
            # The stop reaches the command (its shell, or the sleep it starts; under bwrap too),
            # and nothing moves past the end of its sleep.
            _wait_for("the command never stopped", lambda: "T" in command_states(token))
            time.sleep(max(0.0, ready + float(token) + 0.2 - time.time()))
            early = _read_until(p, b"done", timeout=0.1)
        finally:
            os.killpg(p.pid, signal.SIGCONT)
        out, err = p.communicate(timeout=20)
        return Run(p.returncode, seen + early + out, err), early
    (rb, eb), (rc, ec) = one(bare), one(conf)
    assert eb == ec == b"", (eb, ec)  # stopped: nothing moved
    same(bare, conf, rb, rc)
    assert rc.out == b"ready\ndone\n" and rc.rc == 0, rc


@signal_case
def sleep_killed_by_timeout(s, bare, conf):
    token = "%d.%d" % (7 + os.getpid() % 50, os.getpid() % 997)
    rb, rc = both(bare, conf, ["sleep", token], wrap=["timeout", "0.7"])
    assert rc.rc == 124, rc
    # Gone at once, or soon (its parent reaps it); a sleep left running would run 7 s or more.
    deadline = time.time() + 5
    while processes_naming("sleep\0" + token) and time.time() < deadline:
        time.sleep(0.01)
    assert processes_naming("sleep\0" + token) == [], "a sleep was left running"


# ---- the variants ------------------------------------------------------------------------------

def _make(fn, runner, mode_name, extra, is_signal):
    def test(s):
        if runner == "bwrap":
            need_bwrap()
            if is_signal and NEEDS_FORWARDER:
                skip(FORWARDER_REASON)
        else:
            need_landlock()
        bare = Side(s, "bare", runner, list(extra))
        conf = Side(s, "confined", runner, list(extra))
        # The confined side really is confined by the runner asked for.
        probe = conf.run(["sh", "-c", "echo x > \"$1/o\" 2>/dev/null; echo $?", "sh", s.outside])
        assert probe.out == b"2\n" and not os.path.exists(os.path.join(s.outside, "o")), probe
        fn(s, bare, conf)
    test.__name__ = "test_%s__%s__%s" % (fn.__name__, runner, mode_name)
    return test


# DSH_DROPIN_ONLY=word runs only the tests whose name holds it (while working on one case).
_ONLY = os.environ.get("DSH_DROPIN_ONLY", "")
for _fn, _sig in [(f, False) for f in CASES] + [(f, True) for f in SIGNAL_CASES]:
    for _runner in RUNNERS:
        for _mode_name, _extra in MODES:
            _t = _make(_fn, _runner, _mode_name, _extra, _sig)
            if _ONLY in _t.__name__:
                globals()[_t.__name__] = _t


def test_dropin_has_at_least_30_everyday_cases(s):
    assert len(CASES) + len(SIGNAL_CASES) >= 30, len(CASES)


if __name__ == "__main__":
    main()
