#include "net_allow.hpp"

#include "bytes.hpp"

#include <algorithm>
#include <cstring>
#include <initializer_list>

#include <fmt/format.h>

namespace dsh::net {

namespace {

bool digits(std::string_view s) noexcept {
    if (s.empty()) return false;
    for (char c : s)
        if (c < '0' || c > '9') return false;
    return true;
}

// 1..max in decimal, no sign, no leading zero; nullopt otherwise.
std::optional<unsigned> small_number(std::string_view s, unsigned max) noexcept {
    if (!digits(s) || s.size() > 5 || (s.size() > 1 && s[0] == '0')) return std::nullopt;
    unsigned v = 0;
    for (char c : s) v = v * 10 + static_cast<unsigned>(c - '0');
    if (v > max) return std::nullopt;
    return v;
}

Outcome bad(std::string_view entry, std::string_view why) {
    return fail(Err::Usage, usage_text(UsageText::NetAllowEntry, entry, why));
}

}  // namespace

namespace {

// Strict dotted quad: four decimal parts 0-255, no leading zero (inet_pton's
// rules: "010.0.0.1" is refused, not read as octal).
bool parse_v4(std::string_view s, uint8_t* out) noexcept {
    int part = 0;
    size_t i = 0;
    while (part < 4) {
        size_t j = i;
        while (j < s.size() && s[j] >= '0' && s[j] <= '9') ++j;
        if (j == i || j - i > 3 || (j - i > 1 && s[i] == '0')) return false;
        unsigned v = 0;
        for (size_t k = i; k < j; ++k) v = v * 10 + static_cast<unsigned>(s[k] - '0');
        if (v > 255) return false;
        out[part++] = static_cast<uint8_t>(v);
        if (part < 4) {
            if (j >= s.size() || s[j] != '.') return false;
            i = j + 1;
        } else if (j != s.size()) {
            return false;
        }
    }
    return true;
}

int hex(char c) noexcept {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// RFC 4291 text form: groups of 1-4 hex digits, one "::", an IPv4 tail.
bool parse_v6(std::string_view s, uint8_t* out) noexcept {
    uint16_t head[8] = {}, tail[8] = {};
    int nh = 0, nt = 0;
    bool gap = false;
    size_t i = 0;
    if (s.substr(0, 2) == "::") {
        gap = true;
        i = 2;
        if (i == s.size()) {
            std::memset(out, 0, 16);
            return true;
        }
    } else if (!s.empty() && s[0] == ':') {
        return false;
    }
    uint8_t v4[4];
    bool have_v4 = false;
    while (i < s.size()) {
        const size_t colon = s.find(':', i);
        const std::string_view group = s.substr(i, colon == std::string_view::npos ? std::string_view::npos : colon - i);
        if (colon == std::string_view::npos && group.find('.') != std::string_view::npos) {
            if (!parse_v4(group, v4)) return false;
            have_v4 = true;
            i = s.size();
            break;
        }
        if (group.empty() || group.size() > 4) return false;
        unsigned v = 0;
        for (char c : group) {
            const int h = hex(c);
            if (h < 0) return false;
            v = v * 16 + static_cast<unsigned>(h);
        }
        if ((gap ? nt : nh) + (gap ? nh : 0) >= 8) return false;
        (gap ? tail[nt++] : head[nh++]) = static_cast<uint16_t>(v);
        if (colon == std::string_view::npos) {
            i = s.size();
            break;
        }
        i = colon + 1;
        if (i < s.size() && s[i] == ':') {
            if (gap) return false;
            gap = true;
            ++i;
            if (i == s.size()) break;
        } else if (i == s.size()) {
            return false;  // a trailing single ':'
        }
    }
    const int groups = nh + nt + (have_v4 ? 2 : 0);
    if (gap ? groups > 7 : groups != 8) return false;
    uint16_t all[8] = {};
    for (int k = 0; k < nh; ++k) all[k] = head[k];
    const int tail_at = 8 - nt - (have_v4 ? 2 : 0);
    for (int k = 0; k < nt; ++k) all[tail_at + k] = tail[k];
    for (int k = 0; k < 8; ++k) {
        out[2 * k] = static_cast<uint8_t>(all[k] >> 8);
        out[2 * k + 1] = static_cast<uint8_t>(all[k] & 0xff);
    }
    if (have_v4) std::memcpy(out + 12, v4, 4);
    return true;
}

}  // namespace

std::optional<Address> parse_address(std::string_view s) noexcept {
    Address a;
    if (s.find(':') != std::string_view::npos) {
        if (!parse_v6(s, a.bytes.data())) return std::nullopt;
        a.v6 = true;
    } else if (!parse_v4(s, a.bytes.data())) {
        return std::nullopt;
    }
    return a;
}

std::string to_string(const Address& a) {
    if (!a.v6) return fmt::format("{}.{}.{}.{}", a.bytes[0], a.bytes[1], a.bytes[2], a.bytes[3]);
    uint16_t g[8];
    for (int k = 0; k < 8; ++k) g[k] = static_cast<uint16_t>(a.bytes[2 * k] << 8 | a.bytes[2 * k + 1]);
    // RFC 5952: the longest run of two or more zero groups (the first of equals) becomes "::".
    int best = -1, best_len = 0;
    for (int k = 0; k < 8;) {
        if (g[k] != 0) {
            ++k;
            continue;
        }
        int e = k;
        while (e < 8 && g[e] == 0) ++e;
        if (e - k > best_len && e - k >= 2) best = k, best_len = e - k;
        k = e;
    }
    std::string out;
    for (int k = 0; k < 8; ++k) {
        if (k == best) {
            out += "::";
            k += best_len - 1;
            continue;
        }
        if (!out.empty() && out.back() != ':') out += ':';
        out += fmt::format("{:x}", g[k]);
    }
    return out;
}

namespace {

constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

bool is_mapped(const Address& a) noexcept { return a.v6 && std::memcmp(a.bytes.data(), kMapped, 12) == 0; }

Address v4_of(const uint8_t* p, uint8_t flip = 0) noexcept {
    Address v4;
    for (int i = 0; i < 4; ++i) v4.bytes[i] = static_cast<uint8_t>(p[i] ^ flip);
    return v4;
}

bool starts(const Address& a, std::initializer_list<uint8_t> head) noexcept {
    size_t i = 0;
    for (uint8_t b : head)
        if (a.bytes[i++] != b) return false;
    return true;
}

bool zeros(const Address& a, size_t from, size_t to) noexcept {
    for (size_t i = from; i < to; ++i)
        if (a.bytes[i] != 0) return false;
    return true;
}

}  // namespace

Address connected(const Address& a) noexcept {
    Address n = is_mapped(a) ? v4_of(a.bytes.data() + 12) : a;
    // The unspecified address: a connect() there reaches the host itself
    // (the kernel takes 0.0.0.0 for 127.0.0.1 and :: for ::1), so it is
    // judged, and reached, as that loopback address.
    if (zeros(n, 0, n.v6 ? 16 : 4)) {
        if (n.v6) n.bytes[15] = 1;
        else n.bytes[0] = 127, n.bytes[3] = 1;
    }
    return n;
}

std::vector<Address> embedded_v4(const Address& a0) {
    std::vector<Address> out;
    const Address a = connected(a0);
    if (!a.v6) return out;
    const uint8_t* b = a.bytes.data();
    auto add = [&](const Address& v) {
        if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
    };
    // ::a.b.c.d (IPv4-compatible, RFC 4291 2.5.5.1; not :: and ::1, which are their own).
    if (zeros(a, 0, 12) && !zeros(a, 12, 15)) add(v4_of(b + 12));
    // ::ffff:0:a.b.c.d (IPv4-translated, RFC 2765).
    if (zeros(a, 0, 8) && b[8] == 0xff && b[9] == 0xff && b[10] == 0 && b[11] == 0) add(v4_of(b + 12));
    // NAT64's well-known prefix 64:ff9b::/96 (RFC 6052).
    if (starts(a, {0, 0x64, 0xff, 0x9b}) && zeros(a, 4, 12)) add(v4_of(b + 12));
    // The local-use NAT64 prefix 64:ff9b:1::/48 (RFC 8215), whose network
    // picks a prefix of 48 to 96 bits: each RFC 6052 layout (byte 8 is 0).
    if (starts(a, {0, 0x64, 0xff, 0x9b, 0, 1})) {
        const uint8_t l48[4] = {b[6], b[7], b[9], b[10]}, l56[4] = {b[7], b[9], b[10], b[11]};
        add(v4_of(l48));
        add(v4_of(l56));
        add(v4_of(b + 9));
        add(v4_of(b + 12));
    }
    // 6to4 2002:a.b.c.d::/48 (RFC 3056).
    if (starts(a, {0x20, 0x02})) add(v4_of(b + 2));
    // Teredo 2001:0::/32 (RFC 4380): the server, then the client, stored inverted.
    if (starts(a, {0x20, 0x01, 0, 0})) {
        add(v4_of(b + 4));
        add(v4_of(b + 12, 0xff));
    }
    // ISATAP (RFC 5214): an interface id of 0000:5efe or 0200:5efe (the
    // u bit set) before the IPv4, under any prefix.
    if ((b[8] == 0 || b[8] == 2) && b[9] == 0 && b[10] == 0x5e && b[11] == 0xfe) add(v4_of(b + 12));
    return out;
}

std::optional<Address> parse_ipv4_any(std::string_view s) noexcept {
    if (!s.empty() && s.back() == '.') s.remove_suffix(1);
    if (s.empty()) return std::nullopt;
    uint64_t parts[4];
    size_t n = 0, i = 0;
    while (true) {
        if (n == 4) return std::nullopt;
        size_t j = s.find('.', i);
        if (j == std::string_view::npos) j = s.size();
        std::string_view p = s.substr(i, j - i);
        if (p.empty()) return std::nullopt;
        unsigned base = 10;
        if (p.size() >= 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
            base = 16;
            p.remove_prefix(2);
            if (p.empty()) return std::nullopt;
        } else if (p.size() >= 2 && p[0] == '0') {
            base = 8;
            p.remove_prefix(1);
        }
        // Leading zeros are harmless; more than 12 significant digits cannot fit.
        while (p.size() > 1 && p[0] == '0') p.remove_prefix(1);
        if (p.size() > 12) return std::nullopt;
        uint64_t v = 0;
        for (char c : p) {
            const int d = hex(c);
            if (d < 0 || static_cast<unsigned>(d) >= base) return std::nullopt;
            v = v * base + static_cast<unsigned>(d);
        }
        parts[n++] = v;
        if (j == s.size()) break;
        i = j + 1;
    }
    for (size_t k = 0; k + 1 < n; ++k)
        if (parts[k] > 255) return std::nullopt;
    const unsigned last_bytes = static_cast<unsigned>(5 - n);
    if (parts[n - 1] >> (8 * last_bytes)) return std::nullopt;
    uint32_t v = static_cast<uint32_t>(parts[n - 1]);
    for (size_t k = 0; k + 1 < n; ++k) v |= static_cast<uint32_t>(parts[k]) << (8 * (3 - k));
    Address a;
    a.bytes[0] = static_cast<uint8_t>(v >> 24);
    a.bytes[1] = static_cast<uint8_t>(v >> 16);
    a.bytes[2] = static_cast<uint8_t>(v >> 8);
    a.bytes[3] = static_cast<uint8_t>(v);
    return a;
}

bool ends_in_number(std::string_view host) noexcept {
    if (!host.empty() && host.back() == '.') host.remove_suffix(1);
    const size_t dot = host.rfind('.');
    std::string_view last = dot == std::string_view::npos ? host : host.substr(dot + 1);
    if (last.empty()) return false;
    if (digits(last)) return true;
    if (last.size() < 2 || last[0] != '0' || (last[1] != 'x' && last[1] != 'X')) return false;
    for (char c : last.substr(2))
        if (hex(c) < 0) return false;
    return true;
}

bool in_prefix(const Address& a0, const Address& net0, unsigned prefix) noexcept {
    const Address a = connected(a0);
    Address net = net0;
    if (is_mapped(net0) && prefix >= 96) net = connected(net0), prefix -= 96;
    if (a.v6 != net.v6 || prefix > a.width()) return false;
    const unsigned whole = prefix / 8, rest = prefix % 8;
    if (std::memcmp(a.bytes.data(), net.bytes.data(), whole) != 0) return false;
    if (rest == 0) return true;
    const uint8_t mask = static_cast<uint8_t>(0xff << (8 - rest));
    return (a.bytes[whole] & mask) == (net.bytes[whole] & mask);
}

std::string normal_host(std::string_view name) {
    if (!name.empty() && name.back() == '.') name.remove_suffix(1);
    if (name.empty() || name.size() > 253) return {};
    std::string out;
    out.reserve(name.size());
    size_t label = 0;
    for (char c : name) {
        if (c == '.') {
            if (label == 0) return {};
            label = 0;
        } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_') {
            if (++label > 63) return {};
        } else {
            return {};
        }
        out.push_back(ascii_lower(c));
    }
    if (label == 0) return {};
    return out;
}

Outcome parse_rule(std::string_view entry, Rule& out) {
    out = Rule{};
    out.text = std::string(entry);
    if (entry.empty()) return bad(entry, "it is empty");
    std::string_view body = entry;
    std::optional<std::string_view> port;
    if (body.front() == '[') {
        // [v6] or [v6/prefix], then an optional :port.
        const size_t close = body.find(']');
        if (close == std::string_view::npos) return bad(entry, "a '[' without its ']'");
        std::string_view after = body.substr(close + 1);
        body = body.substr(1, close - 1);
        if (!after.empty()) {
            if (after.front() != ':') return bad(entry, "only ':PORT' may follow ']'");
            port = after.substr(1);
        }
        if (body.find(':') == std::string_view::npos) return bad(entry, "brackets are for IPv6 addresses only");
    } else if (const size_t colons = std::count(body.begin(), body.end(), ':'); colons == 1) {
        const size_t c = body.find(':');
        port = body.substr(c + 1);
        body = body.substr(0, c);
    }
    // else: no colon (a name, an IPv4 address or CIDR), or an IPv6 literal without a port.
    if (port) {
        auto p = small_number(*port, 65535);
        if (!p || *p == 0) return bad(entry, "the port must be a number from 1 to 65535");
        out.port = static_cast<uint16_t>(*p);
    }
    if (body.empty()) return bad(entry, "it names no host");

    // An address or a CIDR.
    std::string_view addr = body, prefix;
    if (const size_t slash = body.find('/'); slash != std::string_view::npos) {
        addr = body.substr(0, slash);
        prefix = body.substr(slash + 1);
    }
    if (auto a = parse_address(addr)) {
        out.kind = Rule::Kind::Cidr;
        out.address = *a;
        out.prefix = static_cast<unsigned>(a->width());
        if (body.size() != addr.size()) {
            auto p = prefix == "0" ? std::optional<unsigned>(0) : small_number(prefix, 128);
            if (!p || *p > a->width())
                return bad(entry, a->v6 ? "the prefix length must be from 0 to 128" : "the prefix length must be from 0 to 32");
            out.prefix = *p;
        }
        return Outcome::success();
    }
    if (body.find('/') != std::string_view::npos) return bad(entry, "a '/' prefix length follows an IP address only");
    if (body.find(':') != std::string_view::npos) return bad(entry, "not an IPv6 address (write [ADDRESS]:PORT for a port)");

    if (body.substr(0, 2) == "*.") {
        const std::string domain = normal_host(body.substr(2));
        if (domain.empty()) return bad(entry, "'*.' must be followed by a domain name");
        out.kind = Rule::Kind::Suffix;
        out.host = domain;
        return Outcome::success();
    }
    if (body.find('*') != std::string_view::npos)
        return bad(entry, "'*' is allowed only as the whole first label ('*.example.org')");
    // Four numeric labels that inet_pton refused (999.1.1.1, 010.0.0.1) are
    // not a name either: refused rather than matched as a host name.
    {
        size_t dots = 0;
        bool numeric = true;
        for (char c : body) {
            if (c == '.') ++dots;
            else if (c < '0' || c > '9') numeric = false;
        }
        if (numeric) return bad(entry, "not a valid IP address");
        (void)dots;
    }
    const std::string host = normal_host(body);
    if (host.empty()) return bad(entry, "not a valid host name");
    out.kind = Rule::Kind::Host;
    out.host = host;
    return Outcome::success();
}

Outcome parse_rules(std::string_view list, std::vector<Rule>& out) {
    if (list.empty()) return bad(list, "the list is empty");
    size_t start = 0;
    while (true) {
        const size_t comma = list.find(',', start);
        const std::string_view entry =
            list.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
        Rule r;
        if (auto o = parse_rule(entry, r); !o) return o;
        out.push_back(std::move(r));
        if (comma == std::string_view::npos) break;
        start = comma + 1;
    }
    return Outcome::success();
}

const Rule* match_name(const std::vector<Rule>& rules, std::string_view name, uint16_t port) noexcept {
    for (const auto& r : rules) {
        if (r.port != 0 && r.port != port) continue;
        if (r.kind == Rule::Kind::Host && r.host == name) return &r;
        if (r.kind == Rule::Kind::Suffix && name.size() > r.host.size() + 1 &&
            name.substr(name.size() - r.host.size()) == r.host && name[name.size() - r.host.size() - 1] == '.')
            return &r;
    }
    return nullptr;
}

const Rule* match_address(const std::vector<Rule>& rules, const Address& a, uint16_t port) noexcept {
    for (const auto& r : rules) {
        if (r.port != 0 && r.port != port) continue;
        if (r.kind == Rule::Kind::Cidr && in_prefix(a, r.address, r.prefix)) return &r;
    }
    return nullptr;
}

bool names_localhost(const Rule& r) noexcept { return r.kind == Rule::Kind::Host && r.host == "localhost"; }

std::string direct_loopback(const Rules& rules) {
    std::string out;
    auto keep = [&](const char* spelling) { out += (out.empty() ? "" : ",") + std::string(spelling); };
    if (std::none_of(rules.allow.begin(), rules.allow.end(), names_localhost)) keep("localhost");
    for (const char* literal : {"127.0.0.1", "::1"}) {
        const Address a = *parse_address(literal);
        if (std::none_of(rules.allow.begin(), rules.allow.end(), [&](const Rule& r) {
                return r.kind == Rule::Kind::Cidr && in_prefix(a, r.address, r.prefix);
            }))
            keep(literal);
    }
    return out;
}

}  // namespace dsh::net
