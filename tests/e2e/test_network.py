"""The network axis (issue 17), end to end: every runner x --net off|loopback|host.

Servers run only on this machine's loopback (127.0.0.1, ::1), started by the test
itself; nothing is ever sent to another address. Each refusal is checked from
outside: the host listener counts what reached it.
"""
import json
import os
import select
import socket
import subprocess
import threading
import time
import http.server

from harness import (RUNNERS, SANDBOX_UNAVAILABLE, dsh, is_root, landlock_abi, main, matrix, need_bwrap, need_landlock,
                     skip, tool)

PY = "/usr/bin/python3"

# What the confined probe tries; each attempt prints "name: ok" or "name: ERRNO".
PROBE = r'''
import errno, json, os, socket, subprocess, sys, time, urllib.request
cfg = json.loads(sys.argv[1])
out = {}
def attempt(name, fn):
    try:
        fn()
        out[name] = "ok"
    except OSError as e:
        out[name] = errno.errorcode.get(e.errno, str(e.errno)) if e.errno else type(e).__name__
    except Exception as e:
        out[name] = type(e).__name__
def tcp(fam, addr):
    def f():
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.settimeout(2)
        s.connect(addr)
        s.sendall(cfg["token"].encode())
        s.close()
    return f
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(cfg["token"].encode(), ("127.0.0.1", cfg["udp"]))
def inner():
    l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen()
    c = socket.create_connection(l.getsockname(), timeout=2); a, _ = l.accept()
    c.sendall(b"x"); assert a.recv(1) == b"x"
def listen_for_host():
    # The host connects once the port is written and then says how its attempt ended
    # (portfile.tried): a connection it made is waited for, none is looked for once.
    l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen()
    with open(cfg["portfile"] + ".tmp", "w") as f: f.write(str(l.getsockname()[1]))
    os.rename(cfg["portfile"] + ".tmp", cfg["portfile"])
    deadline = time.time() + 20
    while not os.path.exists(cfg["portfile"] + ".tried") and time.time() < deadline:
        time.sleep(0.01)
    if open(cfg["portfile"] + ".tried").read() == "connected":
        l.settimeout(3)
    else:
        l.setblocking(False)
    a, _ = l.accept()
def unix_path(path):
    def f():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.settimeout(2); s.connect(path)
    return f
def http_get():
    urllib.request.urlopen("http://127.0.0.1:%d/" % cfg["http"], timeout=2).read()
attempt("tcp4", tcp(socket.AF_INET, ("127.0.0.1", cfg["tcp4"])))
if cfg.get("tcp6"): attempt("tcp6", tcp(socket.AF_INET6, ("::1", cfg["tcp6"])))
attempt("udp", udp)
attempt("inner", inner)
attempt("listen", listen_for_host)
attempt("raw", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))
attempt("packet", lambda: socket.socket(17, socket.SOCK_RAW, 0))
attempt("vsock", lambda: socket.socket(40, socket.SOCK_STREAM, 0))
attempt("mptcp", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262))
attempt("unix_outside", unix_path(cfg["unix_outside"]))
attempt("unix_inside", unix_path(cfg["unix_inside"]))
attempt("abstract", unix_path("\0" + cfg["abstract"]))
attempt("http", http_get)
attempt("socketpair", lambda: socket.socketpair())
r = subprocess.run(["getent", "hosts", "localhost"], stdout=subprocess.PIPE)
out["getent"] = "ok" if r.returncode == 0 and r.stdout.strip() else "fail"
print(json.dumps(out))
'''


