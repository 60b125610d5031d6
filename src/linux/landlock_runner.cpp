#include "landlock_runner.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net_relay.hpp"
#include "../report.hpp"

extern char** environ;

namespace dsh::landlock {

[[gnu::hot]] Outcome Layers::prepare(Confinement& c, const std::vector<int>& open_fds) {
    std::vector<int> keep_open = open_fds;
    if (relay_fd_ >= 0) keep_open.push_back(relay_fd_);  // close-on-exec; apply() closes it before
    if (plan_.abi > 0) {
        int fd = -1;
        if (auto o = build_ruleset(plan_, fd, c.not_granted); !o) return o;
        ruleset_.reset(fd);
        verify_landlock_ = probe_is_denied(plan_);
        keep_open.push_back(fd);  // close-on-exec, like every fd landlock_create_ruleset makes
    }
    std::vector<int> root_fds;
    for (const auto& r : plan_.rules)
        if (r.fd >= 0) root_fds.push_back(r.fd);
    fds_ = harden::FdCleanup::make(c.policy.keep_fds, keep_open, root_fds);
    return Outcome::success();
}

[[gnu::hot]] bool Layers::apply(Fault& f) const noexcept {
    // The namespace before no_new_privs and Landlock: writing the user
    // namespace's maps opens /proc/self files Landlock may no longer allow.
    if (!harden::close_inherited_fds(fds_, f) || !netns::enter(ns_, f)) return false;
    // --net allow=: the namespace's way out, listening before the command
    // exists (its first connection is queued, never refused), as the bwrap
    // stage does it.
    if (relay_fd_ >= 0) {
        uint16_t port = relay_port_;
        int err = 0;
        const bool ok = net::hand_out_listener(relay_fd_, port, err);
        ::close(relay_fd_);
        if (!ok) {
            f = Fault{Step::RelayHandOut, err, -1};
            return false;
        }
    }
    if (!harden::set_no_new_privs(f)) return false;
    if (ruleset_) {
        // The check that it took (landlock.hpp): its precondition first.
        if (verify_landlock_ && !probe_ready(f)) return false;
        if (!restrict_self(ruleset_.get(), f)) return false;
        if (verify_landlock_ && !verify_restricted(f)) return false;
    }
    return harden::drop_capabilities(f) &&
           harden::install_seccomp({read_only_, plan_.host_namespaces, plan_.seccomp_net, plan_.refuse_unix, allow_userns_}, f);
}

nlohmann::ordered_json Layers::explain() const {
    nlohmann::ordered_json ll;
    ll["abi"] = plan_.abi;
    ll["handledAccessFs"] = right_names(plan_.handled_fs);
    if (plan_.handled_net) ll["handledAccessNet"] = {"bind_tcp", "connect_tcp"};
    if (plan_.seccomp_net) ll["socketFilter"] = plan_.seccomp_net == 2 ? "off" : "loopback";
    if (plan_.seccomp_net) ll["unixSocketRefused"] = plan_.refuse_unix;
    if (ns_.active) ll["ownNamespace"] = ns_.user ? "user+net" : "net";
    if (relay_fd_ >= 0) ll["egressProxyListener"] = fmt::format("127.0.0.1:{}", relay_port_);
    nlohmann::ordered_json rules = nlohmann::ordered_json::array();
    for (const auto& rule : plan_.rules)
        rules.push_back({{"path", rule.path}, {"access", right_names(rule.access)}, {"required", rule.required}});
    ll["rules"] = std::move(rules);
    return ll;
}

std::vector<std::pair<std::string, std::string>> Layers::explain_lines() const {
    std::vector<std::pair<std::string, std::string>> out;
    out.emplace_back("landlock:",
                     fmt::format("ABI {}, handled {}", plan_.abi, fmt::join(right_names(plan_.handled_fs), ",")));
    if (plan_.seccomp_net)
        out.emplace_back("  network:", fmt::format("sockets {}{}{}", plan_.seccomp_net == 2 ? "AF_UNIX only" : "TCP/UDP, netlink route and diag, AF_UNIX",
                                                    plan_.refuse_unix ? ", socket(AF_UNIX) refused (stream and seqpacket socketpairs kept)" : "",
                                                    plan_.handled_net ? ", TCP bind/connect handled with no rule" : ""));
    if (ns_.active)
        out.emplace_back("  namespace:", ns_.user ? "a user+network namespace of its own (uid and gid mapped to themselves), lo up"
                                                  : "a network namespace of its own, lo up");
    if (relay_fd_ >= 0)
        out.emplace_back("  egress:", fmt::format("a listener on 127.0.0.1:{} in it, handed to dsh-confine's proxy "
                                                  "before the command starts (--net allow=)", relay_port_));
    for (const auto& rule : plan_.rules)
        out.emplace_back("  rule:", fmt::format("{} {}{}", json_line(nlohmann::json(rule.path)),
                                                fmt::join(right_names(rule.access), ","),
                                                rule.required ? "" : " (if it exists)"));
    return out;
}

namespace {

using ojson = nlohmann::ordered_json;

// The listener's port: chosen here, since the child binds it in a network
// namespace made for it a moment before (nothing else there, so every port
// is free), and the proxy variables go into the command's environment
// before the fork. Random over the dynamic range, so that nothing comes to
// depend on one number.
uint16_t relay_port() {
    uint16_t r = 0;
    if (::getrandom(&r, sizeof r, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof r)) r = static_cast<uint16_t>(::getpid());
    return static_cast<uint16_t>(49152 + r % 16384);
}

// The proxy variables (the bwrap stage's list, net::proxy_environment) over
// the command's environment, replacing any of the same name.
void set_proxy_environment(dsh::Plan& p, uint16_t port) {
    std::vector<std::string> env;
    if (p.env) env = std::move(*p.env);
    else
        for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
    for (const auto& [name, value] : net::proxy_environment(port, net::direct_loopback(*p.c.policy.net_allow))) {
        const std::string prefix = name + "=";
        env.erase(std::remove_if(env.begin(), env.end(),
                                 [&](const std::string& e) { return e.compare(0, prefix.size(), prefix) == 0; }),
                  env.end());
        env.push_back(prefix + value);
    }
    p.env = std::move(env);
}

class Runner final : public dsh::Runner {
public:
    RunnerKind kind() const noexcept override { return RunnerKind::Landlock; }
    bool egress_proxy() const noexcept override { return true; }

