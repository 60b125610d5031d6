#include "net_proxy_loop.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <list>
#include <fcntl.h>
#include <ifaddrs.h>
#include <map>
#include <mutex>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <resolv.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/timerfd.h>
#include <sys/socket.h>
#include <system_error>
#include <thread>
#include <unistd.h>

#include <fmt/format.h>

namespace dsh::net {

namespace {

constexpr size_t kBuffer = 64 * 1024;  // per direction: the reader pauses when its peer's is full

std::string read_file(const std::string& path) {
    std::string out;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return out;
    char buf[8192];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0 && out.size() < (1u << 20)) out.append(buf, static_cast<size_t>(n));
    ::close(fd);
    return out;
}

sockaddr_storage to_sockaddr(const Address& a, uint16_t port, socklen_t& len) {
    sockaddr_storage ss{};
    if (a.v6) {
        auto* s6 = reinterpret_cast<sockaddr_in6*>(&ss);
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons(port);
        std::memcpy(&s6->sin6_addr, a.bytes.data(), 16);
        len = sizeof(sockaddr_in6);
    } else {
        auto* s4 = reinterpret_cast<sockaddr_in*>(&ss);
        s4->sin_family = AF_INET;
        s4->sin_port = htons(port);
        std::memcpy(&s4->sin_addr, a.bytes.data(), 4);
        len = sizeof(sockaddr_in);
    }
    return ss;
}

}  // namespace

std::vector<Address> dns_answers(std::string_view msg, bool v6) {
    std::vector<Address> out;
    const auto* p = reinterpret_cast<const uint8_t*>(msg.data());
    const size_t n = msg.size();
    if (n < 12) return out;
    const unsigned qd = p[4] << 8 | p[5], an = p[6] << 8 | p[7];
    size_t at = 12;
    auto skip_name = [&]() {
        for (int hops = 0; hops < 128; ++hops) {
            if (at >= n) return false;
            const uint8_t l = p[at];
            if (l == 0) return ++at, true;
            if ((l & 0xc0) == 0xc0) return at += 2, at <= n;
            if (l & 0xc0) return false;
            at += 1 + l;
        }
        return false;
    };
    for (unsigned i = 0; i < qd; ++i) {
        if (!skip_name() || at + 4 > n) return {};
        at += 4;
    }
    for (unsigned i = 0; i < an; ++i) {
        if (!skip_name() || at + 10 > n) return out;
        const unsigned type = p[at] << 8 | p[at + 1], cls = p[at + 2] << 8 | p[at + 3];
        const size_t rdlen = static_cast<size_t>(p[at + 8] << 8 | p[at + 9]);
        at += 10;
        if (at + rdlen > n) return out;
        if (cls == 1 && !v6 && type == 1 && rdlen == 4) {
            Address a;
            std::memcpy(a.bytes.data(), p + at, 4);
            out.push_back(a);
        } else if (cls == 1 && v6 && type == 28 && rdlen == 16) {
            Address a;
            a.v6 = true;
            std::memcpy(a.bytes.data(), p + at, 16);
            out.push_back(a);
        }
        at += rdlen;
    }
    return out;
}

Resolved resolve_hosts(const std::string& name, const std::string& hosts_file) {
    Resolved r;
    if (!hosts_file.empty()) {
        r.addresses = hosts_lookup(read_file(hosts_file), name);
        if (!r.addresses.empty()) return r.by = "hosts-file", r;
    }
    r.addresses = hosts_lookup(read_file("/etc/hosts"), name);
    if (!r.addresses.empty()) r.by = "hosts-file";
    return r;
}

Resolved resolve_name(const std::string& name, const std::string& hosts_file) {
    Resolved r = resolve_hosts(name, hosts_file);
    return r.addresses.empty() ? resolve_dns(name) : r;
}

Resolved resolve_dns(const std::string& name) {
    Resolved r;
    r.by = "dns";
    struct __res_state st {};
    if (::res_ninit(&st) != 0) return r.error = "cannot read the resolver configuration", r;
    unsigned char buf[4096];
    for (bool v6 : {false, true}) {
        const int len = ::res_nquery(&st, name.c_str(), ns_c_in, v6 ? ns_t_aaaa : ns_t_a, buf, sizeof buf);
        if (len > 0)
            for (const auto& a : dns_answers(std::string_view(reinterpret_cast<const char*>(buf), static_cast<size_t>(len)), v6))
                r.addresses.push_back(a);
    }
    ::res_nclose(&st);
    if (r.addresses.empty()) r.error = "the name has no address (DNS)";
    return r;
}

