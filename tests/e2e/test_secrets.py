#!/usr/bin/env python3
"""Issue 37, hiding by directory: --hide-secrets under bwrap, from outside, in a HOME the test makes.

~/.ssh is hidden whole (an empty read-only tmpfs) with its public parts (*.pub, known_hosts*,
config) bound back read-only: a key in a subfolder, behind a link in the workspace or reached
through /proc/self/root is unreadable, and ssh still reads the visible config. Every entry of
the secrets table (a file or a directory under $HOME, or named by a variable) is hidden; a
directory hides what is created in it during the run; the agents' sockets refuse a connection;
config secretPaths adds to the table. Nothing is left on the host.
"""
import json
import os
import select
import socket
import subprocess

from harness import DSH, EXEC_SUPERVISE, MODES, dsh, main, matrix

# The table (src/carveouts.cpp secret_table, man page HIDDEN SECRETS): relative to $HOME, and
# True for a directory. The record must name exactly these (and the variables' ones below).
HOME_TABLE = [
    (".ssh", True), (".gnupg", True), (".1password", True), (".local/share/keyrings", True),
    (".password-store", True), (".config/op", True), (".aws", True), (".config/gcloud", True),
    (".azure", True), (".oci", True), (".config/doctl", True), (".kube", True),
    (".docker/config.json", False), (".config/containers/auth.json", False), (".netrc", False),
    (".authinfo", False), (".authinfo.gpg", False), (".git-credentials", False),
    (".config/git/credentials", False), (".git-credential-cache", True), (".cache/git/credential", True),
    (".config/gh", True), (".config/hub", False), (".config/glab-cli", True), (".npmrc", False),
    (".yarnrc.yml", False), (".pypirc", False), (".cargo/credentials", False),
    (".cargo/credentials.toml", False), (".gem/credentials", False), (".m2/settings.xml", False),
    (".m2/settings-security.xml", False), (".gradle/gradle.properties", False),
    (".composer/auth.json", False), (".config/composer/auth.json", False),
    (".terraform.d/credentials.tfrc.json", False), (".terraformrc", False), (".vault-token", False),
    (".pgpass", False), (".my.cnf", False), (".s3cfg", False), (".boto", False),
    (".config/rclone/rclone.conf", False), (".config/sops/age/keys.txt", False), (".pki/nssdb", True),
    (".codex/auth.json", False), (".claude/.credentials.json", False), (".mozilla", True),
    (".config/google-chrome", True), (".config/chromium", True),
]
# Variable -> (path below base it is set to, the entry below it or "", directory?).
ENV_TABLE = [
    ("GNUPGHOME", "env/gnupghome", "", True), ("PASSWORD_STORE_DIR", "env/pass", "", True),
    ("AWS_SHARED_CREDENTIALS_FILE", "env/awscreds", "", False), ("CLOUDSDK_CONFIG", "env/gcloud", "", True),
    ("AZURE_CONFIG_DIR", "env/azure", "", True), ("DOCKER_CONFIG", "env/docker", "config.json", False),
    ("XDG_RUNTIME_DIR", "run", "gnupg", True), ("XDG_RUNTIME_DIR", "run", "keyring", True),
    ("XDG_RUNTIME_DIR", "run", "gcr", True), ("XDG_RUNTIME_DIR", "run", "containers/auth.json", False),
    ("CARGO_HOME", "env/cargo", "credentials", False), ("CARGO_HOME", "env/cargo", "credentials.toml", False),
    ("NPM_CONFIG_USERCONFIG", "env/npmrc-upper", "", False), ("npm_config_userconfig", "env/npmrc-lower", "", False),
]

# Run inside: for each path, what a reader gets. A socket: connected or not; a directory: its
# listing and every file below it; a file: its text.
PROBE = r"""
import json, os, socket, stat, sys
out = {}
for p in json.loads(sys.argv[1]):
    try:
        if p.endswith(".sock") or os.path.basename(p).startswith("S.") or p.endswith("/bus"):
            s = socket.socket(socket.AF_UNIX)
            try:
                s.connect(p); out[p] = "connected"
            except OSError:
                out[p] = "refused"
        elif os.path.isdir(p):
            seen = []
            for d, dirs, files in os.walk(p):
                for n in sorted(files):
                    if stat.S_ISSOCK(os.lstat(os.path.join(d, n)).st_mode):
                        continue  # probed on its own
                    with open(os.path.join(d, n)) as f:
                        seen.append(f.read())
            out[p] = "".join(seen) or "empty"
        else:
            with open(p) as f:
                out[p] = f.read() or "empty"
    except OSError as e:
        out[p] = "error"
print(json.dumps(out))
"""