    Verdict probe(const RunnerEnv&) const override {
        const int abi = query_abi();
        if (abi <= 0) return {Verdict::Unusable, describe_unavailable(abi), {}};
        return {Verdict::Usable, {}, {}};
    }

    Outcome plan(const RunnerEnv&, const Verdict&, dsh::Plan& p) const override {
        Confinement& c = p.c;
        const int abi = query_abi();
        if (abi <= 0) return fail(Err::SandboxUnavailable, describe_unavailable(abi));
        // In read-only mode the seccomp layer refuses metadata calls outright,
        // so Landlock's metadata gap is closed; in workspace-write they must
        // keep working inside the roots, and seccomp cannot tell paths apart.
        const bool ro = c.policy.mode == Mode::ReadOnly;
        // The network axis. loopback: a network namespace of our own (a
        // user namespace too when not root), tried once in a child here, so
        // that a host refusing it is a plan failure (auto goes on; forced: 125).
        netns::Plan ns;
        if (c.policy.network == Network::Loopback) {
            ns = netns::make_plan();
            if (const std::string& why = netns::check(ns); !why.empty())
                return fail(Err::SandboxUnavailable, c.policy.net_allow ? net_allow_namespace_text("Landlock", why)
                                                                        : loopback_unavailable_text("Landlock", why));
        }
        const NetworkPlan net = network_axis(c.policy.network, abi, ns.active);
        if (!net.failure.empty()) return fail(Err::SandboxUnavailable, net.failure);
        c.network = net.axis;
        Plan plan = landlock::plan(c.policy, abi, ro);
        c.runner = RunnerKind::Landlock;
        c.layers.push_back(plan.layer);
        for (auto& e : c.policy.protected_paths)
            if (e.why_not.empty() || e.watched) e.why_not = kProtectedLandlockText;
        for (auto& h : c.policy.hidden_paths) h.why_not = kHiddenLandlockText;
        c.denial_signatures = {"permission denied"};
        // The seccomp layer's own dialect: in read-only it refuses metadata
        // calls as a read-only mount would (EROFS), a denial like any other.
        // Never "operation not permitted": that is also every refused signal,
        // keyring or other process, none of them a file operation (issue 38).
        if (ro) c.denial_signatures.push_back("read-only file system");
        c.runner_failure_rules = nlohmann::json::array();
        c.hardening = {"inherited-fds-closed", "no-new-privs",     "capabilities-dropped",
                       "seccomp-tiocsti-tioclinux", "seccomp-io-uring", "seccomp-keyrings",
                       "seccomp-unknown-syscalls",  "seccomp-ipc",      "seccomp-other-processes"};
        if (ro) c.hardening.insert(c.hardening.end(), {"seccomp-metadata", "seccomp-inode-ioctls"});
        if (!c.policy.allow_userns) c.hardening.push_back("seccomp-userns");
        c.user_namespaces = c.policy.allow_userns ? "allowed" : "refused";
        if (ns.active) c.hardening.push_back("net-namespace");
        // --net allow= (issue 19): the policy carries it as loopback (the
        // namespace above) plus rules; the child makes the listener in it.
        int relay[2] = {-1, -1};
        uint16_t port = 0;
        if (c.policy.net_allow) {
            if (!ns.active) return fail(Err::SandboxUnavailable, net_allow_namespace_text("Landlock", {}));
            if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, relay) != 0)
                return failf(Err::SandboxUnavailable, "socketpair for the allow-list's relay: {}", std::strerror(errno));
            port = relay_port();
            set_proxy_environment(p, port);
            c.network.enforced.push_back("egress-proxy");
            p.relay_fd = relay[0];
            p.relay_child_fd = relay[1];
        }
        p.in_process = std::make_unique<Layers>(static_cast<Ruleset&&>(std::move(plan)), ro, c.policy.allow_userns, ns,
                                                relay[1], port);
        return Outcome::success();
    }

