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
// An IPv4-mapped IPv6 address (::ffff:a.b.c.d) as its IPv4; others unchanged.
Address unmapped(const Address& a) noexcept;
// Whether `a` is inside `net`/`prefix` (same family; a mapped IPv6 is
// compared as its IPv4).
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

}  // namespace dsh::net
