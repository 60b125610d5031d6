"""The allow-list (issue 19), end to end under bwrap: `--net allow=LIST`.

The server is an HTTP server this test runs on 127.0.0.1; `allowed.test` and `other.test` are
mapped to it by the proxy's hosts hook (DSH_CONFINE_NET_HOSTS), never by a real DNS query. The
command's namespace has no route out: its one way out is dsh-confine's proxy, reached through the
listener the bwrap stage made inside and handed out. The server counts what reached it.
"""
import http.server
import os
import threading

from harness import dsh, main, need_bwrap, need_landlock, skip

PY = "/usr/bin/python3"
CURL = "/usr/bin/curl"


class Server:
    def __init__(self):
        seen = self.seen = []

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                seen.append(self.path)
                body = b"hi"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def run(s, allow, cmd, extra=()):
    hosts = os.path.join(s.base, "hosts")
    with open(hosts, "w") as f:
        f.write("127.0.0.1 allowed.test\n127.0.0.1 other.test\n")
    os.chmod(hosts, 0o644)
    return dsh(["--runner", "bwrap", "--net", "allow=" + allow] + list(extra) + ["--"] + cmd, s,
               env={"DSH_CONFINE_NET_HOSTS": hosts})


def network_records(r):
    return [x for x in r.report if x.get("type") == "network"]


def need_curl():
    if not os.access(CURL, os.X_OK):
        skip("curl is not installed (.ci/packages installs it)")


def test_curl_reaches_an_allowed_host_through_the_proxy(s):
    need_bwrap()
    need_curl()
    h = Server()
    try:
        r = run(s, "allowed.test,127.0.0.1:%d" % h.port,
                [CURL, "-sS", "--max-time", "5", "http://allowed.test:%d/x" % h.port])
    finally:
        h.close()
    assert r.rc == 0 and r.out == "hi", r
    assert h.seen == ["/x"], h.seen
    conf = [x for x in r.report if x.get("type") == "confinement"][0]
    assert conf["network"]["mode"] == "allow" and "egress-proxy" in conf["network"]["enforced"], conf["network"]
    assert conf["network"]["allow"] == ["allowed.test", "127.0.0.1:%d" % h.port], conf["network"]
    recs = network_records(r)
    assert len(recs) == 1, recs
    assert recs[0]["verdict"] == "allowed" and recs[0]["host"] == "allowed.test" and recs[0]["address"] == "127.0.0.1"
    assert recs[0]["proto"] == "http" and recs[0]["resolvedBy"] == "hosts-file", recs


def test_python_urllib_reaches_an_allowed_host(s):
    need_bwrap()
    h = Server()
    try:
        r = run(s, "allowed.test,127.0.0.1:%d" % h.port,
                [PY, "-c", "import urllib.request,sys; sys.stdout.write(urllib.request.urlopen("
                           "'http://allowed.test:%d/py', timeout=5).read().decode())" % h.port])
    finally:
        h.close()
    assert r.rc == 0 and r.out == "hi", r
    assert h.seen == ["/py"], h.seen


def test_an_unlisted_host_is_a_403_with_a_record_and_reaches_nothing(s):
    need_bwrap()
    need_curl()
    h = Server()
    try:
        r = run(s, "allowed.test,127.0.0.1:%d" % h.port,
                [CURL, "-sS", "--max-time", "5", "-o", "/dev/null", "-w", "%{http_code}",
                 "http://other.test:%d/" % h.port])
    finally:
        h.close()
    assert r.rc == 0 and r.out == "403", r
    assert h.seen == [], h.seen
    recs = network_records(r)
    assert [(x["host"], x["verdict"], x["reason"]) for x in recs] == [("other.test", "refused", "not-listed")], recs


def test_a_name_resolving_to_loopback_is_refused_unless_the_address_is_listed(s):
    need_bwrap()
    need_curl()
    h = Server()
    try:
        r = run(s, "allowed.test", [CURL, "-sS", "--max-time", "5", "-o", "/dev/null", "-w", "%{http_code}",
                                    "http://allowed.test:%d/" % h.port])
    finally:
        h.close()
    assert r.rc == 0 and r.out == "403", r
    assert h.seen == [], h.seen
    recs = network_records(r)
    assert len(recs) == 1 and recs[0]["reason"] == "private-address", recs
    assert recs[0]["detail"] == "127.0.0.1 is loopback" and recs[0]["address"] == "127.0.0.1", recs


def test_going_direct_leads_nowhere(s):
    # curl --noproxy '*', a raw socket to the server's address, a UDP datagram: the namespace
    # has only its own lo and no route.
    need_bwrap()
    need_curl()
    h = Server()
    probe = r'''
import errno, socket, sys
port = int(sys.argv[1])
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
def udp():
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.sendto(b"x", ("192.0.2.1", 53))
attempt("loopback", tcp(("127.0.0.1", port)))
attempt("outside", tcp(("192.0.2.1", 80)))
attempt("udp", udp)
print(" ".join(out))
'''
    try:
        direct = run(s, "allowed.test,127.0.0.1:%d" % h.port,
                     [CURL, "-sS", "--max-time", "5", "--noproxy", "*", "http://127.0.0.1:%d/" % h.port])
        raw = run(s, "allowed.test,127.0.0.1:%d" % h.port, [PY, "-c", probe, str(h.port)])
    finally:
        h.close()
    assert direct.rc == 7, direct  # could not connect
    assert raw.rc == 0 and raw.out.split() == ["loopback:ECONNREFUSED", "outside:ENETUNREACH", "udp:ENETUNREACH"], raw
    assert h.seen == [], h.seen
    assert network_records(direct) == [] and network_records(raw) == []


def test_the_first_connection_after_start_succeeds(s):
    # The listener exists before the command's first instruction: no start-up race.
    need_bwrap()
    need_curl()
    h = Server()
    try:
        fails = []
        for i in range(20):
            r = run(s, "allowed.test,127.0.0.1:%d" % h.port,
                    [CURL, "-sS", "--max-time", "5", "http://allowed.test:%d/%d" % (h.port, i)])
            if r.rc != 0 or r.out != "hi":
                fails.append(r)
    finally:
        h.close()
    assert fails == [], fails[:1]
    assert len(h.seen) == 20, h.seen


def test_other_runners_refuse_the_allow_list(s):
    need_landlock()
    r = dsh(["--runner", "landlock", "--net", "allow=a.test", "--", "true"], s)
    assert r.rc == 125 and "--net allow= needs the bwrap runner" in r.err, r


if __name__ == "__main__":
    main()