    ojson describe(const RunnerEnv&) const override {
        const int abi = query_abi();
        ojson ll;
        ll["runner"] = "landlock";
        ll["usable"] = abi > 0;
        ll["abi"] = abi > 0 ? ojson(abi) : ojson(nullptr);
        if (abi > 0) ll["summary"] = fmt::format("ABI {}", abi);
        std::vector<std::string> reasons;
        if (abi <= 0) reasons.push_back(describe_unavailable(abi));
        if (auto lsm = read_kernel_text("/sys/kernel/security/lsm")) {
            ll["lsm"] = *lsm;
            if (("," + *lsm + ",").find(",landlock,") == std::string::npos)
                reasons.push_back("landlock is not in the kernel's active LSM list (/sys/kernel/security/lsm: " +
                                  *lsm + "); add it to the lsm= boot parameter");
        } else {
            ll["lsm"] = nullptr;
            ll["lsmNote"] = "/sys/kernel/security/lsm cannot be read (securityfs not mounted?); the verdict rests "
                            "on the landlock_create_ruleset ABI query";
        }
        if (abi > 0 && abi < FULL_ABI)
            ll["abiNote"] = fmt::format("ABI {} is older than {}: some own file effects are not governed (see gaps)",
                                        abi, FULL_ABI);
        if (abi > 0)
            ll["modes"] = per_mode([&](const Policy& p) {
                return std::vector<Layer>{landlock::plan(p, abi, p.mode == Mode::ReadOnly).layer};
            });
        ll["reason"] = reasons.empty() ? ojson(nullptr) : ojson(fmt::format("{}", fmt::join(reasons, "; ")));
        // The network modes: loopback needs the namespace of our own, tried here.
        std::string loopback;
        if (abi > 0)
            if (const std::string& why = netns::check(netns::make_plan()); !why.empty())
                loopback = loopback_unavailable_text("Landlock", why);
        ll["network"] = describe_network(abi, abi > 0 ? std::string() : describe_unavailable(abi), false, loopback);
        return ll;
    }
};

}  // namespace

const dsh::Runner& runner() {
    static const Runner r;
    return r;
}

}  // namespace dsh::landlock
