// The proxy's I/O on this machine's loopback: a listener the test makes
// stands for the one the command's namespace hands out, an upstream server
// the test runs answers, and `allowed.test` is mapped by the hosts hook
// (never a real DNS query). One thread: the test pumps the loop.
#include <catch2/catch.hpp>

#include <algorithm>
#include <arpa/inet.h>
#include <atomic>
#include <chrono>
#include <thread>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../src/net_proxy_loop.hpp"

using namespace dsh;
using namespace dsh::net;

namespace {

int listen_on_loopback(uint16_t& port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    REQUIRE(fd >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd, 511) == 0);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
    return fd;
}

int connect_to(uint16_t port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);  // the backlog answers
    ::fcntl(fd, F_SETFL, O_NONBLOCK);
    return fd;
}

struct Rig {
    int server = -1;
    uint16_t proxy_port = 0, server_port = 0;
    std::vector<nlohmann::ordered_json> records;
    std::vector<std::string> seen;  // each request head the upstream server read
    std::string hosts;
    std::unique_ptr<ProxyLoop> loop;
    struct Up {
        int fd;
        std::string got;
        bool answered = false;
    };
    std::vector<Up> ups;

    explicit Rig(const std::string& allow, const char* deny = nullptr, Resolver dns = nullptr, size_t max_connections = 0) {
        server = listen_on_loopback(server_port);
        const int listener = listen_on_loopback(proxy_port);
        char tmpl[] = "/var/tmp/dsh-unit-hosts-XXXXXX";
        const int h = ::mkstemp(tmpl);
        REQUIRE(h >= 0);
        ::close(h);
        hosts = tmpl;
        std::ofstream(hosts) << "127.0.0.1 allowed.test\n127.0.0.1 other.test\n";
        ProxyOptions o;
        std::string list = allow;
        for (auto pos = list.find("PORT"); pos != std::string::npos; pos = list.find("PORT"))
            list.replace(pos, 4, std::to_string(server_port));
        REQUIRE(parse_rules(list, o.rules.allow));
        if (deny) REQUIRE(parse_rules(deny, o.rules.deny));
        o.hosts_file = hosts;
        o.dns = std::move(dns);
        o.max_connections = max_connections;
        o.record = [this](const nlohmann::ordered_json& j) { records.push_back(j); };
        loop = std::make_unique<ProxyLoop>(listener, std::move(o));
    }
    ~Rig() {
        loop.reset();
        for (auto& u : ups) ::close(u.fd);
        ::close(server);
        ::unlink(hosts.c_str());
    }

