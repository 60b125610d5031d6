"""Issue 42: the tool-cache preset (--cache) and the agent preset (--agent), from outside.

--cache: npm really works inside with it on a fresh home, and fails without it, against the bare
command; what was granted is in the report; the tools' credentials stay read-only (and hidden with
--hide-secrets). --agent: each part holds from outside (a write outside the root fails, a loopback
listener the test makes gets nothing, a planted secret is not read, a secret variable is absent),
and options that would widen it are refused.
"""
import json
import os
import pwd
import shutil
import socket
import subprocess
import tarfile

from harness import EXEC_SUPERVISE, RUNNERS, dsh, main, matrix, need


def _passwd_home():
    return pwd.getpwuid(os.getuid()).pw_dir


def _home_usable():
    h = _passwd_home()
    return os.path.isdir(h) and os.stat(h).st_uid == os.getuid() and os.access(h, os.W_OK)


class FreshHome:
    """A HOME nothing ever ran in. Below the caller's passwd home when that is the caller's own
    (root here): a missing cache is then made, as on a fresh account. Otherwise (the test user,
    whose passwd home is /nonexistent) the scratch's own HOME, where dsh-confine makes nothing:
    `made` is False and the caller makes the cache directory itself."""
    def __init__(self, s):
        self.made = _home_usable()
        if self.made:
            self.path = os.path.join(_passwd_home(), ".dsh-e2e-presets-%d" % os.getpid())
            shutil.rmtree(self.path, ignore_errors=True)
            os.mkdir(self.path, 0o755)
        else:
            self.path = s.home

    def __enter__(self):
        return self

    def __exit__(self, *a):
        if self.made:
            shutil.rmtree(self.path, ignore_errors=True)


def _npm_tarball(s):
    pkg = s.p("base", "pkgsrc", "package")
    os.makedirs(pkg)
    with open(os.path.join(pkg, "package.json"), "w") as f:
        f.write('{"name": "dsh-e2e-pkg", "version": "1.0.0"}\n')
    tgz = s.p("base", "pkg.tgz")
    with tarfile.open(tgz, "w:gz") as t:
        t.add(pkg, arcname="package")
    os.chmod(tgz, 0o644)
    return tgz


def _cached(npm_dir):
    """The files npm's content store holds (none when it never wrote)."""
    out = []
    for d, _, files in os.walk(os.path.join(npm_dir, "_cacache")):
        out += [os.path.join(d, f) for f in files]
    return out


@matrix(runner=RUNNERS, supervise=EXEC_SUPERVISE)
def test_npm_cache_preset_on_a_fresh_home(s, runner, supervise):
    need(shutil.which("npm") is not None, "npm is not installed")
    tgz = _npm_tarball(s)
    with FreshHome(s) as home:
        env = {"HOME": home.path, "npm_config_update_notifier": "false"}
        npm_dir = os.path.join(home.path, ".npm")
        cmd = ["--", "npm", "cache", "add", tgz]
        base = ["--mode", "workspace-write", "--root", s.ws, "--runner", runner] + supervise
        # Without the preset: npm cannot write its cache, fails, and nothing lands on the host.
        r = dsh(base + cmd, s, cwd=s.ws, env=env, timeout=240)
        assert r.rc != 0, r
        assert _cached(npm_dir) == [], r
        if not home.made:
            # No home of the caller's: the preset cannot make ~/.npm, and says how to.
            r = dsh(base + ["--cache", "npm"] + cmd, s, cwd=s.ws, env=env, timeout=240)
            assert r.rc == 125 and r.rec("error")["code"] == "INVALID_WRITABLE_PATH", r
            assert "mkdir -p %s" % npm_dir in r.err, r
            assert not os.path.exists(npm_dir)
            os.mkdir(npm_dir, 0o700)
        r = dsh(base + ["--cache", "npm"] + cmd, s, cwd=s.ws, env=env, timeout=240)
        assert r.rc == 0, r
        assert _cached(npm_dir), r  # the package is in the host's cache
        st = os.stat(npm_dir)
        assert st.st_uid == os.getuid() and (not home.made or st.st_mode & 0o777 == 0o700), st
        roots = {w["path"]: w for w in r.rec("confinement")["writableRoots"]}
        assert roots[npm_dir]["source"] == "cache" and roots[npm_dir]["cache"] == "npm", roots
        assert roots[npm_dir].get("created") is (True if home.made else None), roots
        # The bare command does the same (drop-in): rc 0, its cache filled.
        bare_home = os.path.join(s.base, "bare-home")
        os.mkdir(bare_home)
        benv = dict(s.env(), **env)
        benv["HOME"] = bare_home
        b = subprocess.run(["npm", "cache", "add", tgz], cwd=s.ws, env=benv, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=240)
        assert b.returncode == r.rc == 0 and _cached(os.path.join(bare_home, ".npm")), b


