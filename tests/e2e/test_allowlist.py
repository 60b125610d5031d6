"""The allow-list (issue 19), end to end under bwrap: `--net allow=LIST`.

The server is an HTTP server this test runs on 127.0.0.1; `allowed.test` and `other.test` are
mapped to it by the proxy's hosts hook (DSH_CONFINE_NET_HOSTS), never by a real DNS query. The
command's namespace has no route out: its one way out is dsh-confine's proxy, reached through the
listener the bwrap stage made inside and handed out. The server counts what reached it.
"""
import http.server
import io
import json
import os
import resource
import select
import signal
import socket
import subprocess
import tarfile
import threading
import time

from harness import DSH, EXEC_SUPERVISE, dsh, main, matrix, need, need_landlock, need_runner, skip

PY = "/usr/bin/python3"
CURL = "/usr/bin/curl"
GIT = "/usr/bin/git"
NPM = "/usr/bin/npm"

# The runners that take --net allow= (the Landlock runner in its own user+net namespace): every
# test below runs under each. What only one runner has is in test_allowlist_landlock.py.
ALLOW_RUNNERS = ("bwrap", "landlock")


def runners():
    """Each runner of ALLOW_RUNNERS (skipped, or failed under DSH_CONFINE_MUST_WORK, when one
    cannot run here)."""
    for runner in ALLOW_RUNNERS:
        need_runner(runner)
    return ALLOW_RUNNERS


class Server:
    """An HTTP server on 127.0.0.1 (or `host`) answering every GET with `hi`; `seen` lists the paths
    that reached it, `most` the most connections it held at once."""

    def __init__(self, host="127.0.0.1"):
        seen = self.seen = []
        lock = threading.Lock()
        state = self
        self.open = self.most = 0

        class H(http.server.BaseHTTPRequestHandler):
            def setup(self):
                with lock:
                    state.open += 1
                    state.most = max(state.most, state.open)
                super().setup()

            def finish(self):
                super().finish()
                with lock:
                    state.open -= 1

            def do_GET(self):
                seen.append(self.path)
                body = b"hi"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        class S(http.server.ThreadingHTTPServer):
            request_queue_size = 512
            address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

        self.httpd = S((host, 0), H)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def hosts_file(s):
    hosts = os.path.join(s.base, "hosts")
    with open(hosts, "w") as f:
        f.write("127.0.0.1 allowed.test\n127.0.0.1 other.test\n")
    os.chmod(hosts, 0o644)
    return hosts


def run(s, allow, cmd, extra=(), runner="bwrap", **kw):
    return dsh(["--runner", runner, "--net", "allow=" + allow] + list(extra) + ["--"] + cmd, s,
               env={"DSH_CONFINE_NET_HOSTS": hosts_file(s)}, **kw)


def network_records(r):
    return [x for x in r.report if x.get("type") == "network"]


def need_curl():
    need(os.access(CURL, os.X_OK), "curl is not installed (.ci/packages installs it)")


def test_curl_reaches_an_allowed_host_through_the_proxy(s):
    need_curl()
    h = Server()
    try:
        for runner in runners():
            del h.seen[:]
            r = run(s, "allowed.test,127.0.0.1:%d" % h.port,
                    [CURL, "-sS", "--max-time", "5", "http://allowed.test:%d/x" % h.port], runner=runner)
            assert r.rc == 0 and r.out == "hi", r
            assert h.seen == ["/x"], h.seen
            conf = [x for x in r.report if x.get("type") == "confinement"][0]
            assert conf["network"]["mode"] == "allow" and "egress-proxy" in conf["network"]["enforced"], conf["network"]
            assert conf["network"]["allow"] == ["allowed.test", "127.0.0.1:%d" % h.port], conf["network"]
            recs = network_records(r)
            assert len(recs) == 1, recs
            assert recs[0]["verdict"] == "allowed" and recs[0]["host"] == "allowed.test" and recs[0]["address"] == "127.0.0.1"
            assert recs[0]["proto"] == "http" and recs[0]["resolvedBy"] == "hosts-file", recs
    finally:
        h.close()


def test_python_urllib_reaches_an_allowed_host(s):
    h = Server()
    try:
        for runner in runners():
            del h.seen[:]
            r = run(s, "allowed.test,127.0.0.1:%d" % h.port,
                    [PY, "-c", "import urllib.request,sys; sys.stdout.write(urllib.request.urlopen("
                               "'http://allowed.test:%d/py', timeout=5).read().decode())" % h.port], runner=runner)
            assert r.rc == 0 and r.out == "hi", r
            assert h.seen == ["/py"], h.seen
    finally:
        h.close()


