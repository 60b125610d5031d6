#include "net_proxy.hpp"
#include "bytes.hpp"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

namespace dsh::net {

std::string_view to_string(Proto p) noexcept {
    switch (p) {
        case Proto::Connect: return "connect";
        case Proto::Http: return "http";
        case Proto::Socks5: return "socks5";
    }
    return "?";
}

std::string_view to_string(AddressClass c) noexcept {
    switch (c) {
        case AddressClass::Public: return "public";
        case AddressClass::Loopback: return "loopback";
        case AddressClass::Unspecified: return "unspecified";
        case AddressClass::LinkLocal: return "link-local";
        case AddressClass::Private: return "private";
        case AddressClass::Metadata: return "metadata";
        case AddressClass::Multicast: return "multicast";
        case AddressClass::Reserved: return "reserved";
        case AddressClass::HostOwn: return "host-own";
    }
    return "?";
}

namespace {

bool iequal(std::string_view a, std::string_view b) noexcept {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (ascii_lower(a[i]) != ascii_lower(b[i])) return false;
    return true;
}

std::string_view trim(std::string_view s) noexcept {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

// A token (RFC 9110 5.6.2): what a method and a header name are made of.
bool token(std::string_view s) noexcept {
    if (s.empty()) return false;
    for (unsigned char c : s)
        if (c <= 32 || c >= 127 || std::strchr("\"(),/:;<=>?@[\\]{}", c)) return false;
    return true;
}

std::optional<uint16_t> port_number(std::string_view s) noexcept {
    if (s.empty() || s.size() > 5) return std::nullopt;
    unsigned v = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return std::nullopt;
        v = v * 10 + static_cast<unsigned>(c - '0');
    }
    if (v == 0 || v > 65535) return std::nullopt;
    return static_cast<uint16_t>(v);
}

Parse bad(HttpHead& out, int status, std::string why) {
    out.status = status;
    out.error = std::move(why);
    return Parse::Bad;
}

}  // namespace

std::optional<Target> parse_authority(std::string_view s, uint16_t default_port) {
    Target t;
    std::string_view host = s, port;
    bool have_port = false;
    if (!s.empty() && s.front() == '[') {
        const size_t close = s.find(']');
        if (close == std::string_view::npos) return std::nullopt;
        host = s.substr(1, close - 1);
        const std::string_view rest = s.substr(close + 1);
        if (!rest.empty()) {
            if (rest.front() != ':') return std::nullopt;
            port = rest.substr(1);
            have_port = true;
        }
        // No zone id ("%25eth0"): it names one of the host's interfaces, which is not the command's to pick.
        auto a = parse_address(host);
        if (!a || !a->v6) return std::nullopt;
        t.literal = connected(*a);
    } else {
        const size_t colon = s.rfind(':');
        if (colon != std::string_view::npos) {
            host = s.substr(0, colon);
            port = s.substr(colon + 1);
            have_port = true;
        }
        if (host.find(':') != std::string_view::npos) return std::nullopt;  // an IPv6 literal needs brackets
        // An IPv4 address in any spelling a client library reads as one
        // ("2130706433", "0x7f.1", "127.1", "127.0.0.1.") is that address.
        if (auto a = parse_ipv4_any(host)) t.literal = *a;
    }
    if (have_port) {
        auto p = port_number(port);
        if (!p) return std::nullopt;
        t.port = *p;
    } else {
        if (default_port == 0) return std::nullopt;
        t.port = default_port;
    }
    if (t.literal) {
        t.host = to_string(*t.literal);
    } else {
        // A host ending in a number that is not an address (1.2.3.256,
        // 08.1, example.0x1g is a name; example.0x1 is not) is refused
        // rather than looked up as a name.
        if (ends_in_number(host)) return std::nullopt;
        t.host = normal_host(host);
        if (t.host.empty()) return std::nullopt;
    }
    return t;
}

Parse parse_http_head(std::string_view buf, HttpHead& out) {
    out = HttpHead{};
    const size_t end = buf.find("\r\n\r\n");
    if (end == std::string_view::npos) {
        if (buf.size() >= kMaxHeadBytes) return bad(out, 431, "the request head is larger than 16 KiB");
        return Parse::NeedMore;
    }
    if (end + 4 > kMaxHeadBytes) return bad(out, 431, "the request head is larger than 16 KiB");
    out.head_bytes = end + 4;
    std::string_view head = buf.substr(0, end);

    // The request line: METHOD SP TARGET SP VERSION.
    const size_t eol = head.find("\r\n");
    const std::string_view line = head.substr(0, eol);
    const size_t sp1 = line.find(' ');
    const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
    if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
        return bad(out, 400, "a malformed request line");
    out.method = std::string(line.substr(0, sp1));
    const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    out.version = std::string(line.substr(sp2 + 1));
    if (!token(out.method)) return bad(out, 400, "a malformed request line");
    if (out.version != "HTTP/1.1" && out.version != "HTTP/1.0") return bad(out, 505, "only HTTP/1.0 and HTTP/1.1");

    // The header lines.
    size_t at = eol == std::string_view::npos ? head.size() : eol + 2;
    while (at < head.size()) {
        size_t next = head.find("\r\n", at);
        if (next == std::string_view::npos) next = head.size();
        const std::string_view h = head.substr(at, next - at);
        at = next + 2;
        if (out.headers.size() == kMaxHeaderLines) return bad(out, 431, "more than 100 header lines");
        const size_t colon = h.find(':');
        // No obsolete line folding, no space before the colon (RFC 9112 5.1, 5.2).
        if (colon == std::string_view::npos || !token(h.substr(0, colon)))
            return bad(out, 400, "a malformed header line");
        const std::string_view value = trim(h.substr(colon + 1));
        if (value.find_first_of("\r\n") != std::string_view::npos) return bad(out, 400, "a malformed header line");
        out.headers.emplace_back(std::string(h.substr(0, colon)), std::string(value));
    }

    if (out.method == "CONNECT") {
        out.proto = Proto::Connect;
        auto t = parse_authority(target, 0);
        if (!t) return bad(out, 400, "CONNECT needs HOST:PORT");
        out.target = *t;
        return Parse::Done;
    }
    out.proto = Proto::Http;
    constexpr std::string_view kHttp = "http://";
    if (target.size() < kHttp.size() || !iequal(target.substr(0, kHttp.size()), kHttp)) {
        if (target.size() > 8 && iequal(target.substr(0, 8), "https://"))
            return bad(out, 400, "https:// is proxied with CONNECT, not as an absolute URI");
        return bad(out, 400, "a proxy request names its destination (http://HOST/PATH or CONNECT HOST:PORT)");
    }
    std::string_view rest = target.substr(kHttp.size());
    const size_t slash = rest.find_first_of("/?#");
    std::string_view authority = rest.substr(0, slash);
    if (authority.find('@') != std::string_view::npos) return bad(out, 400, "user information in the URI is refused");
    auto t = parse_authority(authority, 80);
    if (!t) return bad(out, 400, "the URI's host is not a host name or an address");
    out.target = *t;
    out.path = slash == std::string_view::npos ? "/" : std::string(rest.substr(slash));
    if (!out.path.empty() && out.path.front() != '/') out.path.insert(out.path.begin(), '/');
    if (auto hash = out.path.find('#'); hash != std::string::npos) out.path.resize(hash);

    // The body's framing: chunked wins over a length (RFC 9112 6.3); two
    // different lengths, or a coding other than chunked last, are refused
    // (a request the upstream might frame differently is a smuggling risk).
    std::optional<uint64_t> length;
    bool te = false;
    for (const auto& [k, v] : out.headers) {
        if (iequal(k, "Transfer-Encoding")) {
            std::string lowered;
            for (char c : v) lowered.push_back(ascii_lower(c));
            const std::string_view lv = lowered;
            const size_t last = lv.rfind(',');
            if (trim(last == std::string_view::npos ? lv : lv.substr(last + 1)) != "chunked")
                return bad(out, 501, "a transfer coding other than chunked");
            te = true;
        } else if (iequal(k, "Content-Length")) {
            if (v.empty() || v.size() > 18 || v.find_first_not_of("0123456789") != std::string::npos)
                return bad(out, 400, "a malformed Content-Length");
            const uint64_t n = std::stoull(v);
            if (length && *length != n) return bad(out, 400, "two different Content-Length values");
            length = n;
        }
    }
    if (te && length) return bad(out, 400, "both Transfer-Encoding and Content-Length");
    if (te) out.body = HttpHead::Body::Chunked;
    else if (length && *length > 0) out.body = HttpHead::Body::Length, out.body_length = *length;
    return Parse::Done;
}

std::string upstream_head(const HttpHead& h) {
    std::string out = fmt::format("{} {} {}\r\n", h.method, h.path, h.version);
    const bool v6 = h.target.literal && h.target.literal->v6;
    const std::string host = v6 ? "[" + h.target.host + "]" : h.target.host;
    out += h.target.port == 80 ? fmt::format("Host: {}\r\n", host) : fmt::format("Host: {}:{}\r\n", host, h.target.port);
    // Hop-by-hop headers go no further (RFC 9110 7.6.1), nor do the proxy's
    // own; every request is one exchange: the upstream closes after it.
    std::vector<std::string> hop = {"connection", "keep-alive", "proxy-connection", "proxy-authorization",
                                    "proxy-authenticate", "te", "upgrade", "host"};
    for (const auto& [k, v] : h.headers)
        if (iequal(k, "Connection"))
            for (size_t a = 0; a < v.size();) {
                size_t b = v.find(',', a);
                if (b == std::string::npos) b = v.size();
                std::string name;
                for (char c : trim(std::string_view(v).substr(a, b - a))) name.push_back(ascii_lower(c));
                if (!name.empty()) hop.push_back(name);
                a = b + 1;
            }
    for (const auto& [k, v] : h.headers) {
        std::string name;
        for (char c : k) name.push_back(ascii_lower(c));
        bool drop = false;
        for (const auto& x : hop) drop = drop || x == name;
        if (!drop) out += fmt::format("{}: {}\r\n", k, v);
    }
    out += "Connection: close\r\n\r\n";
    return out;
}

std::string http_response(int status, std::string_view reason_line) {
    std::string_view phrase = status == 403   ? "Forbidden"
                              : status == 400 ? "Bad Request"
                              : status == 405 ? "Method Not Allowed"
                              : status == 431 ? "Request Header Fields Too Large"
                              : status == 501 ? "Not Implemented"
                              : status == 502 ? "Bad Gateway"
                              : status == 505 ? "HTTP Version Not Supported"
                                              : "Error";
    const std::string body = fmt::format("dsh-confine: {}\n", reason_line);
    return fmt::format("HTTP/1.1 {} {}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
                       status, phrase, body.size(), body);
}

BodyScanner::BodyScanner(const HttpHead& h) {
    if (h.body == HttpHead::Body::Length) {
        st_ = St::Length;
        left_ = h.body_length;
        done_ = left_ == 0;
    } else if (h.body == HttpHead::Body::Chunked) {
        st_ = St::ChunkSize;
        done_ = false;
    }
}

std::optional<size_t> BodyScanner::consume(std::string_view bytes) {
    size_t i = 0;
    while (i < bytes.size() && !done_) {
        const char c = bytes[i];
        switch (st_) {
            case St::Length: {
                const uint64_t take = std::min<uint64_t>(left_, bytes.size() - i);
                i += static_cast<size_t>(take);
                left_ -= take;
                if (left_ == 0) st_ = St::Done, done_ = true;
                continue;
            }
            case St::ChunkSize: {
                int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
                if (d >= 0) {
                    if (++line_ > 16) return std::nullopt;
                    left_ = left_ * 16 + static_cast<uint64_t>(d);
                } else if (line_ == 0) {
                    return std::nullopt;
                } else if (c == ';' || c == ' ' || c == '\t') {
                    st_ = St::ChunkExt;
                } else if (c == '\r') {
                    st_ = St::ChunkSizeLf;
                } else {
                    return std::nullopt;
                }
                break;
            }
            case St::ChunkExt:
                if (++line_ > 4096) return std::nullopt;
                if (c == '\r') st_ = St::ChunkSizeLf;
                else if (c == '\n') return std::nullopt;
                break;
            case St::ChunkSizeLf:
                if (c != '\n') return std::nullopt;
                line_ = 0;
                st_ = left_ == 0 ? St::Trailer : St::ChunkData;
                break;
            case St::ChunkData: {
                const uint64_t take = std::min<uint64_t>(left_, bytes.size() - i);
                i += static_cast<size_t>(take);
                left_ -= take;
                if (left_ == 0) st_ = St::ChunkDataCr;
                continue;
            }
            case St::ChunkDataCr:
                if (c != '\r') return std::nullopt;
                st_ = St::ChunkDataLf;
                break;
            case St::ChunkDataLf:
                if (c != '\n') return std::nullopt;
                st_ = St::ChunkSize;
                break;
            case St::Trailer:
                // Trailer lines until an empty one.
                if (c == '\r') {
                    st_ = St::TrailerLf;
                } else {
                    if (c == '\n' || ++line_ > 4096) return std::nullopt;
                }
                break;
            case St::TrailerLf:
                if (c != '\n') return std::nullopt;
                if (line_ == 0) {
                    st_ = St::Done;
                    done_ = true;
                } else {
                    line_ = 0;
                    st_ = St::Trailer;
                }
                break;
            case St::Done: done_ = true; continue;
        }
        ++i;
    }
    return i;
}

Parse parse_socks5_greeting(std::string_view buf, size_t& consumed, bool& no_auth) {
    if (buf.size() < 2) return Parse::NeedMore;
    if (static_cast<uint8_t>(buf[0]) != 5) return Parse::Bad;
    const size_t n = static_cast<uint8_t>(buf[1]);
    if (n == 0) return Parse::Bad;
    if (buf.size() < 2 + n) return Parse::NeedMore;
    no_auth = false;
    for (size_t i = 0; i < n; ++i) no_auth = no_auth || buf[2 + i] == 0;
    consumed = 2 + n;
    return Parse::Done;
}

Parse parse_socks5_request(std::string_view buf, Socks5Request& out) {
    out = Socks5Request{};
    if (buf.size() < 4) return Parse::NeedMore;
    const auto b = [&](size_t i) { return static_cast<uint8_t>(buf[i]); };
    if (b(0) != 5 || b(2) != 0) return out.reply = 1, Parse::Bad;
    size_t addr_len = 0, at = 4;
    switch (b(3)) {
        case 1: addr_len = 4; break;
        case 4: addr_len = 16; break;
        case 3:
            if (buf.size() < 5) return Parse::NeedMore;
            addr_len = b(4);
            at = 5;
            if (addr_len == 0) return out.reply = 1, Parse::Bad;
            break;
        default: return out.reply = 8, Parse::Bad;
    }
    if (buf.size() < at + addr_len + 2) return Parse::NeedMore;
    if (b(1) != 1) return out.reply = 7, Parse::Bad;  // CONNECT only: no BIND, no UDP ASSOCIATE
    const uint16_t port = static_cast<uint16_t>(b(at + addr_len) << 8 | b(at + addr_len + 1));
    if (port == 0) return out.reply = 1, Parse::Bad;
    if (b(3) == 3) {
        // A name that is really an address literal is treated as one.
        auto t = parse_authority(std::string(buf.substr(at, addr_len)) + ":" + std::to_string(port), 0);
        if (!t) return out.reply = 1, Parse::Bad;
        out.target = *t;
    } else {
        Address a;
        a.v6 = b(3) == 4;
        std::memcpy(a.bytes.data(), buf.data() + at, addr_len);
        a = connected(a);
        out.target.literal = a;
        out.target.host = to_string(a);
        out.target.port = port;
    }
    out.bytes = at + addr_len + 2;
    return Parse::Done;
}

std::string socks5_reply(uint8_t code) {
    return std::string({'\x05', static_cast<char>(code), '\x00', '\x01', '\0', '\0', '\0', '\0', '\0', '\0'});
}

namespace {

// The class of one address by its own range (and the host's own list),
// not of what it carries.
AddressClass range_class(const Address& a0, const std::vector<Address>& own) {
    // The ranges first (the host's own list holds 127.0.0.1 too: it is
    // loopback), then the host's own public addresses.
    const Address a = connected(a0);
    struct Net {
        const char* net;
        unsigned prefix;
        AddressClass c;
    };
    // The metadata addresses come before the ranges that hold them.
    // 64:ff9b::/96 is not here: it is judged by the IPv4 it carries alone.
    static const Net kNets[] = {
        {"169.254.169.254", 32, AddressClass::Metadata}, {"fd00:ec2::254", 128, AddressClass::Metadata},
        {"0.0.0.0", 8, AddressClass::Unspecified},       {"127.0.0.0", 8, AddressClass::Loopback},
        {"10.0.0.0", 8, AddressClass::Private},          {"172.16.0.0", 12, AddressClass::Private},
        {"192.168.0.0", 16, AddressClass::Private},      {"100.64.0.0", 10, AddressClass::Private},
        {"169.254.0.0", 16, AddressClass::LinkLocal},    {"224.0.0.0", 4, AddressClass::Multicast},
        {"240.0.0.0", 4, AddressClass::Reserved},        {"192.0.0.0", 24, AddressClass::Reserved},
        {"198.18.0.0", 15, AddressClass::Reserved},      {"::", 128, AddressClass::Unspecified},
        {"::1", 128, AddressClass::Loopback},            {"::", 96, AddressClass::Reserved},
        {"::ffff:0:0:0", 96, AddressClass::Reserved},    {"64:ff9b:1::", 48, AddressClass::Reserved},
        {"fe80::", 10, AddressClass::LinkLocal},         {"fc00::", 7, AddressClass::Private},
        {"ff00::", 8, AddressClass::Multicast},          {"fec0::", 10, AddressClass::Reserved},
        {"2002::", 16, AddressClass::Reserved},          {"2001::", 32, AddressClass::Reserved},
        {"100::", 64, AddressClass::Reserved},
    };
    for (const auto& n : kNets)
        if (in_prefix(a, *parse_address(n.net), n.prefix)) return n.c;
    for (const auto& o : own)
        if (connected(o) == a) return AddressClass::HostOwn;
    return AddressClass::Public;
}

}  // namespace

AddressClass classify(const Address& a, const std::vector<Address>& own) {
    // What it carries first (the more telling answer), then its own range.
    for (const auto& v4 : embedded_v4(a))
        if (const AddressClass c = range_class(v4, own); c != AddressClass::Public) return c;
    return range_class(a, own);
}

Verdict decide(const Rules& rules, const Target& t, const Resolver& resolve, const std::vector<Address>& own) {
    Verdict v;
    auto refuse = [&](const char* reason, std::string rule, std::string detail) {
        v.allowed = false;
        v.reason = reason;
        v.rule = std::move(rule);
        v.detail = std::move(detail);
        v.connect_to.clear();
        return v;
    };
    const Rule* by_name = nullptr;
    if (t.literal) {
        v.resolved = {connected(*t.literal)};
        v.resolved_by = "literal";
    } else {
        if (const Rule* d = match_name(rules.deny, t.host, t.port)) return refuse("denied", d->text, {});
        by_name = match_name(rules.allow, t.host, t.port);
        if (!by_name) return refuse("not-listed", {}, {});
        Resolved r = resolve(t.host);
        v.resolved_by = r.by;
        if (!r.error.empty() || r.addresses.empty())
            return refuse("resolve-failed", {}, r.error.empty() ? "no address" : r.error);
        // One normal form for what the hosts file or DNS gave, as for a literal.
        for (const auto& a : r.addresses)
            if (const Address n = connected(a); std::find(v.resolved.begin(), v.resolved.end(), n) == v.resolved.end())
                v.resolved.push_back(n);
    }
    // Deny rules judge each address and every IPv4 address it carries.
    for (const auto& a : v.resolved) {
        if (const Rule* d = match_address(rules.deny, a, t.port)) return refuse("denied", d->text, to_string(a));
        for (const auto& v4 : embedded_v4(a))
            if (const Rule* d = match_address(rules.deny, v4, t.port))
                return refuse("denied", d->text, fmt::format("{} carries {}", to_string(a), to_string(v4)));
    }
    std::string first_refusal;
    const Rule* decided = by_name;
    for (const auto& a : v.resolved) {
        // An IPv4 address it carries is listed or public, or the address is refused, listed or not.
        std::string carried;
        for (const auto& v4 : embedded_v4(a)) {
            if (match_address(rules.allow, v4, t.port)) continue;
            if (const AddressClass c = range_class(v4, own); c != AddressClass::Public) {
                carried = fmt::format("{} carries {}, which is {}", to_string(a), to_string(v4), to_string(c));
                break;
            }
        }
        if (!carried.empty()) {
            if (first_refusal.empty()) first_refusal = carried;
            continue;
        }
        const Rule* by_addr = match_address(rules.allow, a, t.port);
        const AddressClass c = range_class(a, own);
        if (by_addr) {
            // A listed address is allowed whatever its own class.
            if (!decided) decided = by_addr;
            v.connect_to.push_back(a);
        } else if (c == AddressClass::Loopback && by_name && names_localhost(*by_name)) {
            // allow=localhost[:PORT] names the host's loopback itself.
            v.connect_to.push_back(a);
        } else if (c != AddressClass::Public) {
            if (first_refusal.empty()) first_refusal = fmt::format("{} is {}", to_string(a), to_string(c));
        } else if (by_name) {
            v.connect_to.push_back(a);
        }
    }
    if (v.connect_to.empty()) {
        if (!first_refusal.empty()) return refuse("private-address", by_name ? by_name->text : std::string(), first_refusal);
        return refuse("not-listed", {}, {});
    }
    v.allowed = true;
    v.reason = "listed";
    v.rule = decided ? decided->text : std::string();
    v.detail = first_refusal.empty() ? std::string() : "skipped: " + first_refusal;
    return v;
}

std::vector<Address> hosts_lookup(std::string_view text, std::string_view name) {
    std::vector<Address> out;
    for_each_line(text, [&](std::string_view line) {
        if (const size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
        std::vector<std::string_view> words;
        size_t i = 0;
        while (i < line.size()) {
            while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
            size_t j = i;
            while (j < line.size() && line[j] != ' ' && line[j] != '\t' && line[j] != '\r') ++j;
            if (j > i) words.push_back(line.substr(i, j - i));
            i = j;
        }
        if (words.size() < 2) return true;
        auto a = parse_address(words[0]);
        if (!a) return true;
        for (size_t k = 1; k < words.size(); ++k)
            if (normal_host(words[k]) == name) {
                if (std::find(out.begin(), out.end(), *a) == out.end()) out.push_back(*a);
                break;
            }
        return true;
    });
    return out;
}

nlohmann::ordered_json network_record(Proto p, const Target& t, const Verdict& v) {
    nlohmann::ordered_json j;
    j["type"] = "network";
    j["version"] = 1;
    j["proto"] = to_string(p);
    j["host"] = t.host;
    j["port"] = t.port;
    if (!v.connect_to.empty()) j["address"] = to_string(v.connect_to.front());
    else if (!v.resolved.empty()) j["address"] = to_string(v.resolved.front());
    j["verdict"] = v.allowed ? "allowed" : "refused";
    j["reason"] = v.reason;
    if (!v.rule.empty()) j["rule"] = v.rule;
    if (!v.detail.empty()) j["detail"] = v.detail;
    if (!v.resolved_by.empty()) j["resolvedBy"] = v.resolved_by;
    return j;
}

}  // namespace dsh::net