class Host:
    """Listeners on the host's loopback that count what reaches them.

    Nothing accepts while the command runs: a connection it makes waits in the listener's
    queue, a datagram in the socket's buffer. close() (after the run) sends a marker of its
    own through each IP listener and takes everything queued until the marker, so whatever
    the command sent has been counted, with no wait on a clock. The HTTP server serves (a
    request it answered is in `seen`); one still queued there is counted by close() too."""

    def __init__(self, s):
        self.token = "dsh-net-%d-%f" % (os.getpid(), time.time())
        self.seen = []
        self.listeners = []
        self.tcp4 = self._stream(socket.AF_INET, ("127.0.0.1", 0), "tcp4")
        try:
            self.tcp6 = self._stream(socket.AF_INET6, ("::1", 0), "tcp6")
        except OSError:
            self.tcp6 = None
        self.udp_sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp_sock.bind(("127.0.0.1", 0))
        self.udp = self.udp_sock.getsockname()[1]
        self.unix_outside = os.path.join(s.outside, "daemon.sock")
        self._stream(socket.AF_UNIX, self.unix_outside, "unix_outside")
        self.unix_inside = os.path.join(s.ws, "own.sock")
        self._stream(socket.AF_UNIX, self.unix_inside, "unix_inside")
        self.abstract = self.token + "-abstract"
        self._stream(socket.AF_UNIX, "\0" + self.abstract, "abstract")
        seen = self.seen

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                seen.append("http")
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"hi")

            def log_message(self, *a):
                pass

        self.httpd = http.server.HTTPServer(("127.0.0.1", 0), H)
        self.http = self.httpd.server_address[1]
        self.closed = False
        # serve_forever looks for shutdown() between requests every poll_interval (0.5 s by default)
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()

    def _stream(self, fam, addr, name):
        l = socket.socket(fam, socket.SOCK_STREAM)
        l.bind(addr)
        if fam == socket.AF_UNIX and not addr.startswith("\0"):
            os.chmod(addr, 0o777)
        l.listen(64)
        self.listeners.append((l, name, fam, l.getsockname()))
        return l.getsockname()[1] if fam != socket.AF_UNIX else None

    def _take(self, l, name, fam, addr):
        # Every connection queued on `l`. A unix connect is queued before it returns; for IP, up
        # to a marker connection made now: loopback delivers in order, so what the command's
        # connects put on it before the run ended has reached the queue ahead of the marker.
        if fam == socket.AF_UNIX:
            while self._pending(l):
                l.accept()[0].close()
                self.seen.append(name)
            return
        marker = socket.create_connection(addr[:2], timeout=5)
        l.settimeout(5)
        while True:
            try:
                c, peer = l.accept()
            except socket.timeout:
                raise AssertionError("the marker never reached the %s listener" % name)
            c.close()
            if peer[:2] == marker.getsockname()[:2]:
                marker.close()
                return
            self.seen.append(name)

    @staticmethod
    def _pending(l):
        r, _, _ = select.select([l], [], [], 0)
        return bool(r)

    def _take_udp(self):
        marker = b"marker-" + self.token.encode()
        m = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        m.sendto(marker, ("127.0.0.1", self.udp))
        m.close()
        self.udp_sock.settimeout(5)
        while True:
            try:
                data = self.udp_sock.recv(4096)
            except socket.timeout:
                raise AssertionError("the marker never reached the udp listener")
            if data == marker:
                break
            if data == self.token.encode():
                self.seen.append("udp")

    def close(self):
        if self.closed:
            return
        self.closed = True
        self.httpd.shutdown()
        if self._pending(self.httpd.socket):
            self.seen.append("http")  # a request that reached the server, still unanswered
        self.httpd.server_close()
        for l, name, fam, addr in self.listeners:
            self._take(l, name, fam, addr)
            l.close()
        self._take_udp()
        self.udp_sock.close()
        for path in (self.unix_outside, self.unix_inside):  # so a test can start another Host
            if os.path.exists(path):
                os.unlink(path)


def probe(s, runner, net, mode="workspace-write"):
    """Runs the probe confined; returns (Result, attempts, what the host saw)."""
    h = Host(s)
    portfile = os.path.join(s.ws, "port")
    host_connected = []
    ended = threading.Event()

    def connect_in():
        # Once the command has written its listener's port: connect to it from the host, then
        # tell the command how that went (it accepts only a connection the host made). A command
        # that never listens (refused) is done with when the run has ended.
        while not ended.is_set() and not os.path.exists(portfile):
            ended.wait(0.01)
        if not os.path.exists(portfile):
            return
        how = "refused"
        try:
            socket.create_connection(("127.0.0.1", int(open(portfile).read())), timeout=2).close()
            host_connected.append(True)
            how = "connected"
        except OSError:
            pass
        with open(portfile + ".tried.tmp", "w") as f:
            f.write(how)
        os.rename(portfile + ".tried.tmp", portfile + ".tried")
    t = threading.Thread(target=connect_in, daemon=True)
    t.start()
    cfg = dict(token=h.token, tcp4=h.tcp4, tcp6=h.tcp6, udp=h.udp, unix_outside=h.unix_outside,
               unix_inside=h.unix_inside, abstract=h.abstract, http=h.http, portfile=portfile)
    try:
        r = dsh(["--runner", runner, "--net", net, "--mode", mode, "--root", s.ws, "--", PY, "-c", PROBE,
                 json.dumps(cfg)], s, cwd=s.ws)
        ended.set()
        t.join(timeout=10)
        assert not t.is_alive(), "the host's connect to the command's listener never ended"
    finally:
        ended.set()
        h.close()  # counts what arrived
    got = json.loads(r.out.strip().splitlines()[-1]) if r.rc == 0 and r.out.strip() else None
    seen = set(h.seen)
    # The host reached the command's listener only if both ends saw it: with many tests side by
    # side, the port the command picked in its own namespace may be some other host listener's.
    if host_connected and got and got.get("listen") == "ok":
        seen.add("listen")
    return r, got, seen, h


def check_network_record(r, net, runner):
    c = r.rec("confinement")
    assert c is not None, r
    n = c["network"]
    assert n["mode"] == net and n["source"] == "flag", n
    if net == "host":
        assert n["enforcement"] == "none" and [g["effect"] for g in n["gaps"]] == ["network"], n
        return n
    assert n["enforcement"] == "full" and n["gaps"] == [], n
    assert "seccomp-socket-families" in n["enforced"], n
    # This kernel (ABI < 9) cannot govern pathname unix sockets by path: socket(AF_UNIX) is refused.
    assert ("unix-socket-refused" in n["enforced"]) == (landlock_abi() < 9), n
    # A network namespace: bwrap's --unshare-net, or the Landlock runner's own under loopback.
    assert ("net-namespace" in n["enforced"]) == (runner == "bwrap" or net == "loopback"), n
    if net == "off":
        assert ("landlock-tcp" in n["enforced"]) == (landlock_abi() >= 4), n
    return n