    // One round: the proxy's ready work, then the upstream server's.
    void pump() {
        pollfd p{loop->fd(), POLLIN, 0};
        ::poll(&p, 1, 5);
        loop->step();
        for (int fd; (fd = ::accept4(server, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0;)
            ups.push_back({fd, {}, false});
        for (auto& u : ups) {
            char buf[4096];
            ssize_t n;
            while ((n = ::read(u.fd, buf, sizeof buf)) > 0) u.got.append(buf, static_cast<size_t>(n));
            const size_t end = u.got.find("\r\n\r\n");
            if (!u.answered && end != std::string::npos) {
                seen.push_back(u.got.substr(0, end + 4));
                const std::string reply = "HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\nhello";
                (void)!::write(u.fd, reply.data(), reply.size());
                ::shutdown(u.fd, SHUT_WR);
                u.answered = true;
            }
        }
    }

    // Reads from `fd` while pumping, until `done` says so or the peer closes.
    std::string read(int fd, const std::function<bool(const std::string&)>& done = nullptr, int ms = 3000) {
        std::string out;
        const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
        while (std::chrono::steady_clock::now() < until) {
            pump();
            char buf[4096];
            const ssize_t n = ::read(fd, buf, sizeof buf);
            if (n > 0) out.append(buf, static_cast<size_t>(n));
            if (n == 0) break;
            if (done && done(out)) break;
        }
        return out;
    }
    void send(int fd, std::string_view s) { REQUIRE(::write(fd, s.data(), s.size()) == static_cast<ssize_t>(s.size())); }
    std::string port() const { return std::to_string(server_port); }
};

auto has(const char* s) {
    return [s](const std::string& got) { return got.find(s) != std::string::npos; };
}

}  // namespace

TEST_CASE("proxy loop: CONNECT to a listed name (and its listed loopback address) tunnels to the server") {
    Rig rig("allowed.test,127.0.0.1:PORT");
    const int c = connect_to(rig.proxy_port);
    rig.send(c, "CONNECT allowed.test:" + rig.port() + " HTTP/1.1\r\nHost: allowed.test\r\n\r\n");
    CHECK(rig.read(c, has("\r\n\r\n")) == "HTTP/1.1 200 Connection established\r\n\r\n");
    rig.send(c, "GET /through HTTP/1.0\r\n\r\n");
    CHECK_THAT(rig.read(c), Catch::EndsWith("hello"));
    ::close(c);
    REQUIRE(rig.records.size() == 1);
    CHECK(nlohmann::json(rig.records[0]) == nlohmann::json{{"type", "network"}, {"proto", "connect"}, {"host", "allowed.test"},
                                           {"port", rig.server_port}, {"address", "127.0.0.1"}, {"verdict", "allowed"},
                                           {"reason", "listed"}, {"rule", "allowed.test"}, {"resolvedBy", "hosts-file"}, {"version", 1}});
    REQUIRE(rig.seen.size() == 1);
    CHECK(rig.seen[0] == "GET /through HTTP/1.0\r\n\r\n");
    for (int i = 0; i < 20 && rig.loop->connections(); ++i) rig.pump();
    CHECK(rig.loop->connections() == 0);  // nothing left open
}

TEST_CASE("proxy loop: an absolute URI is forwarded once, and what follows it on the connection goes nowhere") {
    Rig rig("allowed.test,127.0.0.1:PORT");
    const int c = connect_to(rig.proxy_port);
    // The relayed CONNECT: an allowed request, then a CONNECT to
    // another host, in one write.
    rig.send(c, "GET http://allowed.test:" + rig.port() + "/x HTTP/1.1\r\nHost: evil.test\r\n\r\n"
                "CONNECT other.test:" + rig.port() + " HTTP/1.1\r\n\r\n");
    const std::string got = rig.read(c);
    CHECK_THAT(got, Catch::StartsWith("HTTP/1.0 200 OK") && Catch::EndsWith("hello"));
    ::close(c);
    REQUIRE(rig.seen.size() == 1);
    CHECK(rig.seen[0] == "GET /x HTTP/1.1\r\nHost: allowed.test:" + rig.port() + "\r\nConnection: close\r\n\r\n");
    CHECK(rig.ups.size() == 1);  // one upstream connection, and the CONNECT never reached it
    CHECK(rig.ups[0].got == rig.seen[0]);
    CHECK(rig.records.size() == 1);
}

TEST_CASE("proxy loop: refusals answer 403 with the reason, and a network record") {
    Rig rig("allowed.test");  // 127.0.0.1 not listed
    int c = connect_to(rig.proxy_port);
    rig.send(c, "CONNECT evil.test:" + rig.port() + " HTTP/1.1\r\n\r\n");
    std::string got = rig.read(c);
    CHECK_THAT(got, Catch::StartsWith("HTTP/1.1 403 Forbidden\r\n"));
    CHECK_THAT(got, Catch::EndsWith("dsh-confine: evil.test:" + rig.port() + " is refused by the allow-list (not-listed)\n"));
    ::close(c);

    c = connect_to(rig.proxy_port);
    rig.send(c, "CONNECT allowed.test:" + rig.port() + " HTTP/1.1\r\n\r\n");
    got = rig.read(c);
    CHECK_THAT(got, Catch::Contains("(private-address: 127.0.0.1 is loopback)"));
    ::close(c);

    c = connect_to(rig.proxy_port);
    rig.send(c, "GET /origin-form HTTP/1.1\r\n\r\n");
    CHECK_THAT(rig.read(c), Catch::StartsWith("HTTP/1.1 400 Bad Request"));
    ::close(c);

    REQUIRE(rig.records.size() == 3);
    CHECK(rig.records[0]["reason"] == "not-listed");
    CHECK(rig.records[1]["reason"] == "private-address");
    CHECK(rig.records[1]["address"] == "127.0.0.1");
    CHECK(rig.records[2]["reason"] == "bad-request");
    CHECK(rig.seen.empty());
    CHECK(rig.ups.empty());
}

TEST_CASE("proxy loop: SOCKS5 with a name tunnels when listed, answers 2 when not") {
    Rig rig("allowed.test,127.0.0.1:PORT");
    const uint16_t p = rig.server_port;
    int c = connect_to(rig.proxy_port);
    rig.send(c, std::string("\x05\x01\x00", 3));
    CHECK(rig.read(c, [](const std::string& s) { return s.size() >= 2; }) == std::string("\x05\x00", 2));
    rig.send(c, std::string("\x05\x01\x00\x03\x0c", 5) + "allowed.test" + std::string{char(p >> 8), char(p & 0xff)});
    CHECK(rig.read(c, [](const std::string& s) { return s.size() >= 10; }) == socks5_reply(0));
    rig.send(c, "GET / HTTP/1.0\r\n\r\n");
    CHECK_THAT(rig.read(c), Catch::EndsWith("hello"));
    ::close(c);

    c = connect_to(rig.proxy_port);
    rig.send(c, std::string("\x05\x01\x00", 3) + std::string("\x05\x01\x00\x03\x09", 5) + "evil.test" +
                    std::string{char(p >> 8), char(p & 0xff)});
    CHECK(rig.read(c) == std::string("\x05\x00", 2) + socks5_reply(2));
    ::close(c);
    REQUIRE(rig.records.size() == 2);
    CHECK(rig.records[0]["proto"] == "socks5");
    CHECK(rig.records[1]["reason"] == "not-listed");
}

TEST_CASE("proxy loop: an outbound connect that fails is a 502 and a failed record, nothing hangs") {
    uint16_t closed = 0;
    ::close(listen_on_loopback(closed));  // a port nobody listens on
    Rig rig("127.0.0.1:" + std::to_string(closed));
    const int c = connect_to(rig.proxy_port);
    rig.send(c, "CONNECT 127.0.0.1:" + std::to_string(closed) + " HTTP/1.1\r\n\r\n");
    const std::string got = rig.read(c);
    CHECK_THAT(got, Catch::StartsWith("HTTP/1.1 502 Bad Gateway") && Catch::Contains("Connection refused"));
    ::close(c);
    REQUIRE(rig.records.size() == 1);
    CHECK(rig.records[0]["verdict"] == "failed");
    CHECK(rig.records[0]["reason"] == "connect-failed");
    CHECK(rig.records[0]["resolvedBy"] == "literal");
    CHECK(rig.loop->connections() == 0);
}

TEST_CASE("proxy loop: 200 connections at once are each served") {
    Rig rig("allowed.test,127.0.0.1:PORT");
    std::vector<int> cs;
    for (int i = 0; i < 200; ++i) {
        cs.push_back(connect_to(rig.proxy_port));
        rig.send(cs.back(), "GET http://allowed.test:" + rig.port() + "/" + std::to_string(i) + " HTTP/1.1\r\n\r\n");
    }
    int served = 0;
    for (int fd : cs) {
        if (rig.read(fd).find("hello") != std::string::npos) ++served;
        ::close(fd);
    }
    CHECK(served == 200);
    CHECK(rig.records.size() == 200);
}

TEST_CASE("dns answers: A and AAAA records are read, compressed names followed, malformed input gives nothing") {
    // A response for a.test: one question, one CNAME, one A, one AAAA.
    const std::string q = std::string("\x01" "a" "\x04" "test" "\x00", 8);
    std::string m = std::string("\x12\x34\x81\x80\x00\x01\x00\x03\x00\x00\x00\x00", 12) + q + std::string("\x00\x01\x00\x01", 4);
    m += std::string("\xc0\x0c\x00\x05\x00\x01\x00\x00\x00\x3c\x00\x02\xc0\x0c", 14);
    m += std::string("\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x3c\x00\x04\x5d\xb8\xd8\x22", 16);
    m += std::string("\xc0\x0c\x00\x1c\x00\x01\x00\x00\x00\x3c\x00\x10", 12) + std::string(15, '\0') + "\x01";
    auto v4 = dns_answers(m, false);
    REQUIRE(v4.size() == 1);
    CHECK(to_string(v4[0]) == "93.184.216.34");
    auto v6 = dns_answers(m, true);
    REQUIRE(v6.size() == 1);
    CHECK(to_string(v6[0]) == "::1");
    CHECK(dns_answers(m.substr(0, 30), false).empty());
    CHECK(dns_answers("", false).empty());
}

TEST_CASE("proxy loop: a name DNS is slow to answer holds up no other connection") {
    // The resolver hook stands for DNS (the names are in no hosts file): 2 s
    // for slow.test, at once for fast.test. The loop must go on meanwhile.
    std::atomic<int> slow_asked{0};
    Rig rig("slow.test,fast.test,127.0.0.1:PORT", nullptr, [&slow_asked](const std::string& name) {
        if (name == "slow.test") {
            ++slow_asked;
            std::this_thread::sleep_for(std::chrono::seconds(2));
        }
        Resolved r;
        r.by = "dns";
        r.addresses.push_back(*parse_address("127.0.0.1"));
        return r;
    });
    const auto start = std::chrono::steady_clock::now();
    const int slow = connect_to(rig.proxy_port);
    rig.send(slow, "CONNECT slow.test:" + rig.port() + " HTTP/1.1\r\n\r\n");
    // The slow name is with a resolver thread before the second client asks.
    for (int i = 0; i < 200 && slow_asked == 0; ++i) rig.pump();
    REQUIRE(slow_asked == 1);
    const int fast = connect_to(rig.proxy_port);
    rig.send(fast, "CONNECT fast.test:" + rig.port() + " HTTP/1.1\r\n\r\n");
    CHECK(rig.read(fast, has("\r\n\r\n"), 1500) == "HTTP/1.1 200 Connection established\r\n\r\n");
    rig.send(fast, "GET /fast HTTP/1.0\r\n\r\n");
    CHECK(rig.read(fast, has("hello"), 1500).find("hello") != std::string::npos);
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::milliseconds(1800));
    REQUIRE(rig.records.size() == 1);
    CHECK(rig.records[0]["host"] == "fast.test");
    CHECK(rig.records[0]["resolvedBy"] == "dns");
    CHECK(rig.records[0]["verdict"] == "allowed");
    // The slow one is answered when its name is, and decided the same way.
    CHECK(rig.read(slow, has("\r\n\r\n"), 4000) == "HTTP/1.1 200 Connection established\r\n\r\n");
    CHECK(std::chrono::steady_clock::now() - start >= std::chrono::seconds(2));
    REQUIRE(rig.records.size() == 2);
    CHECK(rig.records[1]["host"] == "slow.test");
    CHECK(rig.records[1]["verdict"] == "allowed");
    ::close(slow);
    ::close(fast);
}