std::vector<Address> own_addresses() {
    std::vector<Address> out;
    ifaddrs* list = nullptr;
    if (::getifaddrs(&list) != 0) return out;
    for (ifaddrs* i = list; i; i = i->ifa_next) {
        if (!i->ifa_addr) continue;
        Address a;
        if (i->ifa_addr->sa_family == AF_INET) {
            std::memcpy(a.bytes.data(), &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, 4);
        } else if (i->ifa_addr->sa_family == AF_INET6) {
            a.v6 = true;
            std::memcpy(a.bytes.data(), &reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr, 16);
        } else {
            continue;
        }
        out.push_back(a);
    }
    ::freeifaddrs(list);
    return out;
}

// The resolver threads and their queues. Shared with the threads, which
// are detached: the loop's end never waits for a nameserver (a thread in
// the middle of a query finishes it, finds the pool stopped and ends; its
// answer goes nowhere).
struct ResolverPool {
    struct Job {
        uint64_t id;
        std::string name;
    };
    struct Done {
        uint64_t id;
        std::string name;
        Resolved r;
    };
    Resolver dns;
    int efd = -1;  // eventfd: readable when `done` has answers
    std::mutex m;
    std::condition_variable cv;
    std::deque<Job> jobs;
    std::vector<Done> done;
    size_t threads = 0, idle = 0;
    bool stop = false;

    ~ResolverPool() {
        if (efd >= 0) ::close(efd);
    }

    static void run(std::shared_ptr<ResolverPool> self) {
        std::unique_lock<std::mutex> lock(self->m);
        for (;;) {
            ++self->idle;
            self->cv.wait(lock, [&] { return self->stop || !self->jobs.empty(); });
            --self->idle;
            if (self->stop) return;
            Job j = std::move(self->jobs.front());
            self->jobs.pop_front();
            lock.unlock();
            Resolved r = self->dns(j.name);
            lock.lock();
            if (self->stop) return;
            self->done.push_back({j.id, std::move(j.name), std::move(r)});
            const uint64_t one = 1;
            (void)!::write(self->efd, &one, sizeof one);
        }
    }

    // From the loop: queues the name, starting a thread when none is idle
    // (up to kResolverThreads; past that the job waits its turn).
    static void post(const std::shared_ptr<ResolverPool>& self, uint64_t id, const std::string& name) {
        std::lock_guard<std::mutex> lock(self->m);
        self->jobs.push_back({id, name});
        if (self->idle < self->jobs.size() && self->threads < kResolverThreads) {
            try {
                std::thread(run, self).detach();
                ++self->threads;
            } catch (const std::system_error&) {
                // No thread: the ones running take it in turn (there is at
                // least one unless none could ever start; then it waits).
                if (self->threads == 0) {
                    self->jobs.pop_back();
                    self->done.push_back({id, name, Resolved{{}, "dns", "cannot start a resolver thread"}});
                    const uint64_t one = 1;
                    (void)!::write(self->efd, &one, sizeof one);
                    return;
                }
            }
        }
        self->cv.notify_one();
    }

    // From the loop: the answers so far.
    std::vector<Done> take() {
        uint64_t n;
        (void)!::read(efd, &n, sizeof n);
        std::lock_guard<std::mutex> lock(m);
        return std::move(done);
    }

    void shut() {
        {
            std::lock_guard<std::mutex> lock(m);
            stop = true;
            jobs.clear();
        }
        cv.notify_all();
    }
};

struct ProxyLoop::Impl {
    enum class St { Head, Socks, Resolving, Connecting, Piping };
    struct Conn {
        uint64_t id = 0;
        int client = -1, up = -1;
        St st = St::Head;
        Proto proto = Proto::Http;
        bool greeted = false;                 // SOCKS: the greeting is answered
        std::string cin, to_client, to_up;
        HttpHead head;
        Target target;
        Verdict verdict;
        size_t cand = 0;
        BodyScanner body;                     // Http: where the forwarded request ends
        bool client_eof = false, up_eof = false, up_shut = false, close_after_flush = false;
        uint32_t client_ev = 0, up_ev = 0;
        Resolved dns;                         // Resolving: DNS's answer for target.host, once it came
        std::list<uint64_t>::iterator lru;    // its place in `idle_order`
    };