REFUSED_OFF = ["tcp4", "tcp6", "udp", "inner", "listen", "raw", "packet", "vsock", "mptcp", "unix_outside",
               "unix_inside", "abstract", "http"]


@matrix(runner=RUNNERS)
def test_off_refuses_everything_and_the_host_sees_nothing(s, runner):
    r, got, seen, h = probe(s, runner, "off")
    assert r.rc == 0 and got is not None, r
    check_network_record(r, "off", runner)
    for k in REFUSED_OFF:
        if k == "tcp6" and not h.tcp6:
            continue
        # The socket filter's own answer (ENETUNREACH, issue 38); urllib wraps it in a URLError
        assert got[k] == "ENETUNREACH" or (k == "http" and got[k] == "URLError"), (k, got, r.err)
    # Ordinary things keep working: a socketpair, name resolution of localhost.
    assert got["socketpair"] == "ok" and got["getent"] == "ok", got
    assert seen == set(), (seen, got)  # the host's listeners saw nothing at all


def run_loopback(s, runner):
    r, got, seen, h = probe(s, runner, "loopback")
    assert r.rc == 0 and got is not None, r
    check_network_record(r, "loopback", runner)
    assert got["inner"] == "ok", got  # in-namespace traffic works
    # The host's loopback services are out of reach: nothing listens there in the namespace.
    assert got["tcp4"] == "ECONNREFUSED" and got["http"] in ("URLError", "ECONNREFUSED"), got
    if h.tcp6:
        assert got["tcp6"] in ("ECONNREFUSED", "EADDRNOTAVAIL", "ENETUNREACH"), got
    assert got["listen"] in ("timeout", "TimeoutError", "EAGAIN"), got  # the host cannot connect in
    for k in ("raw", "packet", "vsock", "mptcp", "unix_outside", "unix_inside", "abstract"):
        assert got[k] == "ENETUNREACH", (k, got)
    assert got["socketpair"] == "ok" and got["getent"] == "ok", got
    assert seen == set(), (seen, got)
    return r


def test_bwrap_loopback_is_a_private_loopback(s):
    need_bwrap()
    run_loopback(s, "bwrap")


def test_landlock_loopback_is_a_private_loopback_of_its_own(s):
    # DECISIONS: the Landlock runner makes the namespace itself (a user namespace too when not root).
    need_landlock()
    r = run_loopback(s, "landlock")
    c = r.rec("confinement")
    assert c["runner"] == "landlock", c
    # IPv6 loopback works inside as well: lo is up in the namespace.
    r = dsh(["--runner", "landlock", "--net", "loopback", "--", PY, "-c",
             "import os, socket\nl = socket.socket(socket.AF_INET6); l.bind(('::1', 0)); l.listen()\n"
             "socket.create_connection(l.getsockname()[:2], timeout=2).close(); print('v6', os.getuid())"], s)
    assert r.rc == 0 and r.out.split() == ["v6", str(os.getuid())], r  # the caller's uid, mapped to itself


def test_landlock_loopback_without_a_namespace_fails_closed_and_auto_goes_on(s):
    need_landlock()
    unshare = {"x86_64": 272, "aarch64": 97}.get(os.uname().machine)
    if unshare is None:
        skip("unshare's syscall number is not known for this architecture")
    # The host refuses the namespace (unshare fails): forced, nothing runs, 125 with the reason.
    marker = s.p("ws", "ran")
    r = dsh(["--runner", "landlock", "--net", "loopback", "--mode", "workspace-write", "--root", s.ws, "--",
             "sh", "-c", "echo ran > " + marker], s, pre=[tool("sysfault"), "EPERM", str(unshare), "--"])
    assert r.rc == 125 and not os.path.exists(marker), r
    flags = "CLONE_NEWNET" if is_root() else "CLONE_NEWUSER|CLONE_NEWNET"
    why = "refused the Landlock runner one (unshare(%s): Operation not permitted)" % flags
    assert r.err.startswith("dsh-confine: --runner landlock: --net loopback needs") and why in r.err, r
    assert SANDBOX_UNAVAILABLE.format(mode="workspace-write") not in r.err, r
    assert r.rec("confinement") is None and why in r.rec("error")["runnerFailure"], r
    # auto: bwrap unusable too (its path names nothing): no runner is left, so nothing runs.
    cfg = s.sealed_config({"bwrapPath": s.p("base", "no-such-bwrap")})
    r = dsh(["--config", cfg, "--net", "loopback", "--mode", "workspace-write", "--root", s.ws, "--",
             "sh", "-c", "echo ran > " + marker], s, pre=[tool("sysfault"), "EPERM", str(unshare), "--"])
    assert r.rc == 125 and not os.path.exists(marker), r
    assert SANDBOX_UNAVAILABLE.format(mode="workspace-write") in r.err, r
    # auto with the namespace allowed and bwrap unusable: the Landlock runner's own namespace holds it.
    r = dsh(["--config", cfg, "--net", "loopback", "--", PY, "-c",
             "import socket\ntry: socket.create_connection(('127.0.0.1', 9), timeout=2)\n"
             "except OSError as e: print(e.errno)"], s)
    assert r.rc == 0 and r.out.strip() == "111", r  # ECONNREFUSED: the namespace's own lo, nobody listening
    c = r.rec("confinement")
    assert c["runner"] == "landlock" and "net-namespace" in c["network"]["enforced"], c


