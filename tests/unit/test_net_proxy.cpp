#include <catch2/catch.hpp>

#include <map>

#include "../../src/net_proxy.hpp"

using namespace dsh;
using namespace dsh::net;

namespace {

Rules rules(const char* allow, const char* deny = nullptr) {
    Rules r;
    REQUIRE(parse_rules(allow, r.allow));
    if (deny) REQUIRE(parse_rules(deny, r.deny));
    return r;
}

Address ip(const char* s) {
    auto a = parse_address(s);
    REQUIRE(a);
    return *a;
}

// A resolver from a table, counting the names it was asked: what the proxy
// looks up is part of the promise (an unlisted name is never resolved).
struct FakeDns {
    std::map<std::string, std::vector<std::string>> names;
    std::vector<std::string> asked;
    Resolver fn() {
        return [this](const std::string& n) {
            asked.push_back(n);
            Resolved r;
            r.by = "hosts-file";
            auto it = names.find(n);
            if (it == names.end()) {
                r.error = "no such name";
                return r;
            }
            for (const auto& a : it->second) r.addresses.push_back(*parse_address(a));
            return r;
        };
    }
};

Target target(const char* authority) {
    auto t = parse_authority(authority, 0);
    REQUIRE(t);
    return *t;
}

HttpHead head(std::string_view text) {
    HttpHead h;
    auto p = parse_http_head(text, h);
    INFO(h.error);
    REQUIRE(p == Parse::Done);
    return h;
}

}  // namespace

TEST_CASE("proxy: CONNECT names its destination as HOST:PORT") {
    const std::string text = "CONNECT Registry.npmjs.org:443 HTTP/1.1\r\nHost: evil.test:443\r\n\r\n";
    auto h = head(text + "tunnel bytes");
    CHECK(h.proto == Proto::Connect);
    CHECK(h.target.host == "registry.npmjs.org");  // the request target, never the Host header
    CHECK(h.target.port == 443);
    CHECK_FALSE(h.target.literal);
    CHECK(h.head_bytes == text.size());  // the tunnel's first bytes are not the head's

    auto v6 = head("CONNECT [::1]:8080 HTTP/1.1\r\n\r\n");
    REQUIRE(v6.target.literal);
    CHECK(v6.target.host == "::1");
    CHECK(head("CONNECT 10.0.0.1:22 HTTP/1.0\r\n\r\n").target.literal == ip("10.0.0.1"));

    HttpHead bad;
    for (const char* text : {"CONNECT example.org HTTP/1.1\r\n\r\n", "CONNECT example.org:0 HTTP/1.1\r\n\r\n",
                             "CONNECT ::1:443 HTTP/1.1\r\n\r\n", "CONNECT 1.2.3.256:443 HTTP/1.1\r\n\r\n",
                             "CONNECT exa mple.org:443 HTTP/1.1\r\n\r\n", "CONNECT a..b:443 HTTP/1.1\r\n\r\n"}) {
        INFO(text);
        CHECK(parse_http_head(text, bad) == Parse::Bad);
        CHECK(bad.status == 400);
    }
}

TEST_CASE("proxy: an absolute URI is forwarded in origin form, Host rewritten, hop-by-hop headers dropped") {
    auto h = head("GET http://Allowed.test:8080/a/b?c=d#frag HTTP/1.1\r\nHost: evil.test\r\nUser-Agent: t\r\n"
                  "Proxy-Connection: keep-alive\r\nProxy-Authorization: Basic x\r\nConnection: keep-alive, X-Secret\r\n"
                  "X-Secret: 1\r\nAccept: */*\r\n\r\n");
    CHECK(h.proto == Proto::Http);
    CHECK(h.target.host == "allowed.test");
    CHECK(h.target.port == 8080);
    CHECK(h.path == "/a/b?c=d");
    CHECK(upstream_head(h) ==
          "GET /a/b?c=d HTTP/1.1\r\nHost: allowed.test:8080\r\nUser-Agent: t\r\nAccept: */*\r\nConnection: close\r\n\r\n");
    auto bare = head("GET http://allowed.test HTTP/1.1\r\n\r\n");
    CHECK(bare.target.port == 80);
    CHECK(upstream_head(bare) == "GET / HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n");
    auto q = head("GET http://[::1]:81?x HTTP/1.1\r\n\r\n");
    CHECK(upstream_head(q) == "GET /?x HTTP/1.1\r\nHost: [::1]:81\r\nConnection: close\r\n\r\n");
}