    int listener = -1;
    int ep = -1;
    ProxyOptions opts;
    uint64_t next_id = 1;
    std::map<uint64_t, std::unique_ptr<Conn>> conns;
    // The connections, the longest idle first: each moves to the back when
    // it has an event. At the bound, the front one is shed.
    std::list<uint64_t> idle_order;
    size_t bound = 0;
    int timer = -1;       // timerfd: wakes a listener paused on EMFILE
    bool paused = false;  // the listener is out of the epoll set's interest
    std::shared_ptr<ResolverPool> pool;  // made on the first name the hosts files do not have

    static constexpr uint32_t kUnwatched = 0xffffffffu;
    static constexpr uint64_t kPoolKey = 1;  // id 0's upstream side: no connection has id 0
    static constexpr uint64_t kTimerKey = ~uint64_t{0};  // no id gets that high
    static uint64_t key(uint64_t id, bool up) { return id << 1 | (up ? 1 : 0); }

    void watch(int fd, uint64_t k, uint32_t ev, uint32_t& current, bool add) {
        epoll_event e{};
        e.events = ev;
        e.data.u64 = k;
        ::epoll_ctl(ep, add ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, fd, &e);
        current = ev;
    }

    void destroy(Conn& c) {
        if (c.client >= 0) ::close(c.client);
        if (c.up >= 0) ::close(c.up);
        idle_order.erase(c.lru);
        conns.erase(c.id);
    }

    void touch(Conn& c) { idle_order.splice(idle_order.end(), idle_order, c.lru); }

    // Closes the longest idle connection; false when there is none.
    bool shed() {
        if (idle_order.empty()) return false;
        destroy(*conns.at(idle_order.front()));
        return true;
    }

    void set_listening(bool on) {
        epoll_event e{};
        e.events = on ? static_cast<uint32_t>(EPOLLIN) : 0u;
        e.data.u64 = 0;
        ::epoll_ctl(ep, EPOLL_CTL_MOD, listener, &e);
        paused = !on;
    }

    void emit(const nlohmann::ordered_json& j) {
        if (opts.record) opts.record(j);
    }

    void refuse(Conn& c, const std::string& http, const std::string& socks) {
        c.to_client += c.proto == Proto::Socks5 ? socks : http;
        c.close_after_flush = true;
    }