@matrix(runner=RUNNERS)
def test_host_leaves_the_network_as_it_is(s, runner):
    r, got, seen, h = probe(s, runner, "host")
    assert r.rc == 0 and got is not None, r
    check_network_record(r, "host", runner)
    want = {"tcp4", "udp", "listen", "unix_outside", "unix_inside", "http"}
    if h.tcp6:
        want.add("tcp6")
    # Abstract sockets are scoped by Landlock (ABI 6+) in every network mode, as before issue 17.
    if landlock_abi() >= 6:
        assert got["abstract"] == "EPERM", got
    else:
        want.add("abstract")
    for k in want | {"inner", "socketpair", "getent"}:
        assert got[k] == "ok", (k, got)
    assert want <= seen, (want - seen, got)


def test_ordinary_tools_work_under_off(s):
    need_landlock()
    script = (
        "set -e; cd '%s'; git init -q r; cd r; git status --short; "
        "printf 'all:\\n\\techo made\\n' > Makefile; make -s; "
        "python3 -c 'import socket; a, b = socket.socketpair(); a.send(b\"x\"); assert b.recv(1) == b\"x\"'; "
        "node -e 'const c = require(\"child_process\").spawn(\"cat\"); c.stdout.on(\"data\", d => process.stdout.write(d)); "
        "c.stdin.end(\"piped\\n\")'; "
        "printf 'b\\na\\n' > in; sort -T '%s' -S 1 in | tr '\\n' ' '; echo sorted"
    ) % (s.ws, s.ws)
    for runner in ("landlock", "bwrap"):
        if runner == "bwrap":
            try:
                need_bwrap()
            except Exception:
                continue
        r = dsh(["--runner", runner, "--net", "off", "--mode", "workspace-write", "--root", s.ws, "--", "/bin/sh",
                 "-c", script], s, cwd=s.ws)
        assert r.rc == 0, (runner, r)
        assert "made" in r.out and "piped" in r.out and "a b sorted" in r.out, (runner, r)
        subprocess.run(["rm", "-rf", os.path.join(s.ws, "r")], check=True)


def test_a_refused_socket_is_a_network_refusal_under_supervise(s):
    # Issue 38: a network refusal (the filter's ENETUNREACH), not a file denial.
    need_landlock()
    r = dsh(["--runner", "landlock", "--net", "off", "--supervise", "--", PY, "-c",
             "import socket; socket.create_connection(('127.0.0.1', 9))"], s)
    assert r.rc != 0, r
    res = r.rec("result")
    assert res is not None and res["networkDenied"] is True and res["denied"] is False, r
    assert res["runnerFailed"] is False, r


def test_old_landlock_without_tcp_rights_still_enforces_off_with_seccomp(s):
    # DECISIONS: below ABI 4 the socket filter alone refuses every IP socket; off holds, one layer fewer.
    need_landlock()
    h = Host(s)
    try:
        r = dsh(["--runner", "landlock", "--net", "off", "--", PY, "-c",
                 "import socket\ntry:\n socket.create_connection(('127.0.0.1', %d), timeout=2); print('connected')\n"
                 "except OSError as e: print(e.errno)" % h.tcp4], s, pre=[tool("landlock-abi"), "3", "--"])
    finally:
        h.close()
    assert r.rc == 0 and r.out.strip() == "101", r
    n = r.rec("confinement")["network"]
    assert r.rec("confinement")["landlockAbi"] == 3, r
    assert n["enforcement"] == "full" and "landlock-tcp" not in n["enforced"], n
    assert "seccomp-socket-families" in n["enforced"] and "unix-socket-refused" in n["enforced"], n
    assert h.seen == [], h.seen


def test_danger_full_access_refuses_net_off_and_reports_a_config_off_that_cannot_hold(s):
    r = dsh(["--mode", "danger-full-access", "--net", "off", "--", "/bin/true"], s)
    assert r.rc == 125 and "cannot hold under danger-full-access" in r.err, r
    cfg = os.path.join(s.home, "net.json")
    with open(cfg, "w") as f:
        f.write('{"network": "off"}')
    r = dsh(["--config", cfg, "--mode", "danger-full-access", "--", "/bin/true"], s)
    assert r.rc == 0, r
    n = r.rec("confinement")["network"]
    assert n["mode"] == "host" and n["requested"] == "off" and n["source"] == "config", n
    assert "cannot hold" in n["gaps"][0]["detail"], n


