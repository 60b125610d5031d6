#!/usr/bin/env python3
"""The first byte of a connection through the allow-list proxy against a direct one (issue 19).

    first_byte.py serve PORTFILE              # a loopback HTTP server; writes its port, runs until killed
    first_byte.py direct PORT N               # N connections straight to 127.0.0.1:PORT
    first_byte.py proxied HOST PORT N         # N through $HTTP_PROXY (inside dsh-confine --net allow=)

Each sample is the time from before connect() to the first byte of the response, in
microseconds, one per line on stdout. Both clients send the same request and read the same
answer; the proxied one sends it in absolute form (`GET http://HOST:PORT/`), so the proxy
parses it, resolves HOST (the hosts hook), decides, connects out and relays. bench/run.sh runs
the two in alternating batches and bench/report.py compares the medians.
"""
import os
import socket
import sys
import threading
import time

ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi"


def serve(portfile):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen(128)
    with open(portfile + ".tmp", "w") as f:
        f.write(str(s.getsockname()[1]))
    os.rename(portfile + ".tmp", portfile)

    def one(c):
        with c:
            head = b""
            while b"\r\n\r\n" not in head:
                d = c.recv(4096)
                if not d:
                    return
                head += d
            c.sendall(ANSWER)

    while True:
        c, _ = s.accept()
        threading.Thread(target=one, args=(c,), daemon=True).start()


def sample(addr, request):
    t0 = time.perf_counter_ns()
    c = socket.create_connection(addr)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    c.sendall(request)
    first = c.recv(1)
    t1 = time.perf_counter_ns()
    if first != b"H":
        sys.exit("first_byte.py: no answer from %s:%d" % addr)
    while c.recv(65536):
        pass
    c.close()
    return (t1 - t0) / 1000


def main():
    a = sys.argv[1:]
    if a[:1] == ["serve"] and len(a) == 2:
        return serve(a[1])
    if a[:1] == ["direct"] and len(a) == 3:
        port, n = int(a[1]), int(a[2])
        req = b"GET / HTTP/1.1\r\nHost: allowed.test:%d\r\n\r\n" % port
        samples = [sample(("127.0.0.1", port), req) for _ in range(n)]
    elif a[:1] == ["proxied"] and len(a) == 4:
        host, port, n = a[1].encode(), int(a[2]), int(a[3])
        proxy = os.environ.get("HTTP_PROXY", "")
        if not proxy.startswith("http://127.0.0.1:"):
            sys.exit("first_byte.py: HTTP_PROXY is not dsh-confine's relay (run under --net allow=)")
        req = b"GET http://%s:%d/ HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (host, port, host, port)
        samples = [sample(("127.0.0.1", int(proxy.rsplit(":", 1)[1])), req) for _ in range(n)]
    else:
        sys.exit(__doc__)
    sys.stdout.write("".join("%.1f\n" % x for x in samples))


if __name__ == "__main__":
    main()
