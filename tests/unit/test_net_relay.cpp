// The allow-list's way out (issue 19), kernel-enforced: a listener made in a
// fresh network namespace and handed out over a socketpair is reachable from
// inside that namespace only, and the holder outside accepts on it. fd_pass, the
// one way a descriptor crosses (the listener, the bwrap stage's pidfd), too.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <string>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../src/errors.hpp"
#include "../../src/linux/fd_pass.hpp"
#include "../../src/linux/net_relay.hpp"
#include "../../src/linux/netns.hpp"

using namespace dsh;

namespace {
int connect_v4(uint32_t host_order_addr, uint16_t port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(host_order_addr);
    a.sin_port = htons(port);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        const int e = errno;
        ::close(fd);
        errno = e;
        return -1;
    }
    return fd;
}
}  // namespace

TEST_CASE("relay: the listener made in the command's namespace is reached from inside only, and accepted outside") {
    const netns::Plan plan = netns::make_plan();
    if (!netns::check(plan).empty()) {
        WARN("no network namespace for this caller here: " << netns::check(plan));
        return;
    }
    int sv[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::close(sv[0]);
        Fault f{};
        if (!netns::enter(plan, f)) ::_exit(10);
        uint16_t port = 0;
        int err = 0;
        if (!net::hand_out_listener(sv[1], port, err)) ::_exit(11);
        // Inside: the handed-out listener answers (the backlog holds it until accepted outside)...
        const int c = connect_v4(INADDR_LOOPBACK, port);
        if (c < 0 || ::write(c, "x", 1) != 1) ::_exit(12);
        // ...and nothing else leads out: no route.
        if (connect_v4(0xC0000201 /* 192.0.2.1 */, 80) >= 0 || errno != ENETUNREACH) ::_exit(13);
        ::close(c);
        ::_exit(0);
    }
    ::close(sv[1]);
    int listener = -1;
    uint16_t port = 0;
    REQUIRE(net::receive_listener(sv[0], 5000, listener, port));
    CHECK(port != 0);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);

    const int in = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    REQUIRE(in >= 0);
    char b = 0;
    CHECK(::read(in, &b, 1) == 1);
    CHECK(b == 'x');
    ::close(in);

    // From the host's namespace the same address and port is not that listener.
    const int outside = connect_v4(INADDR_LOOPBACK, port);
    if (outside >= 0) ::close(outside);  // someone else's port here, by chance: still not ours
    ::fcntl(listener, F_SETFL, O_NONBLOCK);
    CHECK(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC) < 0);
    ::close(listener);
    ::close(sv[0]);
}

TEST_CASE("relay: a channel closed without a listener, or carrying something else, gives nothing") {
    int sv[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
    ::close(sv[1]);
    int fd = 0;
    uint16_t port = 0;
    CHECK_FALSE(net::receive_listener(sv[0], 1000, fd, port));
    CHECK(fd == -1);
    ::close(sv[0]);

    REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
    CHECK(::write(sv[1], "ab", 2) == 2);  // a port, but no socket
    CHECK_FALSE(net::receive_listener(sv[0], 1000, fd, port));
    ::close(sv[0]);
    ::close(sv[1]);

    REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
    CHECK_FALSE(net::receive_listener(sv[0], 50, fd, port));  // nothing sent: the wait ends
    ::close(sv[0]);
    ::close(sv[1]);
}

TEST_CASE("relay: the proxy variables point every client at the relay and leave loopback direct") {
    const auto env = net::proxy_environment(41234, "localhost,127.0.0.1,::1");
    auto get = [&](const char* n) {
        for (const auto& [k, v] : env)
            if (k == n) return v;
        return std::string();
    };
    for (const char* n : {"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy",
                          "npm_config_proxy", "npm_config_https_proxy", "YARN_HTTP_PROXY", "YARN_HTTPS_PROXY", "PIP_PROXY"})
        CHECK(get(n) == "http://127.0.0.1:41234");
    CHECK(get("NO_PROXY") == "localhost,127.0.0.1,::1");
    CHECK(get("no_proxy") == "localhost,127.0.0.1,::1");
}

TEST_CASE("fd_pass: one message carries one descriptor, close-on-exec; more than one is refused whole") {
    int sv[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
    int p[2];
    REQUIRE(::pipe(p) == 0);
    CHECK(fdpass::send(sv[1], "hi", 2, p[1]) == 2);
    char buf[8] = {};
    int got = -2;
    CHECK(fdpass::receive(sv[0], buf, sizeof buf, got) == 2);
    CHECK(std::string(buf, 2) == "hi");
    REQUIRE(got >= 0);
    CHECK((::fcntl(got, F_GETFD) & FD_CLOEXEC) != 0);
    // The same pipe: what is written through the received end comes out of p[0].
    CHECK(::write(got, "z", 1) == 1);
    char c = 0;
    CHECK(::read(p[0], &c, 1) == 1);
    CHECK(c == 'z');
    ::close(got);

    // No descriptor: the words alone.
    CHECK(fdpass::send(sv[1], "w", 1, -1) == 1);
    CHECK(fdpass::receive(sv[0], buf, sizeof buf, got) == 1);
    CHECK(got == -1);

    // Two descriptors in one message (not ours to send): none is kept, none leaks.
    {
        int two[2] = {p[0], p[1]};
        alignas(cmsghdr) char control[CMSG_SPACE(sizeof two)] = {};
        iovec iov{const_cast<char*>("x"), 1};
        msghdr m{};
        m.msg_iov = &iov;
        m.msg_iovlen = 1;
        m.msg_control = control;
        m.msg_controllen = sizeof control;
        cmsghdr* h = CMSG_FIRSTHDR(&m);
        h->cmsg_level = SOL_SOCKET;
        h->cmsg_type = SCM_RIGHTS;
        h->cmsg_len = CMSG_LEN(sizeof two);
        std::memcpy(CMSG_DATA(h), two, sizeof two);
        REQUIRE(::sendmsg(sv[1], &m, 0) == 1);
    }
    const int next = ::dup(0);  // the lowest free descriptor before the receive
    ::close(next);
    CHECK(fdpass::receive(sv[0], buf, sizeof buf, got) == 1);
    CHECK(got == -1);
    const int after = ::dup(0);  // still the lowest free one: both received descriptors closed
    CHECK(after == next);
    ::close(after);

    // The sender's pid: none unless the receiving end asked for credentials;
    // then the kernel's, with or without a descriptor beside it.
    pid_t sender = -1;
    CHECK(fdpass::send(sv[1], "c", 1, -1) == 1);
    CHECK(fdpass::receive(sv[0], buf, sizeof buf, got, &sender) == 1);
    CHECK(sender == 0);
    const int on = 1;
    REQUIRE(::setsockopt(sv[0], SOL_SOCKET, SO_PASSCRED, &on, sizeof on) == 0);
    CHECK(fdpass::send(sv[1], "c", 1, -1) == 1);
    CHECK(fdpass::receive(sv[0], buf, sizeof buf, got, &sender) == 1);
    CHECK(sender == ::getpid());
    CHECK(got == -1);
    sender = -1;
    CHECK(fdpass::send(sv[1], "d", 1, p[1]) == 1);
    CHECK(fdpass::receive(sv[0], buf, sizeof buf, got, &sender) == 1);
    CHECK(sender == ::getpid());
    REQUIRE(got >= 0);
    ::close(got);
    for (int f : {sv[0], sv[1], p[0], p[1]}) ::close(f);
}