def test_config_network_and_flag_precedence(s):
    need_landlock()
    cfg = os.path.join(s.home, "net.json")
    with open(cfg, "w") as f:
        f.write('{"network": "off"}')
    r = dsh(["--config", cfg, "--runner", "landlock", "--", PY, "-c",
             "import socket\ntry: socket.socket()\nexcept OSError as e: print(e.errno)"], s)
    assert r.rc == 0 and r.out.strip() == "101", r
    n = r.rec("confinement")["network"]
    assert n["mode"] == "off" and n["source"] == "config", n
    r = dsh(["--config", cfg, "--net", "host", "--runner", "landlock", "--", PY, "-c", "import socket; socket.socket()"], s)
    assert r.rc == 0 and r.rec("confinement")["network"]["source"] == "flag", r
    r = dsh(["--net", "none", "--", "/bin/true"], s)
    assert r.rc != 0 and 'unknown network mode "none" for --net (off, loopback, host or allow=LIST)' in r.err, r


def test_explain_and_check_speak_of_the_network(s):
    need_landlock()
    r = dsh(["explain", "--runner", "landlock", "--net", "off", "--", "/bin/true"], s, report=False)
    assert r.rc == 0 and "network:" in r.out and "off (from --net)" in r.out, r
    r = dsh(["explain", "--json", "--runner", "landlock", "--net", "off", "--", "/bin/true"], s, report=False)
    j = json.loads(r.out)
    assert j["sources"]["network"] == "flag" and j["confinement"]["network"]["mode"] == "off", j
    r = dsh(["check", "--json", "--write", s.ws, "--net", "off"], s, report=False)
    j = json.loads(r.out)
    assert j["network"] == "off" and j["networkSource"] == "flag", j
    r = dsh(["check", "--write", s.ws, "--net", "loopback"], s, report=False)
    assert "network: loopback" in r.out, r


IO_URING = r"""
import ctypes, errno, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
params = ctypes.create_string_buffer(120)  # struct io_uring_params
fd = libc.syscall(ctypes.c_long(425), ctypes.c_uint(4), params)  # io_uring_setup (every architecture)
print("setup-ok" if fd >= 0 else errno.errorcode.get(ctypes.get_errno(), "?"))
"""


def runners_here():
    out = []
    if landlock_abi() > 0:
        out.append("landlock")
    try:
        need_bwrap()
        out.append("bwrap")
    except Exception:
        pass
    return out


def test_io_uring_cannot_open_a_socket_under_off_or_loopback(s):
    # io_uring can connect without socket(2): its setup is refused (ENOSYS), and the
    # host's listeners see nothing. Unconfined the same setup works on this host (when
    # io_uring is enabled), so the refusal is the sandbox's.
    need_landlock()
    bare = subprocess.run([PY, "-c", IO_URING], stdout=subprocess.PIPE, universal_newlines=True)
    control = bare.stdout.strip() == "setup-ok"
    for runner in runners_here():
        for net in ("off", "loopback"):
            h = Host(s)
            try:
                r = dsh(["--runner", runner, "--net", net, "--", PY, "-c", IO_URING], s)
            finally:
                h.close()
            assert r.rc == 0 and r.out.strip() == "ENOSYS", (runner, net, r)
            assert h.seen == [], (runner, net, h.seen)
    if not control:
        skip("io_uring is disabled on this host (unconfined setup: %s); the refusals above hold" % bare.stdout.strip())


def test_curl_to_a_loopback_http_server(s):
    # curl (when installed) to an HTTP server the test runs on 127.0.0.1: refused under off,
    # out of reach under loopback (the namespace's own lo), served under host.
    need_landlock()
    if not os.access("/usr/bin/curl", os.X_OK):
        skip("curl is not installed (.ci/packages installs it)")
    for runner in runners_here():
        for net in ("off", "loopback", "host"):
            h = Host(s)
            try:
                r = dsh(["--runner", runner, "--net", net, "--", "/usr/bin/curl", "-sS", "--max-time", "5",
                         "http://127.0.0.1:%d/" % h.http], s)
            finally:
                h.close()
            if net == "host":
                assert r.rc == 0 and r.out == "hi" and h.seen == ["http"], (runner, net, r, h.seen)
            else:
                # 7: could not connect (the socket filter's ENETUNREACH, or nobody listening in the namespace)
                assert r.rc == 7 and h.seen == [], (runner, net, r, h.seen)