TEST_CASE("proxy loop: the loop ends without waiting for a resolver thread still asking") {
    std::atomic<bool> asked{false};
    Rig rig("slow.test", nullptr, [&asked](const std::string&) {
        asked = true;
        std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        Resolved r;
        r.by = "dns";
        r.error = "the name has no address (DNS)";
        return r;
    });
    const int c = connect_to(rig.proxy_port);
    rig.send(c, "CONNECT slow.test:443 HTTP/1.1\r\n\r\n");
    for (int i = 0; i < 200 && !asked; ++i) rig.pump();
    REQUIRE(asked);
    CHECK(rig.loop->connections() == 1);
    const auto t0 = std::chrono::steady_clock::now();
    rig.loop.reset();  // the thread sleeps on: the end does not wait for it, and closes the client
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(250));
    char b;
    CHECK(::read(c, &b, 1) == 0);
    CHECK(rig.records.empty());  // nothing was decided for it
    ::close(c);
}

// Issue 38: a command that opens connections to the proxy and leaves them
// idle cannot take every descriptor, nor make the loop spin.
TEST_CASE("proxy loop: at the bound the longest idle connection is shed, and a new one is served") {
    Rig rig("allowed.test,127.0.0.1:PORT", nullptr, nullptr, 8);
    std::vector<int> idle;
    for (int i = 0; i < 20; ++i) idle.push_back(connect_to(rig.proxy_port));
    for (int i = 0; i < 20 && rig.loop->connections() < 8; ++i) rig.pump();
    rig.pump();
    CHECK(rig.loop->connections() == 8);
    const int c = connect_to(rig.proxy_port);
    rig.send(c, "CONNECT allowed.test:" + rig.port() + " HTTP/1.1\r\n\r\n");
    CHECK(rig.read(c, has("\r\n\r\n")).rfind("HTTP/1.1 200", 0) == 0);
    CHECK(rig.loop->connections() == 8);
    char b;
    CHECK(::read(idle.front(), &b, 1) == 0);  // the oldest was shed: an end of file
    CHECK(::read(idle.back(), &b, 1) == -1);  // the newest idle one is still open (EAGAIN)
    CHECK(errno == EAGAIN);
    for (int fd : idle) ::close(fd);
    ::close(c);
}

