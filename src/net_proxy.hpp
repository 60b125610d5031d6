// The allow-list proxy's core (issue 19): what a client asked for (HTTP
// CONNECT, absolute-URI HTTP forward, SOCKS5), and whether it may have it.
// Pure: no sockets, no resolving of its own (the resolver is passed in), so
// every rule is unit-tested without a network. The loop that accepts,
// resolves and connects is built on top (docs/DECISIONS.md, "The allow-list").
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "net_allow.hpp"

namespace dsh::net {

// Bounds on what a client may send before its request is known.
inline constexpr size_t kMaxHeadBytes = 16 * 1024;
inline constexpr size_t kMaxHeaderLines = 100;

enum class Proto { Connect, Http, Socks5 };
std::string_view to_string(Proto p) noexcept;

// Where a client asked to go: a host name (normal_host) or an address
// literal, and a port.
struct Target {
    std::string host;                 // the name, or the literal as printed by to_string
    std::optional<Address> literal;   // set when the client named an address
    uint16_t port = 0;
};
// "host:port", "[v6]:port", with the default port when `default_port` is
// non-zero and none is written. nullopt: not an authority we accept.
std::optional<Target> parse_authority(std::string_view s, uint16_t default_port);

enum class Parse { NeedMore, Done, Bad };

// An HTTP request head, as a proxy reads it.
struct HttpHead {
    Proto proto = Proto::Http;   // Connect or Http
    std::string method;
    Target target;
    std::string path;            // Http: the origin-form target to send upstream ("/x?y")
    std::string version;         // "HTTP/1.1" or "HTTP/1.0"
    std::vector<std::pair<std::string, std::string>> headers;  // as sent, in order
    size_t head_bytes = 0;       // through the blank line
    // The body that follows (Http only): Content-Length bytes, chunked, or none.
    enum class Body { None, Length, Chunked } body = Body::None;
    uint64_t body_length = 0;
    // Bad: the status to answer (400, 405, 431, 501) and why.
    int status = 0;
    std::string error;
};
// Parses one request head from the front of `buf`.
Parse parse_http_head(std::string_view buf, HttpHead& out);
// The head to send upstream for an Http request: origin-form request line,
// Host set from the request target (a Host header the client sent is
// replaced: RFC 9112 3.2.2), hop-by-hop and Proxy-* headers dropped.
std::string upstream_head(const HttpHead& h);
// The proxy's own answer: a status line, Connection: close, a one-line body.
std::string http_response(int status, std::string_view reason_line);

// Where a request body ends. Feed it the bytes after the head, in pieces;
// `consume` returns how many of them belong to the body (the rest is the
// client's next request) and sets done when the body is complete.
class BodyScanner {
public:
    BodyScanner() = default;
    explicit BodyScanner(const HttpHead& h);
    // Bad framing (a chunk size that is not hex, too long a chunk line):
    // returns nullopt, and the connection is closed.
    std::optional<size_t> consume(std::string_view bytes);
    bool done() const noexcept { return done_; }

private:
    enum class St { Length, ChunkSize, ChunkExt, ChunkSizeLf, ChunkData, ChunkDataCr, ChunkDataLf, Trailer, TrailerLf, Done };
    St st_ = St::Done;
    uint64_t left_ = 0;
    size_t line_ = 0;       // bytes of the current size or trailer line
    bool done_ = true;
};

// SOCKS5 (RFC 1928), no authentication, CONNECT only.
// The greeting: VER NMETHODS METHODS. `no_auth` says whether method 0 was offered.
Parse parse_socks5_greeting(std::string_view buf, size_t& consumed, bool& no_auth);
struct Socks5Request {
    Target target;
    size_t bytes = 0;
    uint8_t reply = 0;  // Bad: the reply code to send (7 command not supported, 8 address type, 1 general)
};
Parse parse_socks5_request(std::string_view buf, Socks5Request& out);
// A reply: VER REP RSV ATYP=1 0.0.0.0:0 (the bound address is not the client's business).
std::string socks5_reply(uint8_t code);

// What an address is, for the destination check.
enum class AddressClass { Public, Loopback, Unspecified, LinkLocal, Private, Metadata, Multicast, Reserved, HostOwn };
std::string_view to_string(AddressClass c) noexcept;
// `own`: the host's own addresses (getifaddrs when the proxy starts).
AddressClass classify(const Address& a, const std::vector<Address>& own);

// What resolving a name gave.
struct Resolved {
    std::vector<Address> addresses;
    std::string by;     // "hosts-file" or "dns"
    std::string error;  // empty on success
};
using Resolver = std::function<Resolved(const std::string& name)>;

// The decision, with what the network record says.
struct Verdict {
    bool allowed = false;
    // "listed", "denied", "not-listed", "private-address", "resolve-failed"
    std::string reason;
    std::string rule;                  // the entry that decided; empty for not-listed and resolve failures
    std::string detail;                // the address and its class, or the resolver's error
    std::string resolved_by;           // "literal", "hosts-file", "dns"; empty when nothing was resolved
    std::vector<Address> connect_to;   // allowed: the checked addresses, in order (never resolved again)
    std::vector<Address> resolved;     // every address the name gave
};

// Deny rules win; a name is resolved only when an allow rule names it (an
// unlisted name is never looked up: no DNS exfiltration through the proxy);
// an address that is not public is dropped unless an address rule lists it.
Verdict decide(const Rules& rules, const Target& t, const Resolver& resolve, const std::vector<Address>& own);

// The addresses hosts(5) text gives `name` (normal_host), in file order.
std::vector<Address> hosts_lookup(std::string_view text, std::string_view name);

// The network record (docs/DECISIONS.md): one per decision.
// Ordered as written ("type" first), like every record on the report.
nlohmann::ordered_json network_record(Proto p, const Target& t, const Verdict& v);

}  // namespace dsh::net