def test_cache_follows_the_tools_variables(s):
    # npm_config_cache, PIP_CACHE_DIR, CARGO_HOME, GOMODCACHE/GOPATH/GOCACHE, XDG_CACHE_HOME.
    for d in ("npmc", "pipc", "cargoh/registry", "cargoh/git", "gomod", "gop/pkg/sumdb", "xdg/go-build",
              "xdg/yarn", "m2/.m2/repository", "ccd"):
        os.makedirs(s.p("base", d))
    env = {"npm_config_cache": s.p("base", "npmc"), "PIP_CACHE_DIR": s.p("base", "pipc"),
           "CARGO_HOME": s.p("base", "cargoh"), "GOMODCACHE": s.p("base", "gomod"),
           "GOPATH": s.p("base", "gop") + ":/elsewhere", "XDG_CACHE_HOME": s.p("base", "xdg"),
           "HOME": s.p("base", "m2"), "CCACHE_DIR": s.p("base", "ccd"), "GOCACHE": None,
           "YARN_CACHE_FOLDER": None}
    r = dsh(["--mode", "workspace-write", "--root", s.ws, "--cache", "npm,pip,cargo", "--cache", "go,yarn,maven,ccache",
             "--", "true"], s, env=env)
    assert r.rc == 0, r
    got = {w["path"]: w.get("cache") for w in r.rec("confinement")["writableRoots"] if w["source"] == "cache"}
    want = {s.p("base", "npmc"): "npm", s.p("base", "pipc"): "pip", s.p("base", "cargoh/registry"): "cargo",
            s.p("base", "cargoh/git"): "cargo", s.p("base", "gomod"): "go", s.p("base", "gop/pkg/sumdb"): "go",
            s.p("base", "xdg/go-build"): "go", s.p("base", "xdg/yarn"): "yarn",
            s.p("base", "m2/.m2/repository"): "maven", s.p("base", "ccd"): "ccache"}
    assert got == want, (got, r)
    # --setenv is what the tool will read: followed.
    os.mkdir(s.p("base", "other"))
    r = dsh(["--mode", "workspace-write", "--root", s.ws, "--cache", "npm", "--setenv",
             "npm_config_cache=" + s.p("base", "other"), "--", "true"], s, env=env)
    assert r.rc == 0 and s.p("base", "other") in [w["path"] for w in r.rec("confinement")["writableRoots"]], r
    # The config's "cache" does the same.
    cfg = s.p("base", "config.json")
    with open(cfg, "w") as f:
        json.dump({"cache": ["pip"]}, f)
    r = dsh(["--config", cfg, "--mode", "workspace-write", "--root", s.ws, "--", "true"], s, env=env)
    assert r.rc == 0 and {w["path"]: w.get("cache") for w in r.rec("confinement")["writableRoots"]}.get(
        s.p("base", "pipc")) == "pip", r


def test_cache_refusals_name_the_fix(s):
    ws = ["--mode", "workspace-write", "--root", s.ws]
    r = dsh(ws + ["--cache", "nmp", "--", "true"], s)
    assert r.rc == 125 and "unknown tool 'nmp'" in r.err and "did you mean npm?" in r.err, r
    r = dsh(["--cache", "npm", "--", "true"], s)
    assert r.rc == 125 and "--cache has no effect in read-only mode" in r.err, r
    r = dsh(ws + ["--cache", "npm", "--", "true"], s, env={"npm_config_cache": "rel/cache"})
    assert r.rc == 125 and "npm_config_cache=rel/cache is not an absolute path" in r.err, r
    # A cache variable naming the home (or /): never the whole home under a cache's name.
    for where in (s.home, "/"):
        r = dsh(ws + ["--cache", "npm", "--", "true"], s, env={"npm_config_cache": where})
        assert r.rc == 125 and "holds your home directory" in r.err, (where, r)


@matrix(runner=RUNNERS, supervise=EXEC_SUPERVISE)
def test_cache_never_grants_the_tools_credentials(s, runner, supervise):
    home = s.home
    cargo = os.path.join(home, ".cargo")
    for d in ("registry", "git", "bin"):
        os.makedirs(os.path.join(cargo, d))
    os.makedirs(os.path.join(home, ".npm"))
    files = [os.path.join(cargo, "credentials.toml"), os.path.join(cargo, "config.toml"),
             os.path.join(home, ".npmrc"), os.path.join(cargo, "bin", "cargo")]
    for p in files:
        with open(p, "w") as f:
            f.write("S:%s\n" % p)
    script = ("for f in %s; do echo x >> \"$f\" 2>/dev/null && echo \"wrote $f\"; done; "
              "echo ok > %s/registry/r && echo ok > %s/.npm/n && echo cache-ok"
              % (" ".join(files), cargo, home))
    r = dsh(["--mode", "workspace-write", "--root", s.ws, "--runner", runner, "--cache", "cargo,npm"] + supervise +
            ["--", "sh", "-c", script], s, env={"CARGO_HOME": None})
    assert r.rc == 0 and "cache-ok" in r.out and "wrote" not in r.out, r
    for p in files:
        assert open(p).read() == "S:%s\n" % p, p
    # --hide-secrets: hidden too (bwrap); Landlock cannot hide, so nothing runs while they exist.
    r = dsh(["--mode", "workspace-write", "--root", s.ws, "--runner", runner, "--cache", "cargo,npm",
             "--hide-secrets"] + supervise + ["--", "cat"] + files[:1] + files[2:3], s, env={"CARGO_HOME": None})
    assert "S:" not in r.out, r
    # bwrap: the files are unreadable (the run goes on, cat fails on them); Landlock: nothing runs.
    assert r.rc == (1 if runner == "bwrap" else 125) and "Permission denied" in r.err if runner == "bwrap" else r.rc == 125, r