    // Accepts what is waiting, at most `bound` connections at once: at the
    // bound, and when descriptors run out (EMFILE, ENFILE), the longest idle
    // connection makes room. With none to shed the listener is paused for
    // kPauseMs: a listener left readable that cannot be accepted from would
    // wake the loop again at once, for ever (a busy loop).
    void accept_all() {
        for (;;) {
            const int fd = ::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0) {
                if (errno == EINTR || errno == ECONNABORTED) continue;
                if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                    // accept fails so before it looks at the queue: shed only for a client that waits.
                    pollfd p{listener, POLLIN, 0};
                    if (::poll(&p, 1, 0) != 1) return;
                    if (shed()) continue;
                    set_listening(false);
                    itimerspec t{};
                    t.it_value.tv_nsec = kPauseMs * 1000000L;
                    ::timerfd_settime(timer, 0, &t, nullptr);
                }
                return;  // EAGAIN, paused, or an error the next readiness retries
            }
            if (conns.size() >= bound) shed();
            auto c = std::make_unique<Conn>();
            c->id = next_id++;
            c->client = fd;
            c->lru = idle_order.insert(idle_order.end(), c->id);
            watch(fd, key(c->id, false), EPOLLIN, c->client_ev, true);
            conns.emplace(c->id, std::move(c));
        }
    }

    void timer_fired() {
        uint64_t n;
        while (::read(timer, &n, sizeof n) > 0) {
        }
        if (paused) set_listening(true);
    }

    void start_connect(Conn& c) {
        while (c.cand < c.verdict.connect_to.size()) {
            const Address& a = c.verdict.connect_to[c.cand];
            const int fd = ::socket(a.v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
            if (fd < 0) {
                ++c.cand;
                continue;
            }
            socklen_t len = 0;
            const sockaddr_storage ss = to_sockaddr(a, c.target.port, len);
            if (::connect(fd, reinterpret_cast<const sockaddr*>(&ss), len) == 0 || errno == EINPROGRESS) {
                c.up = fd;
                c.st = St::Connecting;
                watch(fd, key(c.id, true), EPOLLOUT, c.up_ev, true);
                return;
            }
            ::close(fd);
            ++c.cand;
        }
        connect_failed(c, "no address could be connected to");
    }

    void connect_failed(Conn& c, const std::string& why) {
        nlohmann::ordered_json j = network_record(c.proto, c.target, c.verdict);
        j["verdict"] = "failed";
        j["reason"] = "connect-failed";
        j["detail"] = why;
        emit(j);
        refuse(c, http_response(502, fmt::format("cannot connect to {}:{}: {}", c.target.host, c.target.port, why)),
               socks5_reply(5));
    }

    void connected(Conn& c) {
        const int one = 1;
        ::setsockopt(c.up, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        nlohmann::ordered_json j = network_record(c.proto, c.target, c.verdict);
        j["address"] = to_string(c.verdict.connect_to[c.cand]);
        emit(j);
        c.st = St::Piping;
        if (c.proto == Proto::Connect) {
            c.to_client += "HTTP/1.1 200 Connection established\r\n\r\n";
            c.to_up += c.cin;
        } else if (c.proto == Proto::Socks5) {
            c.to_client += socks5_reply(0);
            c.to_up += c.cin;
        } else {
            c.to_up += upstream_head(c.head);
            c.body = BodyScanner(c.head);
            forward_body(c, c.cin);
        }
        c.cin.clear();
    }

    // Http: only the first request's body goes upstream; what follows it is
    // never sent anywhere (each forwarded request is one exchange: the
    // client asks again on a new connection, decided again).
    bool forward_body(Conn& c, std::string_view bytes) {
        if (c.body.done()) return true;
        auto n = c.body.consume(bytes);
        if (!n) return false;
        c.to_up.append(bytes.data(), *n);
        return true;
    }

    // The hosts files are read here; a name they do not have goes to a
    // resolver thread (DNS would block the loop), and the decision is made
    // again, the same pure decide(), with its answer (dns_answered).
    void decide_now(Conn& c) {
        bool wants_dns = false;
        c.verdict = decide(opts.rules, c.target,
                           [&](const std::string& n) {
                               Resolved r = resolve_hosts(n, opts.hosts_file);
                               if (r.addresses.empty()) wants_dns = true;
                               return r;
                           },
                           opts.own);
        if (wants_dns) {
            if (!pool) {
                pool = std::make_shared<ResolverPool>();
                pool->dns = opts.dns ? opts.dns : Resolver(resolve_dns);
                pool->efd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
                epoll_event e{};
                e.events = EPOLLIN;
                e.data.u64 = kPoolKey;
                ::epoll_ctl(ep, EPOLL_CTL_ADD, pool->efd, &e);
            }
            c.st = St::Resolving;
            ResolverPool::post(pool, c.id, c.target.host);
            return;
        }
        decided(c);
    }

    void dns_answered() {
        for (auto& d : pool->take()) {
            auto it = conns.find(d.id);
            if (it == conns.end()) continue;  // the client went away meanwhile
            Conn& c = *it->second;
            if (c.st != St::Resolving) continue;
            touch(c);
            c.dns = std::move(d.r);
            c.verdict = decide(opts.rules, c.target,
                               [&](const std::string& n) {
                                   Resolved r = resolve_hosts(n, opts.hosts_file);
                                   if (!r.addresses.empty()) return r;
                                   if (n == d.name) return c.dns;
                                   return Resolved{{}, "dns", "the name was not resolved"};
                               },
                               opts.own);
            decided(c);
            if (conns.count(d.id)) settle(c);
        }
    }

    void decided(Conn& c) {
        if (!c.verdict.allowed) {
            emit(network_record(c.proto, c.target, c.verdict));
            const std::string why = c.verdict.detail.empty() ? c.verdict.reason : c.verdict.reason + ": " + c.verdict.detail;
            refuse(c,
                   http_response(403, fmt::format("{}:{} is refused by the allow-list ({})", c.target.host,
                                                  c.target.port, why)),
                   socks5_reply(2));
            return;
        }
        start_connect(c);
    }

    void parse_client(Conn& c) {
        if (c.st == St::Head && !c.cin.empty() && static_cast<uint8_t>(c.cin[0]) == 5 && !c.greeted) {
            c.proto = Proto::Socks5;
            size_t used = 0;
            bool no_auth = false;
            const Parse p = parse_socks5_greeting(c.cin, used, no_auth);
            if (p == Parse::NeedMore) return;
            if (p == Parse::Bad || !no_auth) {
                c.to_client += std::string("\x05\xff", 2);
                c.close_after_flush = true;
                return;
            }
            c.to_client += std::string("\x05\x00", 2);
            c.cin.erase(0, used);
            c.greeted = true;
            c.st = St::Socks;
        }
        if (c.st == St::Socks) {
            Socks5Request rq;
            const Parse p = parse_socks5_request(c.cin, rq);
            if (p == Parse::NeedMore) return;
            if (p == Parse::Bad) return refuse(c, {}, socks5_reply(rq.reply));
            c.cin.erase(0, rq.bytes);
            c.target = rq.target;
            return decide_now(c);
        }
        if (c.st == St::Head) {
            const Parse p = parse_http_head(c.cin, c.head);
            if (p == Parse::NeedMore) return;
            if (p == Parse::Bad) {
                nlohmann::ordered_json j;
                j["type"] = "network";
                j["version"] = 1;
                j["proto"] = "http";
                j["verdict"] = "refused";
                j["reason"] = "bad-request";
                j["detail"] = c.head.error;
                emit(j);
                return refuse(c, http_response(c.head.status, c.head.error), {});
            }
            c.proto = c.head.proto;
            c.target = c.head.target;
            c.cin.erase(0, c.head.head_bytes);
            return decide_now(c);
        }
    }

    // Reads what is there (up to `cap` more bytes unless `all`); false at EOF or error.
    static bool drain(int fd, std::string& into, size_t cap, bool all) {
        char buf[16384];
        while (all || into.size() < cap) {
            const ssize_t n = ::read(fd, buf, sizeof buf);
            if (n > 0) {
                into.append(buf, static_cast<size_t>(n));
                continue;
            }
            if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
            return false;
        }
        return true;
    }

    static bool flush(int fd, std::string& from) {
        while (!from.empty()) {
            const ssize_t n = ::send(fd, from.data(), from.size(), MSG_NOSIGNAL);
            if (n > 0) {
                from.erase(0, static_cast<size_t>(n));
                continue;
            }
            return n < 0 && (errno == EAGAIN || errno == EINTR);
        }
        return true;
    }

    void on_client(Conn& c, uint32_t ev) {
        // Gone both ways: nothing more can reach it, and a HUP would be reported on every wait.
        if (ev & (EPOLLERR | EPOLLHUP)) return destroy(c);
        if (ev & EPOLLOUT && !flush(c.client, c.to_client)) return destroy(c);
        if (ev & (EPOLLIN | EPOLLHUP)) {
            if (c.st == St::Piping) {
                std::string got;
                const bool open = drain(c.client, got, kBuffer - std::min(kBuffer, c.to_up.size()), false);
                if (c.proto == Proto::Http) {
                    if (!forward_body(c, got)) return destroy(c);
                } else {
                    c.to_up += got;
                }
                if (!open) c.client_eof = true;
            } else if (c.st != St::Connecting && c.st != St::Resolving && !c.close_after_flush) {
                if (!drain(c.client, c.cin, kMaxHeadBytes + 1024, false)) c.client_eof = true;
                parse_client(c);
                if (c.client_eof && !c.close_after_flush && c.st != St::Connecting && c.st != St::Resolving &&
                    c.st != St::Piping)
                    return destroy(c);  // gone before its request was complete
            } else if (ev & EPOLLHUP) {
                return destroy(c);
            }
        }
        settle(c);
    }

    void on_up(Conn& c, uint32_t ev) {
        if (c.st == St::Connecting) {
            int err = 0;
            socklen_t len = sizeof err;
            ::getsockopt(c.up, SOL_SOCKET, SO_ERROR, &err, &len);
            if (err != 0 || (ev & EPOLLERR)) {
                ::epoll_ctl(ep, EPOLL_CTL_DEL, c.up, nullptr);
                ::close(c.up);
                c.up = -1;
                ++c.cand;
                if (c.cand < c.verdict.connect_to.size()) start_connect(c);
                else connect_failed(c, std::strerror(err ? err : ECONNREFUSED));
                return settle(c);
            }
            connected(c);
            return settle(c);
        }
        if (ev & EPOLLERR) return destroy(c);
        if (ev & EPOLLOUT && !flush(c.up, c.to_up)) return destroy(c);
        if (ev & (EPOLLIN | EPOLLHUP))
            if (!drain(c.up, c.to_client, kBuffer, (ev & EPOLLHUP) != 0)) {
                // Finished: unwatched, so that its HUP is not reported while the client catches up.
                c.up_eof = true;
                c.to_up.clear();
                ::epoll_ctl(ep, EPOLL_CTL_DEL, c.up, nullptr);
                c.up_ev = kUnwatched;
            }
        settle(c);
    }

    // Flushes what can be, closes what is finished, and sets each fd's interest.
    void settle(Conn& c) {
        if (!flush(c.client, c.to_client)) return destroy(c);
        if (c.close_after_flush && c.to_client.empty()) return destroy(c);
        if (c.st == St::Piping) {
            if (!c.up_eof && !flush(c.up, c.to_up)) return destroy(c);
            if (c.up_eof && c.to_client.empty()) return destroy(c);
            if (c.client_eof && c.to_up.empty() && !c.up_shut) {
                ::shutdown(c.up, SHUT_WR);
                c.up_shut = true;
            }
        }
        uint32_t cev = 0, uev = 0;
        if (!c.to_client.empty()) cev |= EPOLLOUT;
        if (!c.client_eof && !c.close_after_flush &&
            (c.st == St::Head || c.st == St::Socks || (c.st == St::Piping && c.to_up.size() < kBuffer)))
            cev |= EPOLLIN;
        if (c.st == St::Connecting) uev = EPOLLOUT;
        if (c.st == St::Piping) {
            if (!c.to_up.empty()) uev |= EPOLLOUT;
            if (!c.up_eof && c.to_client.size() < kBuffer) uev |= EPOLLIN;
        }
        if (cev != c.client_ev) watch(c.client, key(c.id, false), cev, c.client_ev, false);
        if (c.up >= 0 && c.up_ev != kUnwatched && uev != c.up_ev) watch(c.up, key(c.id, true), uev, c.up_ev, false);
    }
};

size_t connection_bound() {
    rlimit rl{};
    if (::getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return kMaxConnections;
    const rlim_t spare = rl.rlim_cur > kFdReserve ? (rl.rlim_cur - kFdReserve) / 2 : 0;
    return std::clamp<size_t>(static_cast<size_t>(std::min<rlim_t>(spare, kMaxConnections)), kMinConnections,
                              kMaxConnections);
}

ProxyLoop::ProxyLoop(int listen_fd, ProxyOptions opts) : impl_(std::make_unique<Impl>()) {
    impl_->listener = listen_fd;
    impl_->opts = std::move(opts);
    impl_->bound = impl_->opts.max_connections ? impl_->opts.max_connections : connection_bound();
    impl_->ep = ::epoll_create1(EPOLL_CLOEXEC);
    impl_->timer = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    {
        epoll_event t{};
        t.events = EPOLLIN;
        t.data.u64 = Impl::kTimerKey;
        ::epoll_ctl(impl_->ep, EPOLL_CTL_ADD, impl_->timer, &t);
    }
    ::fcntl(listen_fd, F_SETFL, ::fcntl(listen_fd, F_GETFL) | O_NONBLOCK);
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.u64 = 0;  // id 0: the listener
    ::epoll_ctl(impl_->ep, EPOLL_CTL_ADD, listen_fd, &e);
}

ProxyLoop::~ProxyLoop() {
    if (impl_->pool) impl_->pool->shut();
    while (!impl_->conns.empty()) impl_->destroy(*impl_->conns.begin()->second);
    if (impl_->listener >= 0) ::close(impl_->listener);
    if (impl_->ep >= 0) ::close(impl_->ep);
    if (impl_->timer >= 0) ::close(impl_->timer);
}

int ProxyLoop::fd() const noexcept { return impl_->ep; }
size_t ProxyLoop::connections() const noexcept { return impl_->conns.size(); }

void ProxyLoop::step() {
    epoll_event evs[64];
    const int n = ::epoll_wait(impl_->ep, evs, 64, 0);
    for (int i = 0; i < n; ++i) {
        const uint64_t k = evs[i].data.u64;
        if (k == 0) {
            impl_->accept_all();
            continue;
        }
        if (k == Impl::kPoolKey) {
            impl_->dns_answered();
            continue;
        }
        if (k == Impl::kTimerKey) {
            impl_->timer_fired();
            continue;
        }
        auto it = impl_->conns.find(k >> 1);
        if (it == impl_->conns.end()) continue;  // closed earlier in this batch
        impl_->touch(*it->second);
        if (k & 1) impl_->on_up(*it->second, evs[i].events);
        else impl_->on_client(*it->second, evs[i].events);
    }
}

}  // namespace dsh::net