class FileServer:
    """Serves a directory over HTTP on 127.0.0.1 (git's dumb HTTP protocol needs nothing more)."""

    def __init__(self, root):
        seen = self.seen = []

        class H(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *a, **kw):
                super().__init__(*a, directory=root, **kw)

            def do_GET(self):
                seen.append(self.path)
                super().do_GET()

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_git_clone_over_http_from_an_allowed_host(s):
    need(os.access(GIT, os.X_OK), "git is not installed (.ci/packages installs it)")
    srv = s.p("outside", "srv")
    work = s.p("outside", "work")
    os.mkdir(srv)
    g = {"env": dict(s.env(), GIT_CONFIG_NOSYSTEM="1", GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t",
                     GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t"), "check": True,
         "stdout": subprocess.DEVNULL}
    subprocess.run([GIT, "init", "-q", "--bare", os.path.join(srv, "repo.git")], **g)
    subprocess.run([GIT, "init", "-q", work], **g)
    with open(os.path.join(work, "README"), "w") as f:
        f.write("cloned through the proxy\n")
    subprocess.run([GIT, "-C", work, "add", "README"], **g)
    subprocess.run([GIT, "-C", work, "commit", "-q", "-m", "one"], **g)
    subprocess.run([GIT, "-C", work, "push", "-q", os.path.join(srv, "repo.git"), "HEAD:refs/heads/main"], **g)
    subprocess.run([GIT, "-C", os.path.join(srv, "repo.git"), "symbolic-ref", "HEAD", "refs/heads/main"], **g)
    subprocess.run([GIT, "-C", os.path.join(srv, "repo.git"), "update-server-info"], **g)
    h = FileServer(srv)
    try:
        for runner in runners():
            del h.seen[:]
            # A root of its own per runner: a clone left in a shared root is a repository whose
            # hooks and config Landlock could not keep read-only, and it would refuse (issue 37).
            root = s.p("ws", runner)
            os.mkdir(root)
            dest = os.path.join(root, "clone")
            r = run(s, "allowed.test,127.0.0.1:%d" % h.port,
                    [GIT, "clone", "-q", "http://allowed.test:%d/repo.git" % h.port, dest],
                    extra=["--mode", "workspace-write", "--root", root], runner=runner)
            assert r.rc == 0, r
            assert open(os.path.join(dest, "README")).read() == "cloned through the proxy\n"
            assert "/repo.git/info/refs?service=git-upload-pack" in h.seen, h.seen
            recs = network_records(r)
            assert recs and all(x["verdict"] == "allowed" and x["host"] == "allowed.test" for x in recs), recs
            assert len(recs) == len(h.seen), (recs, h.seen)  # one record per request, each one decided
    finally:
        h.close()


PKG = "dsh-tiny"


class Registry:
    """A registry stub: the package document of one package and its tarball, nothing else."""

    def __init__(self):
        import base64
        import hashlib
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tf:
            for name, data in (("package/package.json",
                                json.dumps({"name": PKG, "version": "1.0.0", "main": "index.js"}).encode()),
                               ("package/index.js", b"module.exports = 'tiny from the stub';\n")):
                ti = tarfile.TarInfo(name)
                ti.size, ti.mode, ti.mtime = len(data), 0o644, 1700000000
                tf.addfile(ti, io.BytesIO(data))
        tgz = buf.getvalue()
        seen = self.seen = []
        docs = {}

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                seen.append(self.path)
                body, ctype = docs.get(self.path.split("?")[0], (None, None))
                if body is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.httpd.server_address[1]
        tarball = "/%s/-/%s-1.0.0.tgz" % (PKG, PKG)
        doc = {"name": PKG, "dist-tags": {"latest": "1.0.0"},
               "versions": {"1.0.0": {"name": PKG, "version": "1.0.0", "main": "index.js", "dist": {
                   "tarball": "http://allowed.test:%d%s" % (self.port, tarball),
                   "shasum": hashlib.sha1(tgz).hexdigest(),
                   "integrity": "sha512-" + base64.b64encode(hashlib.sha512(tgz).digest()).decode()}}}}
        docs["/" + PKG] = (json.dumps(doc).encode(), "application/json")
        docs[tarball] = (tgz, "application/octet-stream")
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_npm_install_from_an_allowed_registry(s):
    need(os.access(NPM, os.X_OK), "npm is not installed (.ci/packages installs it)")
    reg = Registry()
    try:
        for runner in runners():
            del reg.seen[:]
            proj = s.p("ws", "proj-" + runner)
            os.mkdir(proj)
            # A fresh cache and HOME in the workspace: nothing of the host's npm state is used.
            script = ('cd "$1" && HOME="$1/home" npm_config_update_notifier=false npm install --no-audit --no-fund '
                      '--cache "$1/cache" --registry "http://allowed.test:$2/" %s >/dev/null && '
                      'node -e \'process.stdout.write(require("%s"))\'' % (PKG, PKG))
            r = run(s, "allowed.test,127.0.0.1:%d" % reg.port, ["/bin/sh", "-c", script, "sh", proj, str(reg.port)],
                    extra=["--mode", "workspace-write", "--root", s.ws], runner=runner, timeout=120)
            assert r.rc == 0 and r.out == "tiny from the stub", r
            assert "/" + PKG in reg.seen and "/%s/-/%s-1.0.0.tgz" % (PKG, PKG) in reg.seen, reg.seen
            recs = network_records(r)
            assert recs and all(x["verdict"] == "allowed" and x["host"] == "allowed.test" for x in recs), recs
    finally:
        reg.close()


@matrix(runner=ALLOW_RUNNERS)
def test_an_unlisted_host_is_a_403_with_a_record_and_reaches_nothing(s, runner):
    need_curl()
    h = Server()
    try:
        r = run(s, "allowed.test,127.0.0.1:%d" % h.port,
                [CURL, "-sS", "--max-time", "5", "-o", "/dev/null", "-w", "%{http_code}",
                 "http://other.test:%d/" % h.port], runner=runner)
        assert r.rc == 0 and r.out == "403", r
        assert h.seen == [], h.seen
        recs = network_records(r)
        assert [(x["host"], x["verdict"], x["reason"]) for x in recs] == [("other.test", "refused", "not-listed")], recs
    finally:
        h.close()


def test_a_name_resolving_to_loopback_is_refused_unless_the_address_is_listed(s):
    need_curl()
    h = Server()
    try:
        for runner in runners():
            r = run(s, "allowed.test", [CURL, "-sS", "--max-time", "5", "-o", "/dev/null", "-w", "%{http_code}",
                                        "http://allowed.test:%d/" % h.port], runner=runner)
            assert r.rc == 0 and r.out == "403", r
            assert h.seen == [], h.seen
            recs = network_records(r)
            assert len(recs) == 1 and recs[0]["reason"] == "private-address", recs
            assert recs[0]["detail"] == "127.0.0.1 is loopback" and recs[0]["address"] == "127.0.0.1", recs
    finally:
        h.close()


def ipv6_loopback():
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as t:
            t.bind(("::1", 0))
        return True
    except OSError:
        return False


@matrix(runner=ALLOW_RUNNERS, supervise=EXEC_SUPERVISE)
def test_an_allowed_loopback_port_is_reached_by_curl_and_urllib_and_no_other(s, runner, supervise):
    # --net allow=127.0.0.1:PORT (and [::1]:PORT, localhost:PORT) names a port of the host's
    # loopback: curl and python's urllib reach the test's listener there, as they do bare, through
    # the proxy (NO_PROXY no longer sends that spelling to the namespace's own loopback, issue 42).
    # A second listener on the host's loopback, not allowed, is reached by nobody.
    need_curl()
    spellings = [("127.0.0.1", "127.0.0.1:%d", "http://127.0.0.1:%d/"),
                 ("127.0.0.1", "localhost:%d", "http://localhost:%d/")]
    if ipv6_loopback():
        spellings.append(("::1", "[::1]:%d", "http://[::1]:%d/"))
    for host, rule, url in spellings:
        h, other = Server(host), Server(host)
        try:
            target, refused = url % h.port + "c", url % other.port + "o"
            urllib = ("import urllib.request,sys\n"
                      "sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())")
            # Bare: both listeners answer.
            bare = subprocess.run([CURL, "-sS", "--max-time", "5", target], capture_output=True, text=True,
                                  timeout=30)
            assert bare.returncode == 0 and bare.stdout == "hi", bare
            del h.seen[:]
            r = dsh(["--runner", runner, "--net", "allow=" + rule % h.port] + supervise +
                    ["--", CURL, "-sS", "--max-time", "5", target], s)
            assert r.rc == 0 and r.out == "hi", (rule, r)
            assert h.seen == ["/c"], (rule, h.seen)
            r = dsh(["--runner", runner, "--net", "allow=" + rule % h.port] + supervise +
                    ["--", PY, "-c", urllib, url % h.port + "u"], s)
            assert r.rc == 0 and r.out == "hi", (rule, r)
            assert h.seen == ["/c", "/u"], (rule, h.seen)
            # The other port of the host's loopback: refused by the proxy (403), never reached.
            r = dsh(["--runner", runner, "--net", "allow=" + rule % h.port] + supervise +
                    ["--", CURL, "-sS", "--max-time", "5", "-o", "/dev/null", "-w", "%{http_code}", refused], s)
            assert r.rc == 0 and r.out == "403", (rule, r)
            assert other.seen == [], (rule, other.seen)
        finally:
            h.close()
            other.close()


@matrix(runner=ALLOW_RUNNERS)
def test_going_direct_leads_nowhere(s, runner):
    # curl --noproxy '*', a raw socket to the server's address, a UDP datagram to a socket the
    # test holds on the host's loopback and to an outside address: the namespace has only its own
    # lo and no route.
    need_curl()
    h = Server()
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    probe = r'''
import errno, socket, sys
port, uport = int(sys.argv[1]), int(sys.argv[2])
out = []
def attempt(name, fn):
    try:
        fn(); out.append(name + ":ok")
    except OSError as e:
        out.append(name + ":" + errno.errorcode.get(e.errno, str(e.errno)))
def tcp(addr):
    def f():
        c = socket.socket(); c.settimeout(2); c.connect(addr)
    return f
def udp(addr):
    def f():
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.sendto(b"x", addr)
    return f
attempt("loopback", tcp(("127.0.0.1", port)))
attempt("outside", tcp(("192.0.2.1", 80)))
attempt("udp", udp(("192.0.2.1", 53)))
attempt("udp-loopback", udp(("127.0.0.1", uport)))
print(" ".join(out))
'''
    try:
        direct = run(s, "allowed.test,127.0.0.1:%d" % h.port,
                     [CURL, "-sS", "--max-time", "5", "--noproxy", "*", "http://127.0.0.1:%d/" % h.port],
                     runner=runner)
        raw = run(s, "allowed.test,127.0.0.1:%d" % h.port,
                  [PY, "-c", probe, str(h.port), str(udp.getsockname()[1])], runner=runner)
        assert direct.rc == 7, direct  # could not connect
        # The datagram to 127.0.0.1 is sent (the namespace's own lo takes it) and lands nowhere:
        # the host's socket holds nothing ahead of a marker the test sends it after the run.
        udp.sendto(b"marker", udp.getsockname())
        udp.settimeout(5)
        assert udp.recv(100) == b"marker", "a datagram from the command reached the host"
        assert raw.rc == 0 and raw.out.split() == ["loopback:ECONNREFUSED", "outside:ENETUNREACH",
                                                   "udp:ENETUNREACH", "udp-loopback:ok"], raw
        assert h.seen == [], h.seen
        assert network_records(direct) == [] and network_records(raw) == []
    finally:
        h.close()
        udp.close()


def test_names_resolve_only_through_the_proxy(s):
    # There is no DNS inside: a SOCKS5 client that sends the name (socks5h) works, one that
    # resolves first (socks5) and a plain lookup fail to resolve; the proxy resolved the name.
    need_curl()
    h = Server()
    script = ('p=${HTTP_PROXY##*:}; u=http://allowed.test:%d/s; '
              'curl -sS --max-time 5 --noproxy "" --socks5-hostname 127.0.0.1:$p $u; echo " $?"; '
              'curl -sS --max-time 5 --noproxy "" --socks5 127.0.0.1:$p $u; echo " $?"; '
              '%s -c "import socket; socket.getaddrinfo(\'allowed.test\', 80)" 2>/dev/null; echo "$?"'
              % (h.port, PY))
    try:
        for runner in runners():
            del h.seen[:]
            r = run(s, "allowed.test,127.0.0.1:%d" % h.port, ["/bin/sh", "-c", script], runner=runner)
            # curl 97 (a SOCKS error) here, after its own lookup failed.
            assert r.rc == 0 and r.out.split() == ["hi", "0", "97", "1"], r
            assert "Could not resolve host: allowed.test" in r.err, r
            assert h.seen == ["/s"], h.seen
            recs = network_records(r)
            assert [(x["proto"], x["host"], x["verdict"], x["resolvedBy"]) for x in recs] == [
                ("socks5", "allowed.test", "allowed", "hosts-file")], recs
    finally:
        h.close()


RELAY = r'''
import os, socket, sys
port, other = int(sys.argv[1]), int(sys.argv[2])
proxy = ("127.0.0.1", int(os.environ["HTTP_PROXY"].rsplit(":", 1)[1]))
def rest(c):
    got = b""
    while True:
        d = c.recv(65536)
        if not d:
            return got
        got += d
# A tunnel to the allowed host, then a CONNECT to another inside it.
c = socket.create_connection(proxy, timeout=10)
c.sendall(b"CONNECT allowed.test:%d HTTP/1.1\r\nHost: allowed.test:%d\r\n\r\n" % (port, port))
head = b""
while b"\r\n\r\n" not in head:
    head += c.recv(1)
c.sendall(b"CONNECT other.test:%d HTTP/1.1\r\nHost: other.test:%d\r\n\r\n" % (other, other))
inner = rest(c)
print(head.split(b"\r\n")[0].decode(), "|", inner.split(b"\r\n")[0].decode())
# A kept-alive forward connection: an allowed GET, then CONNECT and GET to the other, pipelined.
c = socket.create_connection(proxy, timeout=10)
c.sendall(b"GET http://allowed.test:%d/first HTTP/1.1\r\nHost: allowed.test\r\n\r\n"
          b"CONNECT other.test:%d HTTP/1.1\r\nHost: other.test\r\n\r\n"
          b"GET http://other.test:%d/second HTTP/1.1\r\nHost: other.test\r\n\r\n" % (port, other, other))
got = rest(c)
print(got.count(b"HTTP/1."), got.split(b"\r\n")[0].decode(), got.endswith(b"hi"))
'''


def test_a_relayed_connect_through_an_allowed_host_reaches_only_that_host(s):
    # Inside a CONNECT tunnel the bytes go to the checked destination only (the allowed server
    # gets the inner CONNECT and answers it itself: 501); on a forward connection a second request
    # is never sent anywhere. The other server, on another port, sees nothing either way.
    h, other = Server(), Server()
    try:
        for runner in runners():
            del h.seen[:]
            r = run(s, "allowed.test,127.0.0.1:%d" % h.port, [PY, "-c", RELAY, str(h.port), str(other.port)],
                    runner=runner)
            assert r.rc == 0, r
            first, second = r.out.splitlines()
            assert first.startswith("HTTP/1.1 200 ") and first.endswith("| HTTP/1.0 501 Unsupported method ('CONNECT')"), r
            assert second.split() == ["1", "HTTP/1.0", "200", "OK", "True"], r
            assert other.seen == [] and other.most == 0, other.seen
            assert h.seen == ["/first"], h.seen
            recs = network_records(r)
            assert [(x["proto"], x["host"], x["port"], x["verdict"]) for x in recs] == [
                ("connect", "allowed.test", h.port, "allowed"), ("http", "allowed.test", h.port, "allowed")], recs
    finally:
        h.close()
        other.close()


@matrix(runner=ALLOW_RUNNERS)
def test_the_first_connection_after_start_succeeds(s, runner):
    # The listener exists before the command's first instruction: no start-up race, 100 of 100.
    need_curl()
    h = Server()
    try:
        fails = []
        for i in range(100):
            r = run(s, "allowed.test,127.0.0.1:%d" % h.port,
                    [CURL, "-sS", "--max-time", "5", "http://allowed.test:%d/%d" % (h.port, i)], runner=runner,
                    report=False)
            if r.rc != 0 or r.out != "hi":
                fails.append(r)
        assert fails == [], (len(fails), fails[:1])
        assert len(h.seen) == 100, h.seen
    finally:
        h.close()


def test_a_failed_outbound_connect_is_a_502_and_a_record_and_nothing_hangs(s):
    need_curl()
    # A port held bound but not listening: connecting to it is refused, and nobody can take it.
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))
    port = dead.getsockname()[1]
    url = "http://allowed.test:%d/" % port
    try:
        for runner in runners():
            t0 = time.monotonic()
            r = run(s, "allowed.test,127.0.0.1:%d" % port,
                    ["/bin/sh", "-c", 'curl -sS --max-time 20 -o /dev/null -w "%%{http_code}" %s; echo " $?"; '
                                      'curl -sS --max-time 20 -p -o /dev/null %s; echo "$?"' % (url, url)],
                    runner=runner)
            took = time.monotonic() - t0
            assert r.rc == 0 and r.out.split() == ["502", "0", "56"], r  # 56: the CONNECT was answered 502
            assert took < 10, took
            recs = network_records(r)
            assert [(x["proto"], x["verdict"], x["reason"]) for x in recs] == [
                ("http", "failed", "connect-failed"), ("connect", "failed", "connect-failed")], recs
            assert all(x["detail"] == "Connection refused" for x in recs), recs
    finally:
        dead.close()