TEST_CASE("proxy: what is not a proxy request, or is too large, is refused with a status") {
    struct Case {
        std::string text;
        int status;
        const char* why;
    };
    const Case cases[] = {
        {"GET / HTTP/1.1\r\nHost: a\r\n\r\n", 400, "names its destination"},
        {"GET https://a.test/ HTTP/1.1\r\n\r\n", 400, "https:// is proxied with CONNECT"},
        {"GET ftp://a.test/ HTTP/1.1\r\n\r\n", 400, "names its destination"},
        {"GET http://user:pw@a.test/ HTTP/1.1\r\n\r\n", 400, "user information"},
        {"GET http://a.test/ HTTP/2.0\r\n\r\n", 505, "only HTTP/1.0"},
        {"GET  http://a.test/ HTTP/1.1\r\n\r\n", 400, "request line"},
        {"GET http://a.test/ HTTP/1.1\r\nBad Header: x\r\n\r\n", 400, "header line"},
        {"GET http://a.test/ HTTP/1.1\r\n folded\r\n\r\n", 400, "header line"},
        {"POST http://a.test/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400, "two different"},
        {"POST http://a.test/ HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400, "Content-Length"},
        {"POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n", 400, "both"},
        {"POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", 501, "other than chunked"},
        {"GET http://a.test/ HTTP/1.1\r\n" + std::string(kMaxHeadBytes, 'x'), 431, "16 KiB"},
    };
    for (const auto& c : cases) {
        INFO(c.text.substr(0, 80));
        HttpHead h;
        REQUIRE(parse_http_head(c.text, h) == Parse::Bad);
        CHECK(h.status == c.status);
        CHECK_THAT(h.error, Catch::Contains(c.why));
    }
    std::string many = "GET http://a.test/ HTTP/1.1\r\n";
    for (int i = 0; i < 101; ++i) many += "X: y\r\n";
    HttpHead h;
    CHECK(parse_http_head(many + "\r\n", h) == Parse::Bad);
    CHECK(h.status == 431);
    CHECK(parse_http_head("GET http://a.test/ HTTP/1.1\r\nHost: a", h) == Parse::NeedMore);
    CHECK_THAT(http_response(403, "allowed.test is not listed"),
               Catch::StartsWith("HTTP/1.1 403 Forbidden\r\n") &&
                   Catch::EndsWith("Connection: close\r\n\r\ndsh-confine: allowed.test is not listed\n"));
}

TEST_CASE("proxy: the body scanner finds where a request ends, so the next one is parsed and checked") {
    // The "relayed CONNECT": an allowed request, then another on the
    // same connection. The body ends where its framing says; what follows is
    // a request of its own, decided on its own.
    FakeDns dns;
    dns.names["allowed.test"] = {"93.184.216.34"};
    const auto r = rules("allowed.test");
    const std::string stream = "POST http://allowed.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                               "5;ext=1\r\nhello\r\n0\r\nX-Trailer: t\r\n\r\n"
                               "CONNECT evil.test:443 HTTP/1.1\r\nHost: allowed.test\r\n\r\n";
    auto first = head(stream);
    CHECK(decide(r, first.target, dns.fn(), {}).allowed);
    BodyScanner body(first);
    auto used = body.consume(std::string_view(stream).substr(first.head_bytes));
    REQUIRE(used);
    CHECK(body.done());
    auto second = head(std::string_view(stream).substr(first.head_bytes + *used));
    CHECK(second.proto == Proto::Connect);
    CHECK(second.target.host == "evil.test");
    const auto v = decide(r, second.target, dns.fn(), {});
    CHECK_FALSE(v.allowed);
    CHECK(v.reason == "not-listed");

    // A length, fed in pieces.
    auto len = head("POST http://a.test/ HTTP/1.1\r\nContent-Length: 5\r\n\r\n");
    BodyScanner b(len);
    CHECK(b.consume("he") == 2u);
    CHECK_FALSE(b.done());
    CHECK(b.consume("lloGET") == 3u);
    CHECK(b.done());
    // No body at all.
    BodyScanner none(head("GET http://a.test/ HTTP/1.1\r\n\r\n"));
    CHECK(none.done());
    CHECK(none.consume("GET") == 0u);
    // Chunked, byte by byte.
    auto ch = head("POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n");
    BodyScanner c(ch);
    const std::string chunks = "A\r\n0123456789\r\n0\r\n\r\n";
    size_t total = 0;
    for (char x : chunks) total += c.consume(std::string_view(&x, 1)).value();
    CHECK(total == chunks.size());
    CHECK(c.done());
    // Bad framing closes the connection.
    BodyScanner badc(ch);
    CHECK_FALSE(badc.consume("zz\r\n"));
    BodyScanner nolf(ch);
    CHECK_FALSE(nolf.consume("1\r\nab\r\n"));
}

TEST_CASE("proxy: SOCKS5 greeting and CONNECT request") {
    size_t used = 0;
    bool no_auth = false;
    CHECK(parse_socks5_greeting(std::string("\x05\x02\x02\x00", 4), used, no_auth) == Parse::Done);
    CHECK(used == 4);
    CHECK(no_auth);
    CHECK(parse_socks5_greeting(std::string("\x05\x01\x02", 3), used, no_auth) == Parse::Done);
    CHECK_FALSE(no_auth);
    CHECK(parse_socks5_greeting(std::string("\x05\x02\x00", 3), used, no_auth) == Parse::NeedMore);
    CHECK(parse_socks5_greeting(std::string("\x04\x01\x00", 3), used, no_auth) == Parse::Bad);

    Socks5Request rq;
    const std::string name = std::string("\x05\x01\x00\x03\x0c", 5) + "Allowed.TEST" + std::string("\x01\xbb", 2);
    REQUIRE(parse_socks5_request(name, rq) == Parse::Done);
    CHECK(rq.target.host == "allowed.test");
    CHECK(rq.target.port == 443);
    CHECK(rq.bytes == name.size());
    CHECK(parse_socks5_request(name.substr(0, 10), rq) == Parse::NeedMore);

    const std::string v4("\x05\x01\x00\x01\x7f\x00\x00\x01\x00\x50", 10);
    REQUIRE(parse_socks5_request(v4, rq) == Parse::Done);
    CHECK(rq.target.literal == ip("127.0.0.1"));
    CHECK(rq.target.port == 80);
    // A name that is an address literal is one.
    const std::string lit = std::string("\x05\x01\x00\x03\x09", 5) + "127.0.0.1" + std::string("\x00\x50", 2);
    REQUIRE(parse_socks5_request(lit, rq) == Parse::Done);
    CHECK(rq.target.literal == ip("127.0.0.1"));

    // BIND and UDP ASSOCIATE: command not supported; an unknown address type: 8.
    CHECK(parse_socks5_request(std::string("\x05\x02\x00\x01\x7f\x00\x00\x01\x00\x50", 10), rq) == Parse::Bad);
    CHECK(rq.reply == 7);
    CHECK(parse_socks5_request(std::string("\x05\x03\x00\x01\x7f\x00\x00\x01\x00\x50", 10), rq) == Parse::Bad);
    CHECK(rq.reply == 7);
    CHECK(parse_socks5_request(std::string("\x05\x01\x00\x05\x00\x00", 6), rq) == Parse::Bad);
    CHECK(rq.reply == 8);
    CHECK(socks5_reply(2) == std::string("\x05\x02\x00\x01\x00\x00\x00\x00\x00\x00", 10));
}

TEST_CASE("proxy: addresses are classed, mapped and NAT64 forms by their IPv4") {
    const std::vector<Address> own = {ip("192.0.2.7"), ip("127.0.0.1"), ip("10.0.0.9")};
    struct Case {
        const char* a;
        AddressClass c;
    };
    for (auto [a, c] : {Case{"93.184.216.34", AddressClass::Public}, Case{"127.0.0.1", AddressClass::Loopback}, Case{"10.0.0.9", AddressClass::Private},
                        Case{"127.1.2.3", AddressClass::Loopback}, Case{"::1", AddressClass::Loopback},
                        Case{"::ffff:127.0.0.1", AddressClass::Loopback}, Case{"64:ff9b::7f00:1", AddressClass::Loopback},
                        Case{"0.0.0.0", AddressClass::Loopback} /* connect() reaches 127.0.0.1 */, Case{"::", AddressClass::Loopback},
                        Case{"0.1.2.3", AddressClass::Unspecified},
                        Case{"10.1.2.3", AddressClass::Private}, Case{"172.16.0.1", AddressClass::Private},
                        Case{"172.32.0.1", AddressClass::Public}, Case{"192.168.1.1", AddressClass::Private},
                        Case{"100.64.0.1", AddressClass::Private}, Case{"fd12::1", AddressClass::Private},
                        Case{"169.254.169.254", AddressClass::Metadata}, Case{"::ffff:169.254.169.254", AddressClass::Metadata},
                        Case{"fd00:ec2::254", AddressClass::Metadata}, Case{"169.254.1.1", AddressClass::LinkLocal},
                        Case{"fe80::1", AddressClass::LinkLocal}, Case{"224.0.0.1", AddressClass::Multicast},
                        Case{"ff02::1", AddressClass::Multicast}, Case{"255.255.255.255", AddressClass::Reserved},
                        Case{"::7f00:1", AddressClass::Loopback}, Case{"2002:7f00:1::", AddressClass::Loopback},
                        Case{"::808:808", AddressClass::Reserved}, Case{"2002:808:808::", AddressClass::Reserved},
                        Case{"64:ff9b::808:808", AddressClass::Public}, Case{"64:ff9b:1::808:808", AddressClass::Loopback} /* its /48 layout reads 0.0.0.0 */,
                        Case{"2001:0:4136:e378:8000:63bf:80ff:fffe", AddressClass::Loopback},
                        Case{"2001:db8::5efe:a9fe:a9fe", AddressClass::Metadata}, Case{"64:ff9b::c000:207", AddressClass::HostOwn},
                        Case{"192.0.2.7", AddressClass::HostOwn}, Case{"::ffff:192.0.2.7", AddressClass::HostOwn},
                        Case{"2606:4700::1111", AddressClass::Public}}) {
        INFO(a);
        CHECK(classify(ip(a), own) == c);
    }
}

TEST_CASE("proxy: a listed name resolving to a public address is allowed, and connected to as checked") {
    FakeDns dns;
    dns.names["registry.npmjs.org"] = {"104.16.0.35", "10.0.0.5", "104.16.1.35"};
    auto v = decide(rules("registry.npmjs.org:443"), target("registry.npmjs.org:443"), dns.fn(), {});
    CHECK(v.allowed);
    CHECK(v.reason == "listed");
    CHECK(v.rule == "registry.npmjs.org:443");
    CHECK(v.resolved_by == "hosts-file");
    // The private address is dropped; the others kept, in order.
    REQUIRE(v.connect_to.size() == 2);
    CHECK(v.connect_to[0] == ip("104.16.0.35"));
    CHECK(v.connect_to[1] == ip("104.16.1.35"));
    CHECK(v.detail == "skipped: 10.0.0.5 is private");
    auto j = network_record(Proto::Connect, target("registry.npmjs.org:443"), v);
    CHECK(j.begin().key() == "type");
    CHECK(nlohmann::json(j) == nlohmann::json{{"type", "network"}, {"proto", "connect"}, {"host", "registry.npmjs.org"}, {"port", 443},
                              {"address", "104.16.0.35"}, {"verdict", "allowed"}, {"reason", "listed"},
                              {"rule", "registry.npmjs.org:443"}, {"detail", "skipped: 10.0.0.5 is private"},
                              {"resolvedBy", "hosts-file"}, {"version", 1}});
    // The wrong port is not listed.
    CHECK(decide(rules("registry.npmjs.org:443"), target("registry.npmjs.org:80"), dns.fn(), {}).reason == "not-listed");
}

TEST_CASE("proxy: an unlisted name is refused without being resolved (no DNS exfiltration)") {
    FakeDns dns;
    dns.names["secret-data.evil.test"] = {"93.184.216.34"};
    auto v = decide(rules("allowed.test"), target("secret-data.evil.test:443"), dns.fn(), {});
    CHECK_FALSE(v.allowed);
    CHECK(v.reason == "not-listed");
    CHECK(dns.asked.empty());
    auto j = network_record(Proto::Connect, target("secret-data.evil.test:443"), v);
    CHECK(nlohmann::json(j) == nlohmann::json{{"type", "network"}, {"proto", "connect"}, {"host", "secret-data.evil.test"},
                              {"port", 443}, {"verdict", "refused"}, {"reason", "not-listed"}, {"version", 1}});
}

TEST_CASE("proxy: a listed name resolving to loopback is refused unless the address is listed too") {
    FakeDns dns;
    dns.names["allowed.test"] = {"127.0.0.1"};
    auto v = decide(rules("allowed.test"), target("allowed.test:8080"), dns.fn(), {});
    CHECK_FALSE(v.allowed);
    CHECK(v.reason == "private-address");
    CHECK(v.detail == "127.0.0.1 is loopback");
    CHECK(v.rule == "allowed.test");
    auto j = network_record(Proto::Http, target("allowed.test:8080"), v);
    CHECK(j["address"] == "127.0.0.1");
    CHECK(j["verdict"] == "refused");

    auto ok = decide(rules("allowed.test,127.0.0.1:8080"), target("allowed.test:8080"), dns.fn(), {});
    CHECK(ok.allowed);
    CHECK(ok.rule == "allowed.test");
    // ...on the listed port only.
    CHECK(decide(rules("allowed.test,127.0.0.1:8080"), target("allowed.test:8081"), dns.fn(), {}).reason ==
          "private-address");
    // The metadata address and the host's own, the same.
    dns.names["meta.test"] = {"169.254.169.254"};
    CHECK(decide(rules("meta.test"), target("meta.test:80"), dns.fn(), {}).detail == "169.254.169.254 is metadata");
    dns.names["me.test"] = {"203.0.113.9"};
    CHECK(decide(rules("me.test"), target("me.test:80"), dns.fn(), {ip("203.0.113.9")}).detail ==
          "203.0.113.9 is host-own");
    dns.names["mapped.test"] = {"::ffff:127.0.0.1"};
    CHECK(decide(rules("mapped.test"), target("mapped.test:80"), dns.fn(), {}).reason == "private-address");
}

TEST_CASE("proxy: an address asked for directly needs an address rule; a name rule never covers it") {
    FakeDns dns;
    CHECK(decide(rules("allowed.test"), target("93.184.216.34:443"), dns.fn(), {}).reason == "not-listed");
    CHECK(decide(rules("allowed.test"), target("127.0.0.1:8080"), dns.fn(), {}).reason == "private-address");
    auto v = decide(rules("127.0.0.1:8080"), target("127.0.0.1:8080"), dns.fn(), {});
    CHECK(v.allowed);
    CHECK(v.resolved_by == "literal");
    CHECK(v.rule == "127.0.0.1:8080");
    CHECK(decide(rules("93.184.216.0/24"), target("93.184.216.34:1"), dns.fn(), {}).allowed);
    CHECK(dns.asked.empty());
}

TEST_CASE("proxy: deny rules win over every allow, by name or by any resolved address") {
    FakeDns dns;
    dns.names["a.example.org"] = {"93.184.216.34"};
    dns.names["b.example.org"] = {"93.184.216.35", "198.51.100.1"};
    auto r = rules("*.example.org", "a.example.org,198.51.100.0/24");
    auto a = decide(r, target("a.example.org:443"), dns.fn(), {});
    CHECK(a.reason == "denied");
    CHECK(a.rule == "a.example.org");
    CHECK(dns.asked.empty());  // denied by name: not resolved either
    auto b = decide(r, target("b.example.org:443"), dns.fn(), {});
    CHECK(b.reason == "denied");
    CHECK(b.rule == "198.51.100.0/24");
    CHECK(b.detail == "198.51.100.1");
    CHECK(decide(rules("0.0.0.0/0", "127.0.0.0/8"), target("127.0.0.1:80"), dns.fn(), {}).reason == "denied");
}

TEST_CASE("proxy: a name that does not resolve is refused with the resolver's reason") {
    FakeDns dns;
    auto v = decide(rules("gone.test"), target("gone.test:443"), dns.fn(), {});
    CHECK(v.reason == "resolve-failed");
    CHECK(v.detail == "no such name");
}

TEST_CASE("proxy: hosts(5) text maps names to addresses, in file order, case-insensitively") {
    const char* text = "# test hosts\n127.0.0.1\tlocalhost\n192.0.2.1 Allowed.Test alias # comment\n"
                       "bogus allowed.test\n::1 allowed.test\r\n192.0.2.1 allowed.test\n10.0.0.1 notallowed.test\n";
    auto a = hosts_lookup(text, "allowed.test");
    REQUIRE(a.size() == 2);
    CHECK(a[0] == ip("192.0.2.1"));
    CHECK(a[1] == ip("::1"));
    CHECK(hosts_lookup(text, "alias").size() == 1);
    CHECK(hosts_lookup(text, "comment").empty());
    CHECK(hosts_lookup(text, "test").empty());
}

// Issue 38: the IPv4 address a deny rule names, in every spelling and every
// IPv6 form that carries it, is denied, even when an allow rule holds the
// whole of both families.
namespace {
const std::vector<std::string> kLoopbackForms = {
    // IPv4 shorthand and trailing dots (CONNECT HOST:PORT, a URI's host, a SOCKS5 name).
    "127.0.0.1", "2130706433", "0x7f000001", "017700000001", "0x7f.1", "0177.0.0.1", "0177.1", "127.1", "127.0.1",
    "127.0.0.1.", "0X7F.0.0.1",
    // IPv4-mapped, in hex and dotted spellings, zero-compressed or not, any case.
    "[::ffff:127.0.0.1]", "[::FFFF:7F00:1]", "[0:0:0:0:0:ffff:7f00:0001]", "[::ffff:7f00:1]",
    // IPv4-compatible and IPv4-translated.
    "[::127.0.0.1]", "[::7f00:1]", "[::ffff:0:127.0.0.1]",
    // NAT64: the well-known /96 and the local-use /48 (every prefix length).
    "[64:ff9b::127.0.0.1]", "[64:FF9B::7F00:1]", "[64:ff9b:0:0:0:0:7f00:1]", "[64:ff9b:1:7f00:0:100::]",
    "[64:ff9b:1:7f:0:1::]", "[64:ff9b:1:0:7f:0:100:0]", "[64:ff9b:1::127.0.0.1]",
    // 6to4, Teredo (server and obfuscated client), ISATAP (both interface ids).
    "[2002:7f00:1::]", "[2002:7f00:0001:0:0:0:0:1]", "[2001:0:4136:e378:8000:63bf:80ff:fffe]", "[2001:0:7f00:1::1]",
    "[2001:db8::5efe:127.0.0.1]", "[2001:db8:1:2:200:5efe:7f00:1]",
};
const std::vector<std::string> kMetadataForms = {
    "169.254.169.254", "2852039166", "0xa9.0xfe.0xa9fe", "0251.0376.0251.0376", "169.254.43518",
    "[::ffff:169.254.169.254]", "[::a9fe:a9fe]", "[64:ff9b::169.254.169.254]", "[2002:a9fe:a9fe::1]",
    "[2001:0:4136:e378:8000:63bf:5601:5601]", "[2001:db8::5efe:169.254.169.254]",
};
}  // namespace

TEST_CASE("proxy: a denied IPv4 address is denied in every spelling and every IPv6 form that carries it") {
    for (const auto& [forms, denied] : {std::pair{kLoopbackForms, "127.0.0.1"}, std::pair{kMetadataForms, "169.254.169.254"}}) {
        const Rules r = rules("::/0,0.0.0.0/0", denied);
        for (const auto& f : forms) {
            INFO(f);
            auto t = parse_authority(f + ":80", 0);
            REQUIRE(t);
            REQUIRE(t->literal);
            auto v = decide(r, *t, FakeDns().fn(), {});
            CHECK_FALSE(v.allowed);
            CHECK(v.reason == "denied");
            CHECK(v.rule == denied);
        }
    }
}

TEST_CASE("proxy: a name resolving to any IPv6 form of a denied IPv4 address is denied") {
    const Rules r = rules("x.test,::/0", "127.0.0.1");
    for (const auto& f : kLoopbackForms) {
        if (f.front() != '[') continue;
        const std::string literal = f.substr(1, f.size() - 2);
        INFO(literal);
        FakeDns dns;
        dns.names["x.test"] = {literal};
        auto v = decide(r, target("x.test:80"), dns.fn(), {});
        CHECK_FALSE(v.allowed);
        CHECK(v.reason == "denied");
        CHECK(v.rule == "127.0.0.1");
    }
}

TEST_CASE("proxy: an IPv6 address carrying a loopback IPv4 is private even when the IPv6 is listed") {
    // Without a deny rule: the carried IPv4 must be public or listed itself.
    for (const auto& f : kLoopbackForms) {
        INFO(f);
        auto v = decide(rules("::/0"), *parse_authority(f + ":80", 0), FakeDns().fn(), {});
        CHECK_FALSE(v.allowed);
        CHECK(v.reason == "private-address");
    }
    auto v = decide(rules("::/0"), target("[2002:7f00:1::]:80"), FakeDns().fn(), {});
    CHECK(v.detail == "2002:7f00:1:: carries 127.0.0.1, which is loopback");
    // Listing the carried address too lets it through, connected to as written.
    v = decide(rules("2002::/16,127.0.0.1"), target("[2002:7f00:1::]:80"), FakeDns().fn(), {});
    CHECK(v.allowed);
    CHECK(v.connect_to == std::vector<Address>{ip("2002:7f00:1::")});
    // DNS64's answer for a public name is judged by its IPv4, and connected to as given.
    FakeDns dns;
    dns.names["v6only.test"] = {"64:ff9b::808:808", "64:ff9b::a00:1"};
    v = decide(rules("v6only.test"), target("v6only.test:443"), dns.fn(), {});
    CHECK(v.allowed);
    CHECK(v.connect_to == std::vector<Address>{ip("64:ff9b::808:808")});
    CHECK(v.detail == "skipped: 64:ff9b::a00:1 carries 10.0.0.1, which is private");
}

TEST_CASE("proxy: the IPv4-mapped form and the IPv4 shorthands are translated to the IPv4 address") {
    for (const char* f : {"[::ffff:127.0.0.1]:8080", "[::FFFF:7F00:1]:8080", "2130706433:8080", "0x7f.1:8080", "127.1:8080",
                          "127.0.0.1.:8080"}) {
        INFO(f);
        auto t = target(f);
        CHECK(t.host == "127.0.0.1");
        CHECK(t.literal == ip("127.0.0.1"));
        auto v = decide(rules("127.0.0.1:8080"), t, FakeDns().fn(), {});
        CHECK(v.allowed);
        CHECK(v.connect_to == std::vector<Address>{ip("127.0.0.1")});
    }
    // A mapped answer from the hosts file or DNS too.
    FakeDns dns;
    dns.names["m.test"] = {"::ffff:93.184.216.34"};
    auto v = decide(rules("m.test"), target("m.test:443"), dns.fn(), {});
    CHECK(v.allowed);
    CHECK(v.connect_to == std::vector<Address>{ip("93.184.216.34")});
    // SOCKS5's IPv6 address type.
    Socks5Request rq;
    const std::string msg = std::string("\x05\x01\x00\x04", 4) + std::string(10, '\0') +
                            std::string("\xff\xff\x7f\x00\x00\x01", 6) + std::string("\x00\x50", 2);
    REQUIRE(parse_socks5_request(msg, rq) == Parse::Done);
    CHECK(rq.target.host == "127.0.0.1");
    CHECK(rq.target.literal == ip("127.0.0.1"));
}

TEST_CASE("proxy: zone ids and hosts that end in a number but are no address are refused") {
    for (const char* f : {"[fe80::1%25lo]:80", "[fe80::1%lo]:80", "[::ffff:127.0.0.1%25eth0]:80", "fe80::1%lo:80",
                          "1.2.3.256:80", "08.1:80", "example.123:80", "example.0x7f:80", "0x:80", "127.0.0.1..:80"}) {
        INFO(f);
        CHECK_FALSE(parse_authority(f, 0));
    }
    CHECK(parse_authority("example.0x7g:80", 0));  // a name, not a number
}

TEST_CASE("proxy: allow=localhost[:PORT] reaches the host's loopback on that port only; NO_PROXY keeps the rest direct") {
    FakeDns dns;
    dns.names["localhost"] = {"127.0.0.1", "::1"};
    const Rules r = rules("localhost:8080");
    const auto v = decide(r, target("localhost:8080"), dns.fn(), {});
    CHECK(v.allowed);
    CHECK(v.connect_to.size() == 2);
    CHECK_FALSE(decide(r, target("localhost:8081"), dns.fn(), {}).allowed);
    CHECK_FALSE(decide(r, target("127.0.0.1:8080"), dns.fn(), {}).allowed);  // a spelling the list does not name
    // A name that resolves to loopback is still refused (it is not localhost).
    dns.names["rebind.test"] = {"127.0.0.1"};
    CHECK(decide(rules("rebind.test"), target("rebind.test:80"), dns.fn(), {}).reason == "private-address");
    // NO_PROXY: what the list allows goes through the proxy, the rest stays direct.
    CHECK(direct_loopback(rules("example.com")) == "localhost,127.0.0.1,::1");
    CHECK(direct_loopback(r) == "127.0.0.1,::1");
    CHECK(direct_loopback(rules("127.0.0.1:8080")) == "localhost,::1");
    CHECK(direct_loopback(rules("127.0.0.0/8")) == "localhost,::1");
    CHECK(direct_loopback(rules("[::1]:8080")) == "localhost,127.0.0.1");
    CHECK(direct_loopback(rules("localhost,127.0.0.1,::1")).empty());
}
