"""The allow-list (issue 19) under the Landlock runner: `--runner landlock --net allow=LIST`.

The Landlock runner makes the command's network namespace itself (src/linux/netns.cpp: a user
namespace too when not root); the child makes the listener on 127.0.0.1 inside it before exec and
hands it to dsh-confine over an inherited socketpair, as the bwrap stage does. The server is an
HTTP server this test runs on the host's 127.0.0.1; `allowed.test` and `other.test` are mapped to it
by the proxy's hosts hook (DSH_CONFINE_NET_HOSTS), never by a real DNS query.
"""
import os

from harness import SANDBOX_UNAVAILABLE, dsh, is_root, main, need_landlock, skip, tool
from test_allowlist import CURL, PY, Server, need_curl, network_records
from test_allowlist import run as run_allow


def run(s, allow, cmd, extra=(), pre=()):
    return run_allow(s, allow, cmd, extra=extra, runner="landlock", pre=pre)


def check_reached(r, h, path):
    assert r.rc == 0 and r.out == "hi", r
    assert h.seen == [path], h.seen
    conf = r.rec("confinement")
    assert conf["runner"] == "landlock", conf
    n = conf["network"]
    assert n["mode"] == "allow" and "egress-proxy" in n["enforced"] and "net-namespace" in n["enforced"], n
    assert n["allow"] == ["allowed.test", "127.0.0.1:%d" % h.port], n
    recs = network_records(r)
    assert len(recs) == 1, recs
    assert recs[0]["verdict"] == "allowed" and recs[0]["host"] == "allowed.test", recs
    assert recs[0]["address"] == "127.0.0.1" and recs[0]["resolvedBy"] == "hosts-file", recs


def test_curl_reaches_an_allowed_host_through_the_proxy_in_exec_mode(s):
    # Exec mode: the proxy needs a parent, so dsh-confine stays one (needs_parent, Plan::relay_fd).
    need_landlock()
    need_curl()
    h = Server()
    try:
        r = run(s, "allowed.test,127.0.0.1:%d" % h.port,
                [CURL, "-sS", "--max-time", "5", "http://allowed.test:%d/exec" % h.port])
    finally:
        h.close()
    check_reached(r, h, "/exec")


def test_curl_reaches_an_allowed_host_through_the_proxy_under_supervise(s):
    need_landlock()
    need_curl()
    h = Server()
    try:
        r = run(s, "allowed.test,127.0.0.1:%d" % h.port,
                [CURL, "-sS", "--max-time", "5", "http://allowed.test:%d/sup" % h.port], extra=["--supervise"])
    finally:
        h.close()
    check_reached(r, h, "/sup")
    assert r.rec("result") is not None, r


def test_the_proxy_variables_are_the_bwrap_stages_list(s):
    # One list (net::proxy_environment) for both runners; the port is the listener's.
    need_landlock()
    r = run(s, "allowed.test", [PY, "-c", "import os, json; print(json.dumps({k: os.environ.get(k) for k in "
                                          "['HTTP_PROXY','https_proxy','ALL_PROXY','NO_PROXY','npm_config_proxy',"
                                          "'PIP_PROXY','YARN_HTTPS_PROXY']}))"],
            extra=["--setenv", "HTTP_PROXY=http://elsewhere:1"])
    assert r.rc == 0, r
    import json
    env = json.loads(r.out)
    url = env["HTTP_PROXY"]
    assert url.startswith("http://127.0.0.1:") and 49152 <= int(url.rsplit(":", 1)[1]) <= 65535, env
    for k in ["https_proxy", "ALL_PROXY", "npm_config_proxy", "PIP_PROXY", "YARN_HTTPS_PROXY"]:
        assert env[k] == url, env
    assert env["NO_PROXY"] == "localhost,127.0.0.1,::1", env


def test_without_a_namespace_landlock_fails_closed(s):
    # The host refuses the namespace (unshare fails): forced landlock is 125 with the reason,
    # nothing runs.
    need_landlock()
    unshare = {"x86_64": 272, "aarch64": 97}.get(os.uname().machine)
    if unshare is None:
        skip("unshare's syscall number is not known for this architecture")
    marker = s.p("ws", "ran")
    r = run(s, "allowed.test", ["sh", "-c", "echo ran > " + marker],
            extra=["--mode", "workspace-write", "--root", s.ws], pre=[tool("sysfault"), "EPERM", str(unshare), "--"])
    assert r.rc == 125 and not os.path.exists(marker), r
    flags = "CLONE_NEWNET" if is_root() else "CLONE_NEWUSER|CLONE_NEWNET"
    why = ("--net allow= needs a network namespace of its own, and this host refused the Landlock runner one "
           "(unshare(%s): Operation not permitted)" % flags)
    assert r.err.startswith("dsh-confine: --runner landlock: " + why), r
    assert SANDBOX_UNAVAILABLE.format(mode="workspace-write") not in r.err, r
    assert r.rec("confinement") is None, r


