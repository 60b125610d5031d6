// The allow-list proxy's I/O (issue 19): accepts on the listener the
// command's namespace made (docs/DECISIONS.md, "The allow-list"), reads each
// request with the pure core (net_proxy.hpp), resolves, decides, connects out
// and copies bytes both ways. One thread, epoll, non-blocking sockets; the
// supervise loop polls fd() and calls step() when it is readable. DNS is the
// one thing that blocks: it runs on a few resolver threads of the loop's own
// (at most kResolverThreads, started when first needed), whose answers come
// back through an eventfd in the same epoll set, so a slow name never holds
// up another connection.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "net_proxy.hpp"

namespace dsh::net {

struct ProxyOptions {
    Rules rules;
    std::vector<Address> own;   // the host's own addresses (own_addresses())
    std::string hosts_file;     // DSH_CONFINE_NET_HOSTS: consulted before /etc/hosts; empty: none
    std::function<void(const nlohmann::ordered_json&)> record;  // each network record, as it is decided
    // DNS, after the hosts files missed: run on a resolver thread, never on
    // the loop. Null: resolve_dns (res_nquery). A test sets a slow one.
    Resolver dns;
    // The most client connections open at once; 0: connection_bound().
    size_t max_connections = 0;
};

constexpr size_t kResolverThreads = 4;

// The bound on the proxy's connections (issue 38): kMaxConnections, fewer
// when the open-file soft limit is low, since each connection holds two
// descriptors (the client's and the upstream's) and dsh-confine keeps
// kFdReserve for itself: (limit - 64) / 2, so 480 under the usual 1024.
constexpr size_t kMaxConnections = 1024;
constexpr size_t kMinConnections = 16;
constexpr size_t kFdReserve = 64;
// How long a listener that hit EMFILE/ENFILE with nothing to shed rests.
constexpr long kPauseMs = 100;
size_t connection_bound();

class ProxyLoop {
public:
    // Takes `listen_fd` (a listening TCP socket) and owns it from here on.
    ProxyLoop(int listen_fd, ProxyOptions opts);
    ~ProxyLoop();
    ProxyLoop(const ProxyLoop&) = delete;
    ProxyLoop& operator=(const ProxyLoop&) = delete;

    int fd() const noexcept;          // the epoll fd: readable when step() has work
    void step();                      // handles what is ready; never blocks on a socket
    size_t connections() const noexcept;

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

// Resolving, outside the namespace: the hook file, /etc/hosts, then DNS
// (res_nquery: the static binary cannot use getaddrinfo's NSS). Blocking.
Resolved resolve_name(const std::string& name, const std::string& hosts_file);
// Its two halves: the hosts files (cheap: nothing when the name is in
// neither) and DNS (blocking, for as long as the nameservers take).
Resolved resolve_hosts(const std::string& name, const std::string& hosts_file);
Resolved resolve_dns(const std::string& name);
// The A (or AAAA) records of a DNS answer, in order; nothing when malformed.
std::vector<Address> dns_answers(std::string_view msg, bool v6);
// The host's interface addresses (getifaddrs).
std::vector<Address> own_addresses();

}  // namespace dsh::net