def write(path, body):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(body)


def listen(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen(8)
    return srv


def henv(s, h):
    """HOME is the fake one; dsh-confine's own config and probe cache stay in the scratch's usual
    home, so the fake one holds exactly what the test put there."""
    return {"HOME": h, "XDG_CONFIG_HOME": s.p("home", ".config"), "XDG_CACHE_HOME": s.p("home", ".cache")}


def tree(top):
    """Every name below `top` (the host's view), to show nothing was left there."""
    names = []
    for d, dirs, files in os.walk(top):
        names += [os.path.join(d, n) for n in dirs + files]
    return sorted(names)


def ssh_home(s):
    """A HOME with keys in ~/.ssh's subfolders, a public key, known_hosts, a config, a hard-linked
    "public" name and a link to a key kept elsewhere."""
    h = os.path.join(s.base, "shome")
    ssh = os.path.join(h, ".ssh")
    os.makedirs(os.path.join(ssh, "keys", "work"))
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "t", "-f",
                    os.path.join(ssh, "keys", "work", "id_ed25519")], check=True, timeout=60)
    os.rename(os.path.join(ssh, "keys", "work", "id_ed25519.pub"), os.path.join(ssh, "id_ed25519.pub"))
    write(os.path.join(ssh, "id_top"), "PRIVATE-TOP\n")
    write(os.path.join(ssh, "deep", "a", "b", "id_deep"), "PRIVATE-DEEP\n")
    with open(os.path.join(ssh, "id_ed25519.pub")) as f:
        pub = f.read()
    write(os.path.join(ssh, "known_hosts"), "example.invalid " + pub)
    write(os.path.join(ssh, "known_hosts.old"), "old.invalid " + pub)
    write(os.path.join(ssh, "config"), "Host work\n  HostName work.example.invalid\n  User bob\n"
                                       "  IdentityFile ~/.ssh/keys/work/id_ed25519\n")
    os.link(os.path.join(ssh, "id_top"), os.path.join(ssh, "linked.pub"))
    write(os.path.join(h, "elsewhere", "id_ext"), "PRIVATE-EXT\n")
    os.symlink("../elsewhere/id_ext", os.path.join(ssh, "id_ext"))
    return h


@matrix(mode=MODES, supervise=EXEC_SUPERVISE)
def test_ssh_hidden_whole_public_parts_readable(s, mode, supervise):
    """Keys in ~/.ssh's subfolders, at its top, behind a link there, or hard-linked to a public
    name cannot be read: not by name, not through a link in the workspace, not through
    /proc/self/root. The public parts read back and `ssh -G` resolves the visible config."""
    h = ssh_home(s)
    with open(os.path.join(h, ".ssh", "keys", "work", "id_ed25519")) as f:
        key = f.read()
    with open(os.path.join(h, ".ssh", "id_ed25519.pub")) as f:
        pub = f.read()
    os.symlink(os.path.join(h, ".ssh", "keys", "work", "id_ed25519"), os.path.join(s.ws, "peek"))
    before = tree(h)
    k = "$HOME/.ssh/keys/work/id_ed25519"
    # A hidden file reads as nothing (/dev/null), a name in a hidden directory is not there.
    script = ("for f in %s peek /proc/self/root%s $HOME/.ssh/id_top $HOME/.ssh/deep/a/b/id_deep "
              "$HOME/.ssh/id_ext $HOME/elsewhere/id_ext $HOME/.ssh/linked.pub; do "
              "c=$(cat \"$f\" 2>/dev/null); if [ -n \"$c\" ]; then echo \"$c\"; else echo \"hidden $f\"; fi; done; "
              "echo ---; ls -A $HOME/.ssh; echo ---; cat $HOME/.ssh/id_ed25519.pub $HOME/.ssh/known_hosts; "
              "ssh -F $HOME/.ssh/config -G work | grep -E '^(hostname|user) '; "
              "ssh-keygen -F example.invalid -f $HOME/.ssh/known_hosts >/dev/null && echo known; "
              "touch $HOME/.ssh/new 2>/dev/null && echo wrote || echo read-only" % (k, k))
    r = dsh(["--mode", mode, "--root", s.ws, "--runner", "bwrap", "--hide-secrets"] + supervise +
            ["--", "sh", "-c", script], s, cwd=s.ws, env=henv(s, h))
    assert r.rc == 0, r
    got = r.out.split("---\n")
    assert got[0] == ("hidden %s\nhidden peek\nhidden /proc/self/root%s\nhidden $HOME/.ssh/id_top\n"
                      "hidden $HOME/.ssh/deep/a/b/id_deep\nhidden $HOME/.ssh/id_ext\nhidden $HOME/elsewhere/id_ext\n"
                      "hidden $HOME/.ssh/linked.pub\n" % (k, k)).replace("$HOME", h), r
    assert got[1] == "config\nid_ed25519.pub\nknown_hosts\nknown_hosts.old\n", r
    assert got[2] == (pub + "example.invalid " + pub + "user bob\nhostname work.example.invalid\nknown\n"
                      "read-only\n"), r
    assert key not in r.out and "PRIVATE" not in r.out, r
    hidden = {e["path"]: e for e in r.rec("confinement")["hiddenPaths"]}
    assert hidden[h + "/.ssh"]["enforced"] == "empty-tmpfs", hidden
    assert hidden[h + "/.ssh"]["readable"] == ["config", "id_ed25519.pub", "known_hosts", "known_hosts.old"], hidden
    assert hidden[h + "/elsewhere/id_ext"]["enforced"] == "dev-null-bind", hidden
    assert tree(h) == before