def test_the_custom_runner_still_refuses_the_allow_list(s):
    # The runner seam's capability (Runner::egress_proxy): a custom runner's namespace is the
    # operator's, our listener never reaches it.
    import json
    cfg = s.sealed_config({"runnerCommand": ["/bin/sh", "-c", "exec \"$@\"", "sh"],
                           "runnerFailureSignatures": ["nope"]})
    r = dsh(["--config", cfg, "--runner", "custom", "--net", "allow=a.test", "--", "true"], s)
    assert r.rc == 125 and "--net allow= needs the bwrap or Landlock runner: the custom runner" in r.err, r


def test_explain_and_probe_show_the_allow_list(s):
    need_landlock()
    import json
    r = dsh(["explain", "--runner", "landlock", "--net", "allow=allowed.test,10.0.0.0/8:443", "--net-deny",
             "evil.test", "--", "true"], s, report=False)
    assert r.rc == 0, r
    net = [l for l in r.out.splitlines() if l.startswith("network:")]
    assert len(net) == 1 and net[0].split(None, 1)[1].startswith("allow (from --net), enforced by net-namespace"), r.out
    assert net[0].endswith("egress-proxy"), r.out
    assert "net allow:   allowed.test, 10.0.0.0/8:443" in r.out and "net deny:    evil.test" in r.out, r.out
    assert "egress:    a listener on 127.0.0.1:" in r.out, r.out
    p = dsh(["probe", "--json"], s, report=False)
    assert p.rc == 0, p
    doc = json.loads(p.out)
    ll = [x for x in doc["runners"] if x["runner"] == "landlock"][0]
    row = ll["network"]["allow"]
    assert row["usable"] is True and row["enforced"] == ll["network"]["loopback"]["enforced"] + ["egress-proxy"], row
    assert "--net allow      full (net-namespace" in dsh(["probe"], s, report=False).out


def test_the_session_log_records_the_allow_list(s):
    # set-mode --net allow= writes the entries; the next call runs with them (source "session"),
    # and a set-mode naming only a mode carries them over.
    need_landlock()
    need_curl()
    import json
    log = s.p("home", "session.jsonl")
    h = Server()
    try:
        allow = "allowed.test,127.0.0.1:%d" % h.port
        r = dsh(["session", "set-mode", log, "read-only", "--net", "allow=" + allow], s, report=False)
        assert r.rc == 0, r
        r = dsh(["session", "set-mode", log, "workspace-write"], s, report=False)
        assert r.rc == 0, r
        last = json.loads(open(log).read().splitlines()[-1])
        assert last["data"] == {"mode": "workspace-write", "network": "allow",
                                "allow": ["allowed.test", "127.0.0.1:%d" % h.port]}, last
        hosts = os.path.join(s.base, "hosts")
        with open(hosts, "w") as f:
            f.write("127.0.0.1 allowed.test\n")
        os.chmod(hosts, 0o644)
        r = dsh(["--session", log, "--runner", "landlock", "--root", s.ws, "--", CURL, "-sS", "--max-time", "5",
                 "http://allowed.test:%d/session" % h.port], s, env={"DSH_CONFINE_NET_HOSTS": hosts})
        before = open(log).read()
        bad = dsh(["session", "set-mode", log, "read-only", "--net", "allow=*"], s, report=False)
    finally:
        h.close()
    assert r.rc == 0 and r.out == "hi" and h.seen == ["/session"], r
    n = r.rec("confinement")["network"]
    assert n["mode"] == "allow" and n["source"] == "session" and n["allow"] == ["allowed.test", "127.0.0.1:%d" % h.port], n
    # A bad entry is refused in our words, and the log is left as it was.
    assert bad.rc == 125 and 'bad network rule "*"' in bad.err and open(log).read() == before, bad


if __name__ == "__main__":
    main()