def test_the_session_log_sets_the_network(s):
    # The network is part of the session's policy: set-mode --net writes it, the next
    # call runs with it (source "session"), a flag still decides over it, and a
    # set-mode that names only a mode keeps it (it never widens by omission).
    need_landlock()
    log = s.p("home", "session.jsonl")
    cfg = s.p("home", "host.json")
    with open(cfg, "w") as f:
        f.write('{"network": "host"}')
    r = dsh(["session", "set-mode", log, "workspace-write", "--net", "off"], s, report=False)
    assert r.rc == 0, r
    sock = ["--", PY, "-c", "import socket\ntry: socket.socket(); print('open')\nexcept OSError as e: print(e.errno)"]
    r = dsh(["--config", cfg, "--session", log, "--runner", "landlock", "--root", s.ws] + sock, s)
    n = r.rec("confinement")["network"]
    assert r.rc == 0 and r.out.strip() == "101" and n["mode"] == "off" and n["source"] == "session", r
    r = dsh(["--session", log, "--runner", "landlock", "--net", "host", "--root", s.ws] + sock, s)
    assert r.rc == 0 and r.out.strip() == "open" and r.rec("confinement")["network"]["source"] == "flag", r
    r = dsh(["session", "set-mode", log, "read-only"], s, report=False)
    assert r.rc == 0, r
    last = json.loads(open(log).read().splitlines()[-1])
    assert last["data"] == {"mode": "read-only", "network": "off"}, last
    r = dsh(["--session", log, "--runner", "landlock"] + sock, s)
    assert r.rc == 0 and r.out.strip() == "101", r
    # Strict: an unknown network in set-mode or in the log is refused, nothing runs.
    r = dsh(["session", "set-mode", log, "read-only", "--net", "none"], s, report=False)
    assert r.rc == 125 and 'unknown network mode "none"' in r.err, r
    with open(log, "a") as f:
        f.write('{"type":"sandbox/mode","seq":9,"time":1,"data":{"mode":"read-only","network":"all"}}\n')
    r = dsh(["--session", log, "--", "/bin/true"], s)
    assert r.rc == 125 and 'sandbox/mode carries unknown network "all"' in r.err, r
    r = dsh(["explain", "--session", log, "--", "/bin/true"], s, report=False)
    assert r.rc == 125, r


def test_widening_the_network_is_an_escalation(s):
    # --escalate-net asks the approver, like --escalate: approved, the call gets the wider
    # network (source "escalation") and its mode is unchanged; rejected or not wider, nothing runs.
    need_landlock()
    cfg = s.p("home", "off.json")
    with open(cfg, "w") as f:
        f.write('{"network": "off"}')
    req = s.p("home", "request.json")
    marker = s.p("ws", "ran")
    sock = ["--", PY, "-c", "import socket; socket.socket(); open(%r, 'w').write('ran')" % marker]
    base = ["--config", cfg, "--runner", "landlock", "--mode", "workspace-write", "--root", s.ws]
    r = dsh(base + ["--escalate-net", "host", "--justification", "fetch the index", "--approver",
                    s.script("approve-net", "#!/bin/sh\ncat > '%s'\nexit 0\n" % req)] + sock, s)
    assert r.rc == 0 and os.path.exists(marker), r
    c = r.rec("confinement")
    assert c["network"]["mode"] == "host" and c["network"]["source"] == "escalation", c
    assert c["mode"] == "workspace-write", c
    j = json.load(open(req))
    assert j["network"] == "host" and j["currentNetwork"] == "off" and j["mode"] == "workspace-write", j
    assert j["reason"] == "escalate sandbox network to host: fetch the index", j
    os.unlink(marker)
    # Rejected: nothing runs, the outcome names the network.
    r = dsh(base + ["--escalate-net", "loopback", "--justification", "x", "--approver", "false"] + sock, s)
    assert r.rc != 0 and not os.path.exists(marker), r
    assert 'the user rejected escalating this command to network "loopback"' in r.err, r
    # Not wider than the call's network: refused before anyone is asked.
    asked = s.p("home", "asked")
    asker = s.script("approve-asked", "#!/bin/sh\ntouch '%s'\nexit 0\n" % asked)
    r = dsh(base + ["--net", "host", "--escalate-net", "loopback", "--justification", "x", "--approver",
                    asker] + sock, s)
    assert r.rc == 125 and not os.path.exists(marker) and not os.path.exists(asked), r
    assert r.rec("error")["code"] == "ESCALATION_NOT_WIDER", r
    assert "(off < loopback < host)" in r.err, r
    # The pairing rule is --escalate's; off is never a target.
    r = dsh(base + ["--escalate-net", "host"] + sock, s)
    assert r.rc == 125 and "needs --justification" in r.err and not os.path.exists(marker), r
    r = dsh(base + ["--escalate-net", "off", "--justification", "x", "--approver", "true"] + sock, s)
    assert r.rc == 125 and 'unknown network "off" for --escalate-net' in r.err, r
    # explain validates it and asks nobody.
    r = dsh(["explain", "--json"] + base + ["--escalate-net", "loopback", "--justification", "x", "--approver",
                                           asker, "--", "/bin/true"], s, report=False)
    e = json.loads(r.out)["escalation"]
    assert e["state"] == "pending" and e["network"] == "loopback" and e["currentNetwork"] == "off", e
    assert e["mode"] is None and not os.path.exists(asked), e