@matrix(supervise=EXEC_SUPERVISE)
def test_what_an_included_ssh_config_names_is_hidden(s, supervise):
    """A key and an agent that ~/.ssh/config names only through an Include, with %d, a host token
    (%h) and ${VAR}, are unreadable: the key's directory from the token down is hidden whole, and
    the agent's socket refuses a connection. Without dsh-confine both are reachable."""
    h = os.path.join(s.base, "ihome")
    write(os.path.join(h, ".ssh", "config"), "Include ~/.sshinc/*.conf\n")
    write(os.path.join(h, ".sshinc", "a.conf"),
          "Match host *\n  IdentityFile %d/vault/%h/key\n  IdentityAgent ${AGENT_DIR}/agent.sock\n")
    write(os.path.join(h, "vault", "host1", "key"), "PRIVATE-VAULT\n")
    agent = listen(os.path.join(s.base, "agents", "agent.sock"))
    env = dict(henv(s, h), AGENT_DIR=os.path.join(s.base, "agents"))
    probe = ("import socket, sys\n"
             "try: print(open(sys.argv[1]).read().strip() or 'hidden')\n"
             "except OSError: print('hidden')\n"
             "c = socket.socket(socket.AF_UNIX)\n"
             "try: c.connect(sys.argv[2]); print('connected')\n"
             "except OSError: print('refused')\n")
    argv = ["python3", "-c", probe, os.path.join(h, "vault", "host1", "key"), agent.getsockname()]
    try:
        bare = subprocess.run(argv, capture_output=True, text=True, env=dict(os.environ, **env), timeout=60)
        r = dsh(["--mode", "workspace-write", "--root", s.ws, "--runner", "bwrap", "--hide-secrets"] + supervise +
                ["--"] + argv, s, cwd=s.ws, env=env)
    finally:
        agent.close()
    assert bare.stdout == "PRIVATE-VAULT\nconnected\n", bare
    assert r.rc == 0 and r.out == "hidden\nrefused\n", r
    hidden = {e["path"]: e for e in r.rec("confinement")["hiddenPaths"]}
    assert hidden[os.path.join(h, "vault")]["enforced"] == "empty-tmpfs", hidden


@matrix(supervise=EXEC_SUPERVISE)
def test_ssh_hidden_in_a_root_holding_home(s, supervise):
    """workspace-write with $HOME as the root: ~/.ssh stays hidden (a subfolder's key too), can be
    neither written nor moved aside, and its public parts read back."""
    h = ssh_home(s)
    # The run makes dsh-confine's own config directory under a root holding $HOME (own state,
    # not this test's): made here first, so the comparison shows what the hiding leaves.
    os.makedirs(os.path.join(h, ".config", "dsh-confine"), mode=0o700)
    before = tree(h)
    script = ("cat .ssh/deep/a/b/id_deep 2>/dev/null || echo hidden; cat .ssh/known_hosts; "
              "mv .ssh .ssh-aside 2>/dev/null && echo moved || echo stays; "
              "touch .ssh/new 2>/dev/null && echo wrote || echo read-only; echo fine > mine.txt")
    r = dsh(["--mode", "workspace-write", "--root", h, "--runner", "bwrap", "--hide-secrets"] + supervise +
            ["--", "sh", "-c", script], s, cwd=h,
            env=henv(s, h))
    assert r.rc == 0, r
    with open(os.path.join(h, ".ssh", "known_hosts")) as f:
        assert r.out == "hidden\n" + f.read() + "stays\nread-only\n", r
    os.unlink(os.path.join(h, "mine.txt"))
    after = tree(h)
    assert after == before, (sorted(set(after) ^ set(before)), r)


