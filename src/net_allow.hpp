// The allow-list (issue 19): `--net allow=LIST`, `--net-deny LIST` and the
// config's `"network": {"allow": [...], "deny": [...]}` as rules, and the pure
// matcher the proxy asks (docs/DECISIONS.md, "The allow-list"). No sockets, no
// resolving here: the proxy (src/net_proxy.hpp) resolves and then asks.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "errors.hpp"

namespace dsh::net {

// An IPv4 or IPv6 address, in network order. IPv4 uses the first 4 bytes.
struct Address {
    bool v6 = false;
    std::array<uint8_t, 16> bytes{};
    bool operator==(const Address& o) const noexcept { return v6 == o.v6 && bytes == o.bytes; }
    size_t width() const noexcept { return v6 ? 128 : 32; }
};

// A literal as written (no brackets, no zone): "10.0.0.1", "::1".
std::optional<Address> parse_address(std::string_view s) noexcept;
std::string to_string(const Address& a);
// The one normal form (issue 38): the address the kernel's connect() will
// reach. An IPv4-mapped IPv6 address (::ffff:a.b.c.d) is its IPv4; the
// unspecified addresses (0.0.0.0, ::, ::ffff:0.0.0.0) are the host's
// loopback (127.0.0.1, ::1), where a connect() to them goes; every other
// address is unchanged. Every address the proxy sees passes here, and the
// proxy connects to this form, so what a rule judged is what is reached.
Address connected(const Address& a) noexcept;
// The IPv4 addresses an IPv6 address carries for a translator or tunnel to
// reach (docs/DECISIONS.md, "Addresses in every spelling"): IPv4-compatible
// ::a.b.c.d, IPv4-translated ::ffff:0:a.b.c.d, NAT64 64:ff9b::/96 and every
// RFC 6052 layout of 64:ff9b:1::/48, 6to4 2002::/16, Teredo 2001::/32 (its
// server and its de-obfuscated client), ISATAP (interface id 0:5efe or
// 200:5efe). Rules and the private-address check judge each as well as the
// IPv6 address. Empty for an IPv4 address and every other IPv6 address.
std::vector<Address> embedded_v4(const Address& a);
// A host as a client may write it (CONNECT, a URI, a SOCKS5 name), when it
// is an IPv4 address in any spelling inet_aton(3) and URL parsers accept:
// 1 to 4 parts, each decimal, octal (leading 0) or hex (0x), the last
// filling the remaining bytes ("2130706433", "0x7f.1", "0177.0.0.1",
// "127.1"), one trailing dot allowed. nullopt otherwise.
std::optional<Address> parse_ipv4_any(std::string_view s) noexcept;
// Whether a host's last label is a number (decimal or 0x hex): it is then
// an IPv4 address or nothing, never a name to look up (the URL standard's
// "ends in a number").
bool ends_in_number(std::string_view host) noexcept;
// Whether `a` is inside `net`/`prefix` (same family; a mapped IPv6 address,
// and a mapped network of prefix 96 or more, are compared as IPv4).
bool in_prefix(const Address& a, const Address& net, unsigned prefix) noexcept;

// One entry of the list.
struct Rule {
    enum class Kind { Host, Suffix, Cidr };
    Kind kind = Kind::Host;
    std::string host;       // Host: the name; Suffix: the domain below which names match (lower case, no dot at either end)
    Address address;        // Cidr: the network (a literal is a /32 or /128)
    unsigned prefix = 0;
    uint16_t port = 0;      // 0: every port
    std::string text;       // as given: what the record's "rule" names
};

// One entry: "host", "*.domain", "host:port", "1.2.3.4", "1.2.3.4:443",
// "10.0.0.0/8", "10.0.0.0/8:443", "::1", "[::1]:8080", "fd00::/8",
// "[fd00::/8]:443". A failure is a usage error naming the entry and why.
Outcome parse_rule(std::string_view entry, Rule& out);
// Comma-separated entries (the flag's value); none at all is an error.
Outcome parse_rules(std::string_view list, std::vector<Rule>& out);

// A host name as the list compares it: lower case, one trailing dot dropped.
// Empty when it is not a plausible DNS name (empty labels, bytes outside
// letters, digits, '-', '_' and '.', a label over 63 or a name over 253).
std::string normal_host(std::string_view name);

struct Rules {
    std::vector<Rule> allow;
    std::vector<Rule> deny;
    bool empty() const noexcept { return allow.empty() && deny.empty(); }
};

// The first rule of `rules` that matches the name asked for (host and
// suffix rules; `name` already normal_host) on `port`, or null.
const Rule* match_name(const std::vector<Rule>& rules, std::string_view name, uint16_t port) noexcept;
// The first address (CIDR) rule that holds `a` on `port`, or null.
const Rule* match_address(const std::vector<Rule>& rules, const Address& a, uint16_t port) noexcept;
// Whether an allow rule names loopback by name: "localhost" (its addresses
// are the host's loopback, which the proxy then reaches for that rule).
bool names_localhost(const Rule& r) noexcept;
// NO_PROXY's value: the loopback spellings (localhost, 127.0.0.1, ::1) that
// clients reach directly, inside the command's namespace: those the list
// does not allow. One the list allows goes through the proxy, which reaches
// the host's loopback for what is allowed and refuses the rest.
std::string direct_loopback(const Rules& rules);

}  // namespace dsh::net