def test_probe_lists_the_network_modes_each_runner_can_enforce(s):
    need_landlock()
    r = dsh(["probe", "--json"], s, report=False)
    rows = {x["runner"]: x for x in json.loads(r.out)["runners"]}
    n = rows["landlock"]["network"]
    assert n["off"]["usable"] and n["off"]["enforcement"] == "full", n
    assert "seccomp-socket-families" in n["off"]["enforced"] and "net-namespace" not in n["off"]["enforced"], n
    assert n["loopback"]["usable"] and "net-namespace" in n["loopback"]["enforced"], n
    assert n["host"]["usable"] and n["host"]["enforcement"] == "none" and n["host"]["gaps"] == ["network"], n
    if rows["bwrap"]["usable"]:
        b = rows["bwrap"]["network"]
        assert all(b[m]["usable"] for m in ("off", "loopback", "host")), b
        assert "net-namespace" in b["off"]["enforced"], b
    else:
        assert not rows["bwrap"]["network"]["off"]["usable"], rows["bwrap"]
    r = dsh(["probe"], s, report=False)
    assert "--net off        full (seccomp-socket-families" in r.out and "--net host       not governed" in r.out, r
    # A host that refuses the namespace: loopback cannot hold on the Landlock runner, and probe says why.
    unshare = {"x86_64": 272, "aarch64": 97}.get(os.uname().machine)
    if unshare is None:
        return
    r = dsh(["probe", "--json"], s, report=False, pre=[tool("sysfault"), "EPERM", str(unshare), "--"])
    n = {x["runner"]: x for x in json.loads(r.out)["runners"]}["landlock"]["network"]
    assert n["off"]["usable"] and not n["loopback"]["usable"], n
    assert "refused the Landlock runner one (unshare(" in n["loopback"]["reason"], n
    r = dsh(["probe"], s, report=False, pre=[tool("sysfault"), "EPERM", str(unshare), "--"])
    assert "--net loopback   cannot hold: --net loopback needs a network namespace" in r.out, r


# Issue 38: every family x type 0..15 (bare and with SOCK_NONBLOCK|SOCK_CLOEXEC) through
# socket() and socketpair(), and whatever is made tries connect(), sendto() and send() to
# each of the host's unix listeners (a pathname and an abstract one of each type). Prints
# what was made and the errno of every attempt that was not.
SWEEP = r"""
import ctypes, json, os, socket, sys
cfg = json.loads(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
class Sun(ctypes.Structure):
    _fields_ = [("family", ctypes.c_ushort), ("path", ctypes.c_char * 108)]
def address(name):
    a = Sun()
    a.family = socket.AF_UNIX
    raw = name.encode()
    ctypes.memmove(ctypes.addressof(a) + 2, raw, len(raw))
    return a, 2 + len(raw) + (0 if name.startswith("\0") else 1)
targets = [address(t) for t in cfg["targets"]]
msg = cfg["token"].encode()
def reach(fd):
    os.set_blocking(fd, False)
    for a, n in targets:
        libc.sendto(fd, msg, len(msg), 0, ctypes.byref(a), n)
        libc.connect(fd, ctypes.byref(a), n)
        libc.send(fd, msg, len(msg), 0)
made, refused = [], {}
flags = socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC
for call in ("socket", "socketpair"):
    for fam in range(64):
        for proto in ((0, 1) if fam == socket.AF_UNIX else (0,)):
            for t in range(16):
                for ty in (t, t | flags):
                    if call == "socket":
                        fd = libc.socket(fam, ty, proto)
                        fds = [fd] if fd >= 0 else []
                    else:
                        sv = (ctypes.c_int * 2)()
                        fds = list(sv) if libc.socketpair(fam, ty, proto, sv) == 0 else []
                    if not fds:
                        e = ctypes.get_errno()
                        refused[e] = refused.get(e, 0) + 1
                        if e != 101:
                            refused.setdefault("not ENETUNREACH", []).append([call, fam, ty, proto, e])
                        continue
                    made.append([call, fam, ty, proto])
                    for fd in fds:
                        reach(fd)
                    for fd in fds:
                        os.close(fd)
print(json.dumps({"made": made, "refused": refused}))
"""


class UnixListeners:
    """A listener of each unix socket type on a pathname in the test's scratch dir and in the
    abstract namespace; `seen` lists what reached any of them (a connection, a message).

    Unix sockets deliver at once (a connect is queued on the listener, a datagram in the
    receiver's buffer before the call returns): close(), after the run, takes what is queued."""

    TYPES = {"stream": socket.SOCK_STREAM, "dgram": socket.SOCK_DGRAM, "seqpacket": socket.SOCK_SEQPACKET}

    def __init__(self, s, token):
        self.seen, self.socks, self.paths, self.targets = [], [], [], []
        for kind, ty in self.TYPES.items():
            path = os.path.join(s.outside, "host-%s.sock" % kind)
            self._listen(ty, path, "path-" + kind)
            os.chmod(path, 0o777)
            self.paths.append(path)
            self._listen(ty, "\0%s-%s" % (token, kind), "abstract-" + kind)

    def _listen(self, ty, addr, name):
        l = socket.socket(socket.AF_UNIX, ty)
        l.bind(addr)
        if ty != socket.SOCK_DGRAM:
            l.listen(64)
        l.setblocking(False)
        self.socks.append((l, ty, name))
        self.targets.append(addr)

    def close(self):
        for l, ty, name in self.socks:
            while True:
                try:
                    if ty == socket.SOCK_DGRAM:
                        self.seen.append((name, l.recv(4096)))
                    else:
                        c, _ = l.accept()
                        self.seen.append((name, "connection"))
                        c.close()
                except BlockingIOError:
                    break
            l.close()
        for p in self.paths:
            os.unlink(p)