def table_home(s):
    """A HOME holding every table entry, the variables' places, and a listener on every socket.
    Returns (home, env, expected paths, listeners)."""
    h = os.path.join(s.base, "thome")
    os.makedirs(h)
    expected, env, socks = {}, henv(s, h), []
    for rel, directory in HOME_TABLE:
        p = os.path.join(h, rel)
        if directory:
            write(os.path.join(p, "f"), "S:%s\n" % rel)
            write(os.path.join(p, "sub", "g"), "S:%s/sub\n" % rel)
        else:
            write(p, "S:%s\n" % rel)
        expected[p] = directory
    # The XDG variables (henv sets two) move the stores under ~/.config and ~/.cache: hidden there
    # too. One is made there (GitHub CLI's); the others are named, absent.
    absent = set()
    for rel, directory in HOME_TABLE:
        for pre, var in ((".config/", "XDG_CONFIG_HOME"), (".cache/", "XDG_CACHE_HOME")):
            if rel.startswith(pre):
                absent.add(os.path.join(env[var], rel[len(pre):]))
    gh = os.path.join(env["XDG_CONFIG_HOME"], "gh")
    write(os.path.join(gh, "hosts.yml"), "S:XDG_CONFIG_HOME/gh\n")
    expected[gh] = True
    absent.discard(gh)
    for var, place, rel, directory in ENV_TABLE:
        base = os.path.join(s.base, place)
        env[var] = base
        p = os.path.join(base, rel) if rel else base
        if directory:
            write(os.path.join(p, "f"), "S:%s\n" % var)
            write(os.path.join(p, "sub", "g"), "S:%s/sub\n" % var)
        else:
            write(p, "S:%s\n" % var)
        expected[p] = directory
    for n in ("kube1", "kube2"):
        write(os.path.join(s.base, "env", n), "S:KUBECONFIG\n")
        expected[os.path.join(s.base, "env", n)] = False
    env["KUBECONFIG"] = "%s:%s" % (os.path.join(s.base, "env", "kube1"), os.path.join(s.base, "env", "kube2"))
    # The agents: ssh ($SSH_AUTH_SOCK), gpg (run dir and ~/.gnupg), the session bus, git's cache.
    env["SSH_AUTH_SOCK"] = os.path.join(s.base, "agent.sock")
    for p in (env["SSH_AUTH_SOCK"], os.path.join(s.base, "run", "gnupg", "S.gpg-agent"),
              os.path.join(s.base, "run", "keyring", "S.ssh"), os.path.join(h, ".gnupg", "S.gpg-agent.ssh"),
              os.path.join(s.base, "run", "bus"), os.path.join(h, ".git-credential-cache", "S.socket")):
        socks.append(listen(p))
    expected[env["SSH_AUTH_SOCK"]] = False
    expected[os.path.join(s.base, "run", "bus")] = False
    return h, env, expected, absent, socks