# --- --agent ---------------------------------------------------------------------------------

PROBE = r"""
import json, os, socket, sys
cfg = json.loads(sys.argv[1])
out = {}
try:
    open(cfg["outside"], "w").write("x"); out["write_outside"] = True
except OSError:
    out["write_outside"] = False
try:
    open(cfg["inside"], "w").write("x"); out["write_inside"] = True
except OSError:
    out["write_inside"] = False
try:
    c = socket.create_connection(("127.0.0.1", cfg["port"]), timeout=2); c.send(b"reached"); c.close()
    out["connect"] = True
except OSError:
    out["connect"] = False
try:
    out["secret"] = open(cfg["secret"]).read()
except OSError:
    out["secret"] = None
out["env"] = os.environ.get("DSH_E2E_API_TOKEN")
print(json.dumps(out))
"""


def _agent_probe(s, args, plant_secret=True):
    secret = os.path.join(s.home, ".aws", "credentials")
    if plant_secret:
        os.makedirs(os.path.dirname(secret), exist_ok=True)
        with open(secret, "w") as f:
            f.write("S:aws\n")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.5)
    try:
        cfg = {"outside": s.p("outside", "f"), "inside": s.p("ws", "f"), "port": listener.getsockname()[1],
               "secret": secret}
        r = dsh(args + ["--", "python3", "-c", PROBE, json.dumps(cfg)], s, cwd=s.ws,
                env={"DSH_E2E_API_TOKEN": "tok-123"})
        reached = []
        while True:
            try:
                c, _ = listener.accept()
            except OSError:
                break
            c.settimeout(1)
            try:
                reached.append(c.recv(64))
            except OSError:
                reached.append(b"")
            c.close()
    finally:
        listener.close()
    return r, reached


@matrix(runner=RUNNERS, supervise=EXEC_SUPERVISE)
def test_agent_holds_each_part(s, runner, supervise):
    # Without --agent (workspace-write alone) the probe reaches all four: the test can fail.
    r, reached = _agent_probe(s, ["--mode", "workspace-write", "--root", s.ws, "--runner", runner] + supervise,
                              plant_secret=runner == "bwrap")
    assert r.rc == 0, r
    got = json.loads(r.out)
    assert got["connect"] and reached == [b"reached"] and got["env"] == "tok-123", (got, r)
    assert got["write_inside"] and not got["write_outside"], got
    if runner == "bwrap":
        assert got["secret"] == "S:aws\n", got
    os.unlink(s.p("ws", "f"))
    # With --agent: the write outside fails, the listener gets nothing, the secret is not read, the
    # secret variable is absent; the workspace stays writable.
    r, reached = _agent_probe(s, ["--agent", "--root", s.ws, "--runner", runner] + supervise,
                              plant_secret=runner == "bwrap")
    assert r.rc == 0, r
    got = json.loads(r.out)
    # (~/.aws is hidden whole under bwrap: its credentials file is not there at all.)
    assert got == {"write_outside": False, "write_inside": True, "connect": False, "secret": None,
                   "env": None}, (got, r)
    assert reached == [], reached
    assert not os.path.exists(s.p("outside", "f"))
    c = r.rec("confinement")
    assert c["mode"] == "workspace-write" and c["network"]["mode"] == "off", c
    assert "DSH_E2E_API_TOKEN" in c["environment"]["scrubbed"], c
    if runner == "landlock":
        # Landlock cannot hide: with a secret planted, --agent runs nothing, and says why.
        r, reached = _agent_probe(s, ["--agent", "--root", s.ws, "--runner", runner] + supervise)
        assert r.rc == 125 and r.out == "" and reached == [], r


def test_agent_options_beside_it(s):
    for extra in (["--mode", "danger-full-access"], ["--net", "host"], ["--net", "loopback"],
                  ["--net", "allow=example.com"]):
        r = dsh(["--agent"] + extra + ["--root", s.ws, "--", "true"], s)
        assert r.rc == 125 and r.err.startswith("dsh-confine: --agent") and r.err.count("\n") == 1, (extra, r)
    # Narrower or the same: accepted, and it holds.
    r = dsh(["--agent", "--mode", "read-only", "--net", "off", "--root", s.ws, "--", "sh", "-c",
             "echo x > %s/f" % s.ws], s)
    assert r.rc != 0 and not os.path.exists(s.p("ws", "f")), r
    assert r.rec("confinement")["mode"] == "read-only", r
    # --agent twice is an error as any flag given twice.
    r = dsh(["--agent", "--agent", "--", "true"], s)
    assert r.rc == 125, r


if __name__ == "__main__":
    main()