def allowed_by(net, call, fam, ty, proto):
    """The allow-list of docs/SECURITY.md on this kernel (no Landlock ABI 9: no unix socket())."""
    t = ty & 0xF
    if call == "socketpair":
        return fam == socket.AF_UNIX and proto == 0 and t in (socket.SOCK_STREAM, socket.SOCK_SEQPACKET)
    if net == "off" or proto != 0:  # protocol 0 is each family's default (NETLINK_ROUTE)
        return False
    if fam in (socket.AF_INET, socket.AF_INET6):
        return t in (socket.SOCK_STREAM, socket.SOCK_DGRAM)
    return fam == socket.AF_NETLINK and t in (socket.SOCK_RAW, socket.SOCK_DGRAM)


@matrix(runner=RUNNERS)
def test_no_socket_of_any_family_or_type_reaches_a_host_unix_listener(s, runner):
    # Under each --net mode that refuses the host: nothing reaches a host unix listener of any
    # type, only the allow-list is made, everything else is the filter's ENETUNREACH, and the record
    # is unchanged.
    assert landlock_abi() < 9, "this test's allow-list is the one without Landlock's RESOLVE_UNIX"
    for net in ("off", "loopback", "allow=127.0.0.1:9"):
        token = "dsh-sweep-%d-%f" % (os.getpid(), time.time())
        h = UnixListeners(s, token)
        try:
            cfg = dict(token=token, targets=h.targets)
            r = dsh(["--runner", runner, "--net", net, "--mode", "workspace-write", "--root", s.ws, "--", PY, "-c",
                     SWEEP, json.dumps(cfg)], s, cwd=s.ws)
        finally:
            h.close()
        assert h.seen == [], (runner, net, h.seen, r)  # from outside: nothing arrived
        assert r.rc == 0 and r.out.strip(), (runner, net, r)
        got = json.loads(r.out.strip().splitlines()[-1])
        mode = "allow" if net.startswith("allow=") else net
        made = {tuple(x) for x in got["made"]}
        bad = sorted(x for x in made if not allowed_by(mode, *x))
        assert not bad, (runner, net, bad)
        assert "not ENETUNREACH" not in got["refused"], (runner, net, got["refused"])
        flags = socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC
        for ty in (socket.SOCK_STREAM, socket.SOCK_SEQPACKET, socket.SOCK_STREAM | flags):
            assert ("socketpair", socket.AF_UNIX, ty, 0) in made, (runner, net, sorted(made))
        if mode != "off":
            for x in (("socket", socket.AF_INET, socket.SOCK_STREAM, 0), ("socket", socket.AF_INET, socket.SOCK_DGRAM, 0),
                      ("socket", socket.AF_NETLINK, socket.SOCK_RAW | flags, 0)):
                assert x in made, (runner, net, x, sorted(made))
        # The record claims what it claimed before the sweep: full, the socket filter, unix refused.
        n = r.rec("confinement")["network"]
        assert n["mode"] == mode and n["enforcement"] == "full" and n["gaps"] == [], (runner, net, n)
        assert "seccomp-socket-families" in n["enforced"] and "unix-socket-refused" in n["enforced"], (runner, net, n)


if __name__ == "__main__":
    main()


@matrix(runner=RUNNERS)
def test_a_kept_socket_is_named_as_a_network_gap(s, runner):
    # A socket the caller passes with --keep-fd reaches past --net off (here
    # an unconnected UDP socket sends to a host listener): the caller's grant,
    # which the network axis must name instead of claiming `full` (issue 38).
    host = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    host.bind(("127.0.0.1", 0))
    kept = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        fd = kept.fileno()
        script = ("import socket; s = socket.socket(fileno=%d); s.sendto(b'kept', ('127.0.0.1', %d))"
                  % (fd, host.getsockname()[1]))
        r = dsh(["--runner", runner, "--net", "off", "--keep-fd", str(fd), "--", "python3", "-c", script], s,
                extra_fds=(fd,))
        assert r.rc == 0, r
        host.settimeout(10)
        assert host.recv(16) == b"kept"  # the grant is real: the datagram went out
        n = r.rec("confinement")["network"]
        assert n["enforcement"] == "partial", n
        gaps = [g for g in n["gaps"] if g["effect"] == "kept-socket"]
        assert len(gaps) == 1 and ("fd %d " % fd) in gaps[0]["detail"], n
        # A kept fd that is no socket is no gap.
        rd, wr = os.pipe()
        try:
            r = dsh(["--runner", runner, "--net", "off", "--keep-fd", str(wr), "--", "true"], s, extra_fds=(wr,))
            assert r.rc == 0 and r.rec("confinement")["network"]["gaps"] == [], r
        finally:
            os.close(rd)
            os.close(wr)
    finally:
        kept.close()
        host.close()
