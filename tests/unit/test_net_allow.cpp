#include <catch2/catch.hpp>

#include "../../src/net_allow.hpp"

using namespace dsh;
using namespace dsh::net;

namespace {
Rule rule(const char* s) {
    Rule r;
    auto o = parse_rule(s, r);
    INFO(s << ": " << (o ? std::string() : o.text()));
    REQUIRE(o);
    return r;
}
std::string refusal(const char* s) {
    Rule r;
    auto o = parse_rule(s, r);
    REQUIRE_FALSE(o);
    CHECK(o.exit_status() == 125);
    return o.text();
}
Address addr(const char* s) {
    auto a = parse_address(s);
    REQUIRE(a);
    return *a;
}
}  // namespace

TEST_CASE("addresses parse strictly and print in their canonical form") {
    CHECK(to_string(addr("10.0.0.1")) == "10.0.0.1");
    CHECK(to_string(addr("::1")) == "::1");
    CHECK(to_string(addr("::")) == "::");
    CHECK(to_string(addr("fe80:0:0:0:0:0:0:1")) == "fe80::1");
    CHECK(to_string(addr("2001:db8:0:0:1:0:0:1")) == "2001:db8::1:0:0:1");
    CHECK(to_string(addr("1::")) == "1::");
    CHECK(to_string(addr("::ffff:1.2.3.4")) == "::ffff:102:304");
    CHECK(to_string(addr("1:2:3:4:5:6:7:8")) == "1:2:3:4:5:6:7:8");
    CHECK(to_string(addr("1:0:3:4:5:6:7:8")) == "1:0:3:4:5:6:7:8");  // one zero group is not "::"
    for (const char* bad : {"", "1.2.3", "1.2.3.4.5", "256.1.1.1", "010.0.0.1", "1.2.3.4 ", "a.b.c.d", ":::", "1:::2",
                            "1::2::3", ":1::", "1:2:3:4:5:6:7:8:9", "1:2:3:4:5:6:7", "12345::", "g::", "1:", "::1.2.3"})
        CHECK_FALSE(parse_address(bad));
}

TEST_CASE("an IPv4-mapped IPv6 address is compared as its IPv4") {
    CHECK(in_prefix(addr("::ffff:127.0.0.1"), addr("127.0.0.0"), 8));
    CHECK(connected(addr("::ffff:10.1.2.3")) == addr("10.1.2.3"));
    // The unspecified addresses are where connect() goes: the host's loopback.
    CHECK(connected(addr("0.0.0.0")) == addr("127.0.0.1"));
    CHECK(connected(addr("::")) == addr("::1"));
    CHECK(connected(addr("::ffff:0.0.0.0")) == addr("127.0.0.1"));
    CHECK(connected(addr("0.0.0.1")) == addr("0.0.0.1"));
    CHECK(in_prefix(addr("10.255.0.1"), addr("10.0.0.0"), 8));
    CHECK_FALSE(in_prefix(addr("11.0.0.1"), addr("10.0.0.0"), 8));
    CHECK(in_prefix(addr("172.31.255.255"), addr("172.16.0.0"), 12));
    CHECK_FALSE(in_prefix(addr("172.32.0.0"), addr("172.16.0.0"), 12));
    CHECK(in_prefix(addr("1.2.3.4"), addr("0.0.0.0"), 0));
    CHECK_FALSE(in_prefix(addr("::1"), addr("0.0.0.0"), 0));  // families never mix
}

TEST_CASE("each rule form parses to what it says") {
    auto h = rule("Registry.NPMJS.org.");
    CHECK(h.kind == Rule::Kind::Host);
    CHECK(h.host == "registry.npmjs.org");
    CHECK(h.port == 0);
    CHECK(h.text == "Registry.NPMJS.org.");

    auto hp = rule("pypi.org:443");
    CHECK(hp.host == "pypi.org");
    CHECK(hp.port == 443);

    auto w = rule("*.example.org:8443");
    CHECK(w.kind == Rule::Kind::Suffix);
    CHECK(w.host == "example.org");
    CHECK(w.port == 8443);

    auto ip = rule("127.0.0.1");
    CHECK(ip.kind == Rule::Kind::Cidr);
    CHECK(ip.prefix == 32);
    auto cidr = rule("10.0.0.0/8:443");
    CHECK(cidr.prefix == 8);
    CHECK(cidr.port == 443);
    auto v6 = rule("::1");
    CHECK(v6.address.v6);
    CHECK(v6.prefix == 128);
    auto v6p = rule("[::1]:8080");
    CHECK(v6p.port == 8080);
    auto v6c = rule("[fd00::/8]:443");
    CHECK(v6c.prefix == 8);
    CHECK(v6c.port == 443);
    CHECK(rule("0.0.0.0/0").prefix == 0);
}