class Slow:
    """A server that answers one request with an endless body, 1 KiB every 20 ms; `closed` is set
    when its peer closes the connection."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.streaming, self.closed = threading.Event(), threading.Event()
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        self.sock.settimeout(60)
        conn, _ = self.sock.accept()
        head = b""
        while b"\r\n\r\n" not in head:
            head += conn.recv(4096)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000000\r\n\r\n")
        self.streaming.set()
        deadline = time.monotonic() + 60
        try:
            while time.monotonic() < deadline:
                conn.sendall(b"x" * 1024)
                if select.select([conn], [], [], 0.02)[0] and conn.recv(4096) == b"":
                    break
        except OSError:
            pass
        else:
            if time.monotonic() >= deadline:
                return
        self.closed.set()
        conn.close()

    def close(self):
        self.sock.close()


def command_pids(token, argv0):
    """Host pids whose command line starts with argv0 and contains token (not bwrap's or ours)."""
    found = []
    for n in os.listdir("/proc"):
        if not n.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % n, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv[0] == argv0.encode() and any(token.encode() in a for a in argv):
            found.append(int(n))
    return found


def test_the_command_killed_mid_transfer_leaves_nothing_behind(s):
    need_curl()
    for runner in runners():
        for extra in ([], ["--supervise"]):
            slow = Slow()
            token = "slow-%d-%s-%d" % (os.getpid(), runner, len(extra))
            env = dict(s.env(), DSH_CONFINE_NET_HOSTS=hosts_file(s))
            proc = subprocess.Popen([DSH, "--runner", runner, "--net", "allow=allowed.test,127.0.0.1:%d" % slow.port]
                                    + extra + ["--", CURL, "-sS", "-o", "/dev/null",
                                               "http://allowed.test:%d/%s" % (slow.port, token)],
                                    cwd=s.base, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE)
            try:
                assert slow.streaming.wait(20), "the transfer never started"
                pids = command_pids(token, CURL)
                assert len(pids) == 1, pids
                os.kill(pids[0], signal.SIGKILL)
                t0 = time.monotonic()
                rc = proc.wait(timeout=10)
                took = time.monotonic() - t0
                assert rc in (-signal.SIGKILL, 128 + signal.SIGKILL), (rc, proc.stderr.read())
                assert took < 3, took
                assert slow.closed.wait(5), "the server's connection was left open"
                # Nothing of the run is left: not the command, not bwrap, not dsh-confine.
                assert command_pids(token, CURL) == [], "the command survived"
                left = [p for p in processes_of(token)]
                assert left == [], left
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                proc.stderr.close()
                slow.close()


def processes_of(token):
    out = []
    for n in os.listdir("/proc"):
        if n.isdigit() and int(n) != os.getpid():
            try:
                with open("/proc/%s/cmdline" % n, "rb") as f:
                    if token.encode() in f.read():
                        out.append(int(n))
            except OSError:
                pass
    return out


FDS = r'''
import sys, urllib.request
port = int(sys.argv[1])
print("ready", flush=True); sys.stdin.readline()
for i in range(20):
    assert urllib.request.urlopen("http://allowed.test:%d/f%d" % (port, i), timeout=10).read() == b"hi"
print("done", flush=True); sys.stdin.readline()
'''


def sockets_of(pid):
    n = 0
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            n += os.readlink("/proc/%d/fd/%s" % (pid, fd)).startswith("socket:")
        except OSError:
            pass
    return n


def test_finished_connections_leave_no_socket_in_dsh_confine(s):
    # dsh-confine (the parent that runs the proxy) holds as many sockets after 20 finished
    # requests as before the first: every client and upstream socket is closed.
    for runner in runners():
        h = Server()
        env = dict(s.env(), DSH_CONFINE_NET_HOSTS=hosts_file(s))
        proc = subprocess.Popen([DSH, "--runner", runner, "--net", "allow=allowed.test,127.0.0.1:%d" % h.port,
                                 "--", PY, "-c", FDS, str(h.port)], cwd=s.base, env=env, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            assert proc.stdout.readline() == b"ready\n"
            try:
                before = sockets_of(proc.pid)
            except PermissionError:
                skip("dsh-confine's /proc/PID/fd is not readable by this user (not dumpable)")
            proc.stdin.write(b"\n")
            proc.stdin.flush()
            assert proc.stdout.readline() == b"done\n", proc.stderr.read()
            # The proxy closes a connection when the upstream's end is seen and its last bytes are
            # out, which may come just after the client has its answer: wait for it, 5 s at most.
            deadline = time.monotonic() + 5
            while (after := sockets_of(proc.pid)) != before and time.monotonic() < deadline:
                time.sleep(0.01)
            proc.stdin.write(b"\n")
            proc.stdin.flush()
            assert proc.wait(timeout=20) == 0, proc.stderr.read()
            assert len(h.seen) == 20, h.seen
            assert before >= 1 and after == before, (before, after)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            for f in (proc.stdin, proc.stdout, proc.stderr):
                f.close()
            h.close()


MANY = r'''
import os, socket, sys, threading
port, n = int(sys.argv[1]), int(sys.argv[2])
proxy = ("127.0.0.1", int(os.environ["HTTP_PROXY"].rsplit(":", 1)[1]))
everyone = threading.Barrier(n, timeout=60)
ok, errors = [], []
def one(i):
    try:
        c = socket.create_connection(proxy, timeout=60)
        c.sendall(b"CONNECT allowed.test:%d HTTP/1.1\r\nHost: allowed.test\r\n\r\n" % port)
        head = b""
        while b"\r\n\r\n" not in head:
            d = c.recv(4096)
            if not d:
                raise EOFError("closed before the tunnel was up")
            head += d
        if not head.startswith(b"HTTP/1.1 200"):
            raise ValueError(head)
        everyone.wait()  # every tunnel is open at once before any is used
        c.sendall(b"GET /c%d HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n" % i)
        got = b""
        while True:
            d = c.recv(4096)
            if not d:
                break
            got += d
        if got.startswith(b"HTTP/1.0 200") and got.endswith(b"hi"):
            ok.append(i)
        else:
            errors.append(got[:80])
    except Exception as e:
        errors.append(repr(e))
ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
for t in ts: t.start()
for t in ts: t.join()
print(len(ok), errors[:3])
'''


def test_two_hundred_concurrent_connections_all_succeed(s):
    h = Server()
    try:
        for runner in runners():
            del h.seen[:]
            # The barrier inside is the proof: no tunnel is used before all 200 are up at once.
            r = run(s, "allowed.test,127.0.0.1:%d" % h.port, [PY, "-c", MANY, str(h.port), "200"], runner=runner,
                    timeout=120)
            assert r.rc == 0 and r.out == "200 []\n", r
            assert sorted(h.seen) == sorted("/c%d" % i for i in range(200)), h.seen
            recs = network_records(r)
            assert len(recs) == 200 and all(x["verdict"] == "allowed" for x in recs), recs[:3]
    finally:
        h.close()



# Issue 38: an IPv4 address a deny rule names is denied in every spelling a client can send it in.
# The allow-list holds both families whole (::/0, 0.0.0.0/0), so nothing but the deny rule stands
# between the command and the test's server on 127.0.0.1. Each form goes through the proxy: as a
# CONNECT authority, as an absolute URI, as a SOCKS5 IPv6 address or name, and as what the hosts
# file gives a listed name.
FORMS = r"""
import os, socket, sys
port = int(sys.argv[1])
proxy = ("127.0.0.1", int(os.environ["HTTP_PROXY"].rsplit(":", 1)[1]))
def head(req):
    c = socket.create_connection(proxy, timeout=10)
    c.sendall(req)
    got = b""
    while b"\r\n\r\n" not in got:
        d = c.recv(4096)
        if not d:
            break
        got += d
    c.close()
    return got.split(b" ", 2)[1].decode() if got else "closed"
def socks(atyp, addr):
    c = socket.create_connection(proxy, timeout=10)
    c.sendall(b"\x05\x01\x00")
    assert c.recv(2) == b"\x05\x00"
    c.sendall(b"\x05\x01\x00" + bytes([atyp]) + addr + port.to_bytes(2, "big"))
    got = c.recv(10)
    c.close()
    return "socks%d" % got[1] if len(got) > 1 else "closed"
for form in sys.argv[2:]:
    kind, _, what = form.partition("=")
    if kind == "connect":
        r = head(b"CONNECT %s:%d HTTP/1.1\r\nHost: x\r\n\r\n" % (what.encode(), port))
    elif kind == "get":
        r = head(b"GET http://%s:%d/leak HTTP/1.1\r\nHost: x\r\n\r\n" % (what.encode(), port))
    elif kind == "socks6":
        r = socks(4, socket.inet_pton(socket.AF_INET6, what))
    else:
        r = socks(3, bytes([len(what)]) + what.encode())
    print(form, r)
"""

# (how it is sent, the form, the deny rule that must refuse it)
DENIED_FORMS = [
    ("connect", "[::ffff:127.0.0.1]", "127.0.0.1"),
    ("connect", "[::FFFF:7F00:1]", "127.0.0.1"),
    ("connect", "[::127.0.0.1]", "127.0.0.1"),
    ("connect", "[64:ff9b::127.0.0.1]", "127.0.0.1"),
    ("connect", "[64:FF9B::7F00:1]", "127.0.0.1"),
    ("connect", "[64:ff9b:1:7f00:0:100::]", "127.0.0.1"),
    ("connect", "[2002:7f00:1::]", "127.0.0.1"),
    ("connect", "[2001:0:4136:e378:8000:63bf:80ff:fffe]", "127.0.0.1"),
    ("connect", "[2001:db8::5efe:127.0.0.1]", "127.0.0.1"),
    ("connect", "2130706433", "127.0.0.1"),
    ("connect", "0x7f.1", "127.0.0.1"),
    ("connect", "0177.0.0.1", "127.0.0.1"),
    ("connect", "127.1", "127.0.0.1"),
    ("connect", "127.0.0.1.", "127.0.0.1"),
    ("connect", "[64:ff9b::a9fe:a9fe]", "169.254.169.254"),
    ("connect", "[2002:a9fe:a9fe::]", "169.254.169.254"),
    ("connect", "2852039166", "169.254.169.254"),
    ("get", "[64:ff9b::7f00:1]", "127.0.0.1"),
    ("get", "0x7f000001", "127.0.0.1"),
    ("socks6", "64:ff9b::7f00:1", "127.0.0.1"),
    ("socks6", "2002:7f00:1::", "127.0.0.1"),
    ("socks6", "::ffff:127.0.0.1", "127.0.0.1"),
    ("socksname", "0x7f.1", "127.0.0.1"),
    ("connect", "nat64.test", "127.0.0.1"),
    ("connect", "sixtofour.test", "127.0.0.1"),
    # The unspecified address is where the kernel's connect() reaches the host's loopback (the
    # attack pass of session 25: 0.0.0.0 and [::] got past a deny of 127.0.0.0/8 and ::1).
    ("connect", "0.0.0.0", "127.0.0.1"),
    ("connect", "0", "127.0.0.1"),
    ("connect", "[::ffff:0.0.0.0]", "127.0.0.1"),
    ("get", "0.0.0.0", "127.0.0.1"),
    ("socksname", "0x0", "127.0.0.1"),
    ("connect", "[::]", "::1"),
    ("socks6", "::", "::1"),
]


@matrix(runner=ALLOW_RUNNERS)
def test_a_denied_ipv4_address_is_denied_in_every_ipv6_form_and_spelling(s, runner):
    h = Server()
    try:
        hosts = hosts_file(s)
        with open(hosts, "a") as f:
            f.write("64:ff9b::7f00:1 nat64.test\n2002:7f00:1::1 sixtofour.test\n")
        forms = ["%s=%s" % (kind, form) for kind, form, _ in DENIED_FORMS]
        r = dsh(["--runner", runner, "--net", "allow=::/0,0.0.0.0/0,nat64.test,sixtofour.test",
                 "--net-deny", "127.0.0.1,169.254.169.254,::1", "--", PY, "-c", FORMS, str(h.port)] + forms, s,
                env={"DSH_CONFINE_NET_HOSTS": hosts})
        assert r.rc == 0, r
        want = "".join("%s %s\n" % (f, "socks2" if f.startswith("socks") else "403") for f in forms)
        assert r.out == want, (r.out, want)
        assert h.seen == [], h.seen
        recs = network_records(r)
        assert [(x["verdict"], x["reason"], x["rule"]) for x in recs] == \
            [("refused", "denied", rule) for _, _, rule in DENIED_FORMS], recs
        # The normal form is what the record names: the IPv4 address itself for what is translated.
        by_form = dict(zip(forms, recs))
        assert by_form["connect=2130706433"]["host"] == "127.0.0.1", by_form
        assert by_form["connect=[::FFFF:7F00:1]"]["address"] == "127.0.0.1", by_form
        assert by_form["connect=[2002:7f00:1::]"]["detail"] == "2002:7f00:1:: carries 127.0.0.1", by_form
    finally:
        h.close()


@matrix(runner=ALLOW_RUNNERS)
def test_a_listed_ipv4_address_is_reached_through_its_translated_spellings(s, runner):
    # The mapped form and the shorthands are the IPv4 address itself: listed, they reach the server.
    h = Server()
    try:
        forms = ["connect=[::ffff:127.0.0.1]", "connect=2130706433", "get=0x7f.1", "connect=127.0.0.1."]
        r = run(s, "127.0.0.1:%d" % h.port, [PY, "-c", FORMS, str(h.port)] + forms, runner=runner)
        assert r.rc == 0 and r.out == "".join("%s 200\n" % f for f in forms), r
        assert h.seen == ["/leak"], h.seen
        recs = network_records(r)
        assert [(x["verdict"], x["host"], x["address"]) for x in recs] == [("allowed", "127.0.0.1", "127.0.0.1")] * 4, recs
    finally:
        h.close()


# Issue 38: thousands of idle connections to the proxy. dsh-confine runs under the usual open-file
# soft limit of 1024 (the command raises its own, to hold them all): the proxy holds at most its
# bound of them, the oldest idle shed first, serves a listed destination meanwhile and does not
# spin on EMFILE.
IDLE = r"""
import os, resource, socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (n + 256, hard))
proxy = ("127.0.0.1", int(os.environ["HTTP_PROXY"].rsplit(":", 1)[1]))
held = []
for i in range(n):
    c = socket.socket()
    c.settimeout(10)
    c.connect(proxy)
    held.append(c)
print("held", len(held), flush=True)
try:
    c = socket.create_connection(proxy, timeout=10)
    c.sendall(b"CONNECT allowed.test:%d HTTP/1.1\r\n\r\n" % port)
    got = b""
    while b"\r\n\r\n" not in got:
        d = c.recv(4096)
        if not d:
            raise EOFError("closed before the tunnel was up")
        got += d
    c.sendall(b"GET /after HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n")
    body = b""
    while True:
        d = c.recv(4096)
        if not d:
            break
        body += d
    print("served", got.split(b" ", 2)[1].decode(), body.endswith(b"hi"), flush=True)
except Exception as e:
    print("failed", repr(e), flush=True)
sys.stdin.readline()  # every connection is held until the test has measured
"""


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def context_switches(pid):
    """The main thread's (the proxy's) voluntary and involuntary switches: a loop blocked in poll
    makes none; a spinning one is switched out tens of times a second on a busy machine, where it
    may get too little CPU for the CPU check to see it."""
    with open("/proc/%d/status" % pid) as f:
        return sum(int(line.split(":")[1]) for line in f if "ctxt_switches:" in line)


@matrix(runner=ALLOW_RUNNERS)
def test_four_thousand_idle_connections_neither_starve_nor_spin_the_proxy(s, runner):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need(hard == resource.RLIM_INFINITY or hard >= 4500, "the open-file hard limit is below 4500")
    h = Server()
    env = dict(s.env(), DSH_CONFINE_NET_HOSTS=hosts_file(s))
    proc = subprocess.Popen([DSH, "--runner", runner, "--net", "allow=allowed.test,127.0.0.1:%d" % h.port,
                             "--", PY, "-c", IDLE, str(h.port), "4000"], cwd=s.base, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard)))
    try:
        assert proc.stdout.readline() == b"held 4000\n", proc.stderr.read()
        served = proc.stdout.readline()
        # The CPU the proxy spends while the 4,000 connections sit idle: a rate, so a window of
        # wall time is measured (not waited on for an event). A loop spinning on EMFILE spends
        # the whole window.
        before, switches, start = cpu_seconds(proc.pid), context_switches(proc.pid), time.monotonic()
        time.sleep(1.0)
        spent, wall = cpu_seconds(proc.pid) - before, time.monotonic() - start
        switched = context_switches(proc.pid) - switches
        proc.stdin.write(b"\n")
        proc.stdin.flush()
        assert proc.wait(timeout=30) == 0, proc.stderr.read()
        assert served == b"served 200 True\n", served
        assert h.seen == ["/after"], h.seen
        assert spent < 0.25 * wall and switched < 20, (spent, wall, switched)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for f in (proc.stdin, proc.stdout, proc.stderr):
            f.close()
        h.close()


if __name__ == "__main__":
    main()
