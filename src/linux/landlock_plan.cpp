// Pure: policy + ABI -> rights and rules. Unit-tested per ABI.
#include <algorithm>
#include "landlock.hpp"

#include "../classify.hpp"
#include "../errors.hpp"

namespace dsh::landlock {

[[gnu::hot]] uint64_t handled_fs(int abi) noexcept {
    // One switch over the ABI, falling through from the newest: each version
    // adds to what the older ones handle.
    uint64_t r = 0;
    switch (abi > KNOWN_ABI ? KNOWN_ABI : abi) {
        case 7:  // ABI 7: audit flags only, no new filesystem right
        case 6:  // ABI 6: scopes only
        case 5: r |= IOCTL_DEV; [[fallthrough]];
        case 4:  // ABI 4: TCP rights only (not handled: file effects only)
        case 3: r |= TRUNCATE; [[fallthrough]];
        case 2: r |= REFER; [[fallthrough]];
        case 1:
            r |= EXECUTE | WRITE_FILE | READ_FILE | READ_DIR | REMOVE_DIR | REMOVE_FILE | MAKE_CHAR |
                 MAKE_DIR | MAKE_REG | MAKE_SOCK | MAKE_FIFO | MAKE_BLOCK | MAKE_SYM;
            break;
        default: break;  // 0 or negative: no Landlock
    }
    return r;
}

[[gnu::hot]] uint64_t handled_scopes(int abi) noexcept {
    return abi >= 6 ? (SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL) : 0;
}

std::vector<std::string> right_names(uint64_t rights) {
    static const char* const names[] = {
        "execute",   "write_file", "read_file", "read_dir",   "remove_dir", "remove_file",
        "make_char", "make_dir",   "make_reg",  "make_sock",  "make_fifo",  "make_block",
        "make_sym",  "refer",      "truncate",  "ioctl_dev", "resolve_unix"};
    std::vector<std::string> out;
    for (unsigned i = 0; i < 17; ++i)
        if (rights & (1ULL << i)) out.emplace_back(names[i]);
    return out;
}

[[gnu::hot]] Ruleset plan_rules(const Policy& policy, int abi) {
    Ruleset p;
    p.abi = abi;
    p.handled_fs = handled_fs(abi);
    p.scoped = handled_scopes(abi);
    const uint64_t h = p.handled_fs;
    // Everything may be read and executed.
    p.rules.push_back({"/", READ_RIGHTS & h, true});
    // Single writable nodes: file rights only.
    for (const auto& f : policy.writable_files)
        p.rules.push_back({f, (WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV) & h, false});
    // Writable roots: every handled right except making device nodes.
    const uint64_t rw = h & ~(MAKE_CHAR | MAKE_BLOCK);
    for (const auto& r : policy.writable_roots)
        p.rules.push_back({r.path, rw, caller_named(r.source), r.fd});
    plan_network(p, policy.network, abi);
    return p;
}

void plan_network(Ruleset& r, Network n, int abi) {
    r.handled_net = 0;
    r.seccomp_net = 0;
    r.refuse_unix = false;
    if (n == Network::Host) return;
    r.seccomp_net = n == Network::Off ? 2 : 1;  // seccomp_build::kNetOff / kNetLoopback
    if (n == Network::Off && abi >= NET_TCP_ABI) r.handled_net = NET_BIND_TCP | NET_CONNECT_TCP;
    if (abi >= RESOLVE_UNIX_ABI) {
        // Connecting to a pathname socket needs the right on its directory:
        // granted where writing is, nowhere else.
        r.handled_fs |= RESOLVE_UNIX;
        for (auto& rule : r.rules)
            if (rule.access & MAKE_SOCK) rule.access |= RESOLVE_UNIX;
    } else {
        r.refuse_unix = true;
    }
}

NetworkPlan network_axis(Network n, int abi, bool in_namespace) {
    NetworkPlan out;
    NetworkAxis& a = out.axis;
    if (n == Network::Host) {
        a.gaps.push_back({"network", "network access is not governed: --net host (the default) leaves TCP, UDP and "
                                     "unix sockets as the host has them", false});
        return out;
    }
    if (n == Network::Loopback && !in_namespace) {
        out.failure = loopback_unavailable_text("Landlock", {});
        return out;
    }
    if (in_namespace) a.enforced.push_back("net-namespace");
    a.enforced.push_back("seccomp-socket-families");
    // The socket filter's refusal and a namespace without a route both say it.
    a.denial_signatures = {kNetworkDenialSignature};
    if (n == Network::Off && abi >= NET_TCP_ABI) a.enforced.push_back("landlock-tcp");
    if (abi >= RESOLVE_UNIX_ABI)
        a.enforced.push_back("landlock-resolve-unix");
    else
        a.enforced.push_back("unix-socket-refused");
    if (abi >= SCOPE_ABI) a.enforced.push_back("landlock-scope-abstract-unix");
    a.enforced.push_back("seccomp-io-uring");
    // What a kernel lacks is closed by another layer here, so no gap is left:
    // UDP (ABI 10) and TCP (ABI 4) by the socket filter refusing every IP
    // socket (off) or by the namespace (loopback); pathname unix sockets
    // (ABI 9) by refusing socket(AF_UNIX); abstract ones (ABI 6) by the same,
    // or by the namespace, which has its own abstract socket table.
    return out;
}

nlohmann::ordered_json describe_network(int abi, const std::string& unusable, bool in_namespace,
                                        const std::string& loopback_failure) {
    nlohmann::ordered_json out = nlohmann::ordered_json::object();
    for (Network n : {Network::Off, Network::Loopback, Network::Host}) {
        nlohmann::ordered_json m;
        std::string why = unusable;
        if (why.empty() && n == Network::Loopback) why = loopback_failure;
        if (!why.empty()) {
            m["usable"] = false;
            m["reason"] = why;
        } else {
            const NetworkPlan p = network_axis(n, abi, in_namespace || n == Network::Loopback);
            m["usable"] = true;
            m["enforcement"] = n == Network::Host ? "none" : p.axis.gaps.empty() ? "full" : "partial";
            m["enforced"] = p.axis.enforced;
            nlohmann::ordered_json gaps = nlohmann::ordered_json::array();
            for (const auto& g : p.axis.gaps) gaps.push_back(g.effect);
            m["gaps"] = std::move(gaps);
            m["reason"] = nullptr;
        }
        out[std::string(to_string(n))] = std::move(m);
    }
    // --net allow= (issue 19): loopback's namespace, plus the proxy as its
    // one way out (the runners that describe their network here take it).
    nlohmann::ordered_json allow = out["loopback"];
    if (allow["usable"].get<bool>()) allow["enforced"].push_back("egress-proxy");
    out["allow"] = std::move(allow);
    return out;
}

Gap protected_paths_gap() {
    return {"protected-paths", "protected paths inside the writable roots (git hooks and config, the editor's and "
                               "agent's control files) stay writable: Landlock cannot carve a read-only hole in a "
                               "writable root",
            true};
}

Plan plan(const Policy& policy, int abi, bool metadata_closed) {
    Plan p;
    static_cast<Ruleset&>(p) = plan_rules(policy, abi);
    Layer& l = p.layer;
    l.name = "landlock";
    if (abi < 2)
        l.gaps.push_back({"refer", "Landlock ABI below 2 cannot govern linking or renaming across directories; "
                                   "the kernel refuses them everywhere instead", true});
    if (abi < 3)
        l.gaps.push_back({"truncate", "Landlock ABI below 3 does not govern truncate(2) of files outside the "
                                      "writable roots", true});
    if (abi < 5)
        l.gaps.push_back({"ioctl-dev", "Landlock ABI below 5 does not govern ioctl(2) on device files", true});
    if (!metadata_closed && policy.mode != Mode::DangerFullAccess)
        l.gaps.push_back({"metadata", "Landlock does not govern chmod, chown, utimes, extended attributes or "
                                      "inode flags (FS_IOC_SETFLAGS and relatives); files outside the writable "
                                      "roots that the user owns (root: every file, and /dev/null) can have their "
                                      "metadata changed", true});
    if (abi < 6) {
        l.gaps.push_back({"signals", "Landlock ABI below 6 does not stop signals to processes outside the "
                                     "sandbox", false});
        if (policy.network == Network::Host) l.gaps.push_back({"abstract-unix-sockets", "Landlock ABI below 6 does not stop connections to abstract "
                                                   "unix sockets outside the sandbox", false});
    }
    const bool net = policy.network == Network::Host;  // not governed: this layer lists it
    if (net)
        l.gaps.push_back({"unix-sockets", "connecting to a host daemon's unix socket is not governed; the daemon may "
                                          "write on the command's behalf", false});
    l.gaps.push_back({"file-locks", "locks and leases on host files the command can read can make host processes "
                                    "wait", false});
    // Writing to them is refused (no write right on /dev/pts); reading is
    // not, and a read takes what the user types there (issue 18). A terminal
    // no session holds (a multiplexer's pane kept after its shell exited, a
    // virtual console with no getty yet) becomes the controlling terminal of
    // a command that opens it for reading after setsid(), and /dev/tty,
    // which is granted and which the kernel resolves to the controlling
    // terminal, then writes to it and sets its modes (an attack pass of
    // session 25); its injection and console ioctls stay refused (seccomp).
    l.gaps.push_back({"other-terminals", "the caller's other terminals (/dev/pts) can be opened for reading, which "
                                         "takes what is typed there, and one that no session holds can be taken as the "
                                         "command's controlling terminal and written through /dev/tty: Landlock "
                                         "grants read on the whole file system",
                      false});
    if (net) l.gaps.push_back({"network", "network access is not governed: --net host (the default) leaves TCP, "
                                          "UDP and unix sockets as the host has them", false});
    // The carve-outs (issue 18): Landlock's rights are inherited down the
    // tree, so a path inside a writable root cannot be made read-only (and
    // git needs create and rename rights in .git). Listed when one is in play.
    if (std::any_of(policy.protected_paths.begin(), policy.protected_paths.end(),
                    [](const ProtectedPath& e) { return e.exists && e.fd >= 0; }))
        l.gaps.push_back(protected_paths_gap());
    if (std::any_of(policy.hidden_paths.begin(), policy.hidden_paths.end(),
                    [](const ProtectedPath& e) { return e.exists; }))
        l.gaps.push_back({"hidden-paths", "paths asked to be hidden (--deny-read) stay readable: Landlock grants read "
                                          "on the whole file system", true});
    // Landlock alone has no mount namespace: /dev/shm is the host's, shared
    // with every other program, and is never granted (issue 42). bwrap
    // mounts a private one (a Grant::Shm root), so its stage has no gap.
    if (policy.mode == Mode::WorkspaceWrite &&
        std::none_of(policy.writable_roots.begin(), policy.writable_roots.end(),
                     [](const WritableRoot& r) { return r.source == Grant::Shm; }))
        l.gaps.push_back({"shm", shm_unavailable_text(), false});
    bool own = false;
    for (const auto& g : l.gaps) own = own || g.own_effect;
    l.enforcement = own ? Enforcement::Partial : Enforcement::Full;
    l.details["abi"] = abi;
    l.details["handledAccessFs"] = right_names(p.handled_fs);
    l.details["scoped"] = nlohmann::json::array();
    if (p.scoped & SCOPE_ABSTRACT_UNIX_SOCKET) l.details["scoped"].push_back("abstract_unix_socket");
    if (p.scoped & SCOPE_SIGNAL) l.details["scoped"].push_back("signal");
    if (p.handled_net) l.details["handledAccessNet"] = {"bind_tcp", "connect_tcp"};
    return p;
}

}  // namespace dsh::landlock