@matrix(mode=MODES, supervise=EXEC_SUPERVISE)
def test_every_table_entry_hidden(s, mode, supervise):
    """Each entry of the table, file and directory forms, under $HOME and named by its variable, is
    unreadable (a directory shows nothing, at any depth); the sockets of the ssh and gpg agents,
    the session bus and git's credential cache refuse a connection; a store where $XDG_CONFIG_HOME
    puts it is hidden too; the record names exactly the table. Nothing is left in the home."""
    h, env, expected, absent, socks = table_home(s)
    sockets = [sk.getsockname() for sk in socks]
    before = tree(h), tree(os.path.join(s.base, "run")), tree(os.path.join(s.base, "env"))
    try:
        paths = sorted(expected) + sorted(set(sockets) - set(expected))
        r = dsh(["--mode", mode, "--root", s.ws, "--runner", "bwrap", "--hide-secrets"] + supervise +
                ["--", "python3", "-c", PROBE, json.dumps(paths)], s, cwd=s.ws, env=env)
    finally:
        for sk in socks:
            sk.close()
    assert r.rc == 0, r
    seen = json.loads(r.out)
    for p in paths:
        # A hidden file is /dev/null, which the sandbox does not let it open here (EACCES).
        assert seen[p] in (("refused",) if p in sockets else ("empty", "error")), (p, seen[p])
    assert "S:" not in r.out, r
    hidden = {e["path"]: e for e in r.rec("confinement")["hiddenPaths"] if e["source"] == "hide-secrets"}
    assert set(hidden) == set(expected) | absent, sorted(set(hidden) ^ (set(expected) | absent))
    for p in absent:
        assert not hidden[p]["exists"], hidden[p]
    for p, directory in expected.items():
        assert hidden[p]["exists"] and hidden[p]["enforced"] == ("empty-tmpfs" if directory else "dev-null-bind"), hidden[p]
    assert (tree(h), tree(os.path.join(s.base, "run")), tree(os.path.join(s.base, "env"))) == before


@matrix(supervise=EXEC_SUPERVISE)
def test_a_store_filled_during_the_run_stays_hidden(s, supervise):
    """A hidden directory is hidden whole: an SSO token the host writes into ~/.aws/sso/cache while
    the command runs (after the sandbox is up) cannot be read."""
    h = os.path.join(s.base, "lhome")
    os.makedirs(os.path.join(h, ".aws"))
    env = s.env()
    env.update(henv(s, h))
    # It says "up" once it runs (its mounts in place) and reads a line before it looks.
    proc = subprocess.Popen([DSH, "--mode", "read-only", "--runner", "bwrap", "--hide-secrets"] + supervise +
                            ["--", "sh", "-c", "echo up; read x; cat $HOME/.aws/sso/cache/token.json 2>/dev/null "
                             "|| echo hidden"], cwd=s.base, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        # Never wait for ever on the first line: a run that never starts fails the test instead.
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        up = proc.stdout.readline() if ready else b"(nothing within 60 s)"
        write(os.path.join(h, ".aws", "sso", "cache", "token.json"), "TOKEN\n")
        out, err = proc.communicate(input=b"go\n", timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert up == b"up\n" and proc.returncode == 0 and out == b"hidden\n", (up, proc.returncode, out, err)


def test_config_secret_paths_add_to_the_table(s):
    """config secretPaths hides more ("~/" and absolute, files and directories) and takes no table
    entry away; without --hide-secrets it hides nothing; a relative entry is refused."""
    h = os.path.join(s.base, "chome")
    write(os.path.join(h, ".extra-token"), "EXTRA\n")
    write(os.path.join(h, ".pgpass"), "PG\n")
    write(os.path.join(s.base, "vault", "keys", "k"), "VAULT\n")
    cfg = os.path.join(s.base, "cfg", "config.json")
    write(cfg, json.dumps({"secretPaths": ["~/.extra-token", os.path.join(s.base, "vault")]}))
    script = "cat $HOME/.extra-token $HOME/.pgpass %s/vault/keys/k 2>&1 | grep -v '^cat' ; true" % s.base
    r = dsh(["--config", cfg, "--mode", "read-only", "--runner", "bwrap", "--hide-secrets", "--",
             "sh", "-c", script], s, env=henv(s, h))
    assert r.rc == 0 and r.out == "", r
    hidden = {e["path"]: e for e in r.rec("confinement")["hiddenPaths"]}
    assert hidden[h + "/.extra-token"]["enforced"] == "dev-null-bind", hidden
    assert hidden[s.base + "/vault"]["enforced"] == "empty-tmpfs", hidden
    assert hidden[h + "/.pgpass"]["enforced"] == "dev-null-bind", hidden
    r = dsh(["--config", cfg, "--mode", "read-only", "--runner", "bwrap", "--", "sh", "-c", script], s,
            env=henv(s, h))
    assert r.rc == 0 and r.out == "EXTRA\nPG\nVAULT\n", r
    write(cfg, json.dumps({"secretPaths": ["relative/token"]}))
    r = dsh(["--config", cfg, "--mode", "read-only", "--hide-secrets", "--", "true"], s, env=henv(s, h))
    assert r.rc != 0 and "secretPaths" in r.err, r


if __name__ == "__main__":
    main()