TEST_CASE("a malformed rule is a usage error that names it and says why") {
    CHECK(refusal("") == "bad network rule \"\": it is empty; a rule is a host, *.domain, an IP address or CIDR, "
                         "each with an optional :PORT ([IPv6]:PORT)");
    CHECK_THAT(refusal("*"), Catch::Contains("'*' is allowed only as the whole first label"));
    CHECK_THAT(refusal("*."), Catch::Contains("'*.' must be followed by a domain name"));
    CHECK_THAT(refusal("a.*.org"), Catch::Contains("'*' is allowed only"));
    CHECK_THAT(refusal("*foo.org"), Catch::Contains("'*' is allowed only"));
    CHECK_THAT(refusal("host:0"), Catch::Contains("port must be a number from 1 to 65535"));
    CHECK_THAT(refusal("host:65536"), Catch::Contains("port must be"));
    CHECK_THAT(refusal("host:"), Catch::Contains("port must be"));
    CHECK_THAT(refusal("host:08"), Catch::Contains("port must be"));
    CHECK_THAT(refusal(":443"), Catch::Contains("names no host"));
    CHECK_THAT(refusal("10.0.0.0/33"), Catch::Contains("from 0 to 32"));
    CHECK_THAT(refusal("[::]/129"), Catch::Contains("only ':PORT' may follow"));  // the prefix goes inside
    CHECK_THAT(refusal("[::/129]"), Catch::Contains("from 0 to 128"));
    CHECK_THAT(refusal("host/8"), Catch::Contains("follows an IP address only"));
    CHECK_THAT(refusal("999.1.1.1"), Catch::Contains("not a valid IP address"));
    CHECK_THAT(refusal("1.2.3.4.5"), Catch::Contains("not a valid IP address"));
    CHECK_THAT(refusal("bad_host!.org"), Catch::Contains("not a valid host name"));
    CHECK_THAT(refusal("a..b"), Catch::Contains("not a valid host name"));
    CHECK_THAT(refusal("[10.0.0.1]:80"), Catch::Contains("brackets are for IPv6"));
    CHECK_THAT(refusal("[::1"), Catch::Contains("without its ']'"));
    CHECK_THAT(refusal("[::1]x"), Catch::Contains("only ':PORT' may follow"));
    CHECK_THAT(refusal("fe80::1%eth0"), Catch::Contains("not an IPv6 address"));
    CHECK_THAT(refusal(std::string(64, 'a').c_str()), Catch::Contains("not a valid host name"));
}

TEST_CASE("a list is comma-separated and refuses an empty entry") {
    std::vector<Rule> rules;
    REQUIRE(parse_rules("a.org,*.b.org:443,10.0.0.0/8", rules));
    CHECK(rules.size() == 3);
    std::vector<Rule> none;
    CHECK_THAT(parse_rules("", none).text(), Catch::Contains("the list is empty"));
    CHECK_THAT(parse_rules("a.org,,b.org", none).text(), Catch::Contains("it is empty"));
    CHECK_THAT(parse_rules("a.org,", none).text(), Catch::Contains("it is empty"));
}

TEST_CASE("names match exactly or strictly below a wildcard's domain, on the rule's port") {
    std::vector<Rule> rules;
    REQUIRE(parse_rules("registry.npmjs.org,*.example.org:443", rules));
    CHECK(match_name(rules, "registry.npmjs.org", 443) == &rules[0]);
    CHECK(match_name(rules, "registry.npmjs.org", 80) == &rules[0]);
    CHECK_FALSE(match_name(rules, "npmjs.org", 443));
    CHECK_FALSE(match_name(rules, "evil-registry.npmjs.org", 443));
    CHECK_FALSE(match_name(rules, "registry.npmjs.org.evil.com", 443));
    CHECK(match_name(rules, "a.example.org", 443) == &rules[1]);
    CHECK(match_name(rules, "a.b.example.org", 443) == &rules[1]);
    CHECK_FALSE(match_name(rules, "example.org", 443));       // the domain itself is not below itself
    CHECK_FALSE(match_name(rules, "badexample.org", 443));    // a label boundary, not a string suffix
    CHECK_FALSE(match_name(rules, "a.example.org", 80));      // the port is part of the rule
    CHECK(normal_host("A.Example.ORG.") == "a.example.org");
    CHECK(normal_host("a.example.org..").empty());
    CHECK(normal_host("").empty());
}

TEST_CASE("address rules hold their CIDR on their port; name rules never match an address") {
    std::vector<Rule> rules;
    REQUIRE(parse_rules("127.0.0.1:8080,10.0.0.0/8,[fd00::/8]:443,example.org", rules));
    CHECK(match_address(rules, addr("127.0.0.1"), 8080) == &rules[0]);
    CHECK_FALSE(match_address(rules, addr("127.0.0.1"), 8081));
    CHECK_FALSE(match_address(rules, addr("127.0.0.2"), 8080));
    CHECK(match_address(rules, addr("::ffff:127.0.0.1"), 8080) == &rules[0]);
    CHECK(match_address(rules, addr("10.9.8.7"), 1) == &rules[1]);
    CHECK(match_address(rules, addr("fd12::1"), 443) == &rules[2]);
    CHECK_FALSE(match_address(rules, addr("fe80::1"), 443));
    CHECK_FALSE(match_name(rules, "127.0.0.1", 8080));
}