namespace {
// Fills every free descriptor below the highest open one and lowers the
// open-file soft limit to just above it, so that the next open fails with
// EMFILE and closing any open descriptor frees exactly one; undone when it goes.
struct NoFreeDescriptor {
    rlimit saved{};
    std::vector<int> fillers;
    NoFreeDescriptor() {
        REQUIRE(::getrlimit(RLIMIT_NOFILE, &saved) == 0);
        int highest = 0;
        for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd"))
            highest = std::max(highest, std::stoi(e.path().filename().string()));
        for (int fd; (fd = ::dup(0)) >= 0;) {
            if (fd > highest) {
                ::close(fd);
                break;
            }
            fillers.push_back(fd);
        }
        const rlimit tight{static_cast<rlim_t>(highest + 1), saved.rlim_max};
        REQUIRE(::setrlimit(RLIMIT_NOFILE, &tight) == 0);
    }
    ~NoFreeDescriptor() {
        ::setrlimit(RLIMIT_NOFILE, &saved);
        for (int fd : fillers) ::close(fd);
    }
};
}  // namespace

TEST_CASE("proxy loop: out of descriptors, an idle connection is shed to make room") {
    Rig rig("allowed.test,127.0.0.1:PORT");
    const int old = connect_to(rig.proxy_port);
    for (int i = 0; i < 100 && rig.loop->connections() < 1; ++i) rig.pump();
    REQUIRE(rig.loop->connections() == 1);
    const int fresh = connect_to(rig.proxy_port);  // waits in the backlog
    {
        NoFreeDescriptor none;
        rig.loop->step();
    }
    CHECK(rig.loop->connections() == 1);
    char b;
    CHECK(::read(old, &b, 1) == 0);
    rig.send(fresh, "CONNECT allowed.test:" + rig.port() + " HTTP/1.1\r\n\r\n");
    CHECK(rig.read(fresh, has("\r\n\r\n")).rfind("HTTP/1.1 200", 0) == 0);
    ::close(old);
    ::close(fresh);
}

TEST_CASE("proxy loop: out of descriptors with nothing to shed, the listener rests instead of spinning") {
    Rig rig("allowed.test,127.0.0.1:PORT");
    const int c = connect_to(rig.proxy_port);  // waits in the backlog
    {
        NoFreeDescriptor none;
        rig.loop->step();
        // A listener left readable would make the loop's fd readable again at once, for ever.
        pollfd p{rig.loop->fd(), POLLIN, 0};
        CHECK(::poll(&p, 1, 0) == 0);
        CHECK(rig.loop->connections() == 0);
    }
    // After the rest (kPauseMs) the timer wakes the listener, and the waiting client is served.
    rig.send(c, "CONNECT allowed.test:" + rig.port() + " HTTP/1.1\r\n\r\n");
    CHECK(rig.read(c, has("\r\n\r\n")).rfind("HTTP/1.1 200", 0) == 0);
    ::close(c);
}