// Issue 38: one normal form for every address the proxy sees.
TEST_CASE("an IPv4 address in any spelling a client library accepts is that address") {
    struct Case {
        const char* in;
        const char* out;
    };
    for (auto [in, out] : {Case{"127.0.0.1", "127.0.0.1"}, Case{"2130706433", "127.0.0.1"}, Case{"0x7f000001", "127.0.0.1"},
                           Case{"0X7F000001", "127.0.0.1"}, Case{"017700000001", "127.0.0.1"}, Case{"0x7f.1", "127.0.0.1"},
                           Case{"0177.0.0.1", "127.0.0.1"}, Case{"0177.1", "127.0.0.1"}, Case{"127.1", "127.0.0.1"},
                           Case{"127.0.1", "127.0.0.1"}, Case{"127.0.0.1.", "127.0.0.1"}, Case{"0x7f.0.0.0x1", "127.0.0.1"},
                           Case{"00000127.0.0.1", "87.0.0.1"}, Case{"010.0.0.1", "8.0.0.1"}, Case{"0xa9.0xfe.0xa9fe", "169.254.169.254"},
                           Case{"2852039166", "169.254.169.254"}, Case{"0", "0.0.0.0"}, Case{"4294967295", "255.255.255.255"}}) {
        INFO(in);
        auto a = parse_ipv4_any(in);
        REQUIRE(a);
        CHECK(to_string(*a) == out);
    }
    for (const char* bad : {"", ".", "4294967296", "1.2.3.256", "1.2.65536", "1.16777216", "256.1", "08", "0x1g", "1..2",
                            "1.2.3.4.5", "1.2.3.4..", "a.b.c.d", "example.org", "0x", "-1", "1 .2", "99999999999999999999"})
        CHECK_FALSE(parse_ipv4_any(bad));
    CHECK(ends_in_number("example.123"));
    CHECK(ends_in_number("example.0x1f."));
    CHECK(ends_in_number("1.2.3.256"));
    CHECK_FALSE(ends_in_number("example.org"));
    CHECK_FALSE(ends_in_number("1password.com"));
    CHECK_FALSE(ends_in_number("example.0x1g"));
}

TEST_CASE("every IPv6 form that carries an IPv4 address gives it up") {
    struct Case {
        const char* v6;
        std::vector<const char*> v4;
    };
    const std::vector<Case> cases = {
        {"::ffff:127.0.0.1", {}},  // the mapped form is its IPv4 outright (connected), not a carrier
        {"::127.0.0.1", {"127.0.0.1"}},
        {"::7F00:1", {"127.0.0.1"}},
        {"::ffff:0:127.0.0.1", {"127.0.0.1"}},
        {"64:ff9b::127.0.0.1", {"127.0.0.1"}},
        {"64:FF9B:0:0:0:0:7F00:0001", {"127.0.0.1"}},
        {"64:ff9b:1:7f00:0:100::", {"127.0.0.1", "0.0.1.0", "0.1.0.0", "0.0.0.0"}},
        {"64:ff9b:1::127.0.0.1", {"0.0.0.0", "0.0.0.127", "127.0.0.1"}},
        {"2002:7f00:1::", {"127.0.0.1"}},
        {"2002:a9fe:a9fe:1::1", {"169.254.169.254"}},
        {"2001:0:4136:e378:8000:63bf:80ff:fffe", {"65.54.227.120", "127.0.0.1"}},
        {"2001:0:7f00:1::1", {"127.0.0.1", "255.255.255.254"}},
        {"2001:db8::5efe:127.0.0.1", {"127.0.0.1"}},
        {"2001:db8:1:2:200:5efe:a9fe:a9fe", {"169.254.169.254"}},
        {"::1", {}},
        {"::", {}},
        {"2606:4700::1111", {}},
        {"127.0.0.1", {}},
    };
    for (const auto& c : cases) {
        INFO(c.v6);
        std::vector<std::string> got, want(c.v4.begin(), c.v4.end());
        for (const auto& a : embedded_v4(addr(c.v6))) got.push_back(to_string(a));
        CHECK(got == want);
    }
}

TEST_CASE("a rule written as an IPv4-mapped address holds the IPv4 addresses it names") {
    // It used to compare the IPv4 against a /128: `--net-deny ::ffff:127.0.0.1` denied nothing.
    const std::vector<Rule> rules = {rule("::ffff:127.0.0.1"), rule("::ffff:10.0.0.0/104")};
    CHECK(match_address(rules, addr("127.0.0.1"), 80) == &rules[0]);
    CHECK(match_address(rules, addr("::ffff:127.0.0.1"), 80) == &rules[0]);
    CHECK(match_address(rules, addr("10.9.8.7"), 80) == &rules[1]);
    CHECK(match_address(rules, addr("127.0.0.2"), 80) == nullptr);
    CHECK(match_address(rules, addr("11.0.0.1"), 80) == nullptr);
}
