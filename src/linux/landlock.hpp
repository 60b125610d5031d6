// Landlock, built in. The pure part (plan) turns a policy and an ABI version
// into the rights to handle and the rules to add; the thin part (query, apply)
// talks to the kernel. Debian 12's <linux/landlock.h> stops at ABI 2, so the
// uAPI constants are spelled here and the ABI is negotiated at run time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "../confinement.hpp"

namespace dsh::landlock {

// Filesystem access rights (include/uapi/linux/landlock.h).
inline constexpr uint64_t EXECUTE = 1ULL << 0;
inline constexpr uint64_t WRITE_FILE = 1ULL << 1;
inline constexpr uint64_t READ_FILE = 1ULL << 2;
inline constexpr uint64_t READ_DIR = 1ULL << 3;
inline constexpr uint64_t REMOVE_DIR = 1ULL << 4;
inline constexpr uint64_t REMOVE_FILE = 1ULL << 5;
inline constexpr uint64_t MAKE_CHAR = 1ULL << 6;
inline constexpr uint64_t MAKE_DIR = 1ULL << 7;
inline constexpr uint64_t MAKE_REG = 1ULL << 8;
inline constexpr uint64_t MAKE_SOCK = 1ULL << 9;
inline constexpr uint64_t MAKE_FIFO = 1ULL << 10;
inline constexpr uint64_t MAKE_BLOCK = 1ULL << 11;
inline constexpr uint64_t MAKE_SYM = 1ULL << 12;
inline constexpr uint64_t REFER = 1ULL << 13;     // ABI 2
inline constexpr uint64_t TRUNCATE = 1ULL << 14;  // ABI 3
inline constexpr uint64_t IOCTL_DEV = 1ULL << 15; // ABI 5
// ABI 9: connecting to (or sending to) a pathname unix socket resolves this
// right on the socket's directory. Written against the uAPI as proposed; no
// kernel this was tested on has it (the host here is ABI 7), so only the
// plan is unit-tested (docs/DECISIONS.md, "The network axis").
inline constexpr uint64_t RESOLVE_UNIX = 1ULL << 16;

// Network access rights (ABI 4): handled with no rule, every TCP bind and
// connect is refused.
inline constexpr uint64_t NET_BIND_TCP = 1ULL << 0;
inline constexpr uint64_t NET_CONNECT_TCP = 1ULL << 1;
inline constexpr int NET_TCP_ABI = 4;
inline constexpr int SCOPE_ABI = 6;
inline constexpr int RESOLVE_UNIX_ABI = 9;
inline constexpr int NET_UDP_ABI = 10;

// Scopes (ABI 6).
inline constexpr uint64_t SCOPE_ABSTRACT_UNIX_SOCKET = 1ULL << 0;
inline constexpr uint64_t SCOPE_SIGNAL = 1ULL << 1;

// Rights that make sense on a non-directory; anything else is EINVAL there.
inline constexpr uint64_t FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV;
inline constexpr uint64_t READ_RIGHTS = EXECUTE | READ_FILE | READ_DIR;

// The highest ABI whose filesystem rights this build knows. Newer kernels are
// used at this level: the handled mask is capped, never guessed.
inline constexpr int KNOWN_ABI = 7;
// The lowest ABI at which every own file effect Landlock can see is governed.
inline constexpr int FULL_ABI = 5;

uint64_t handled_fs(int abi) noexcept;
uint64_t handled_scopes(int abi) noexcept;
std::vector<std::string> right_names(uint64_t rights);

struct Rule {
    std::string path;
    uint64_t access = 0;   // masked to file rights at apply time for non-directories
    bool required = true;  // a missing required path is an error; others grant nothing
    // The root's descriptor (WritableRoot::fd): the rule is added on it, and
    // the path is only its name. -1: the path is opened (O_PATH) instead.
    int fd = -1;
};

// What the kernel is asked for: the rights to handle and the rules. All
// that the layers need, and all the bwrap stage builds (plan_rules).
struct Ruleset {
    int abi = 0;
    uint64_t handled_fs = 0;
    uint64_t scoped = 0;
    std::vector<Rule> rules;
    // The command shares the host's IPC and PID namespaces (true for the
    // Landlock runner; the bwrap stage clears it): enter() then installs the
    // seccomp variant that refuses IPC and calls aimed at other processes.
    bool host_namespaces = true;
    // The network axis (plan_network): Landlock's handled network rights, and
    // the seccomp socket filter (seccomp_build::Variant::net, refuse_unix).
    uint64_t handled_net = 0;
    uint8_t seccomp_net = 0;
    bool refuse_unix = false;
};

// The ruleset and the layer's record for the report.
struct Plan : Ruleset {
    Layer layer;  // enforcement and gaps of this layer
};

// metadata_closed: another layer (seccomp in read-only, a read-only mount
// under bwrap) refuses chmod/chown/utimes/xattr outside the writable roots.
Plan plan(const Policy& policy, int abi, bool metadata_closed);
// The layer's gap when a protected path exists (plan adds it; so does bwrap's
// plan for a list walked after it, Plan::late_walk).
Gap protected_paths_gap();
// The ruleset alone, exactly plan()'s: what the bwrap stage needs to confine
// itself (its launcher built and reported the layer from the same policy and ABI).
Ruleset plan_rules(const Policy& policy, int abi);

// The network axis's part of a ruleset for `n` at this ABI (plan_rules calls
// it; the bwrap stage calls it alone on a kernel without Landlock): TCP
// handled with no rule (off, ABI 4+), RESOLVE_UNIX handled and granted in the
// writable roots (off and loopback, ABI 9+), the seccomp socket filter, and
// socket(AF_UNIX) refused where RESOLVE_UNIX is missing.
void plan_network(Ruleset& r, Network n, int abi);

// How the network axis is enforced for `n` by these layers, and what is left
// (the record's `network`). in_namespace: the command has a network namespace
// of its own (bwrap's --unshare-net). An empty `failure` when it can hold.
struct NetworkPlan {
    NetworkAxis axis;
    std::string failure;
};
NetworkPlan network_axis(Network n, int abi, bool in_namespace);

// For `probe`: per network mode, whether these layers can enforce it here and
// what enforces it, or why not. unusable: why the runner cannot run at all
// (empty: it can); in_namespace: the command always has a network namespace
// (bwrap); loopback_failure: why --net loopback cannot hold (empty: it can).
nlohmann::ordered_json describe_network(int abi, const std::string& unusable, bool in_namespace,
                                        const std::string& loopback_failure);

// The kernel's ABI version, or -errno (ENOSYS: not built in, EOPNOTSUPP: disabled).
int query_abi() noexcept;
std::string describe_unavailable(int negative_errno);

// Creates the ruleset and adds the rules; returns the ruleset fd in `fd`.
// Rules whose path is missing and not required are dropped and recorded in
// `skipped` (granting less, never more).
Outcome build_ruleset(const Ruleset& plan, int& fd, std::vector<Skipped>& skipped);
// landlock_restrict_self; no_new_privs must already be set.
// System calls only (see harden.hpp); the ruleset fd stays open.
bool restrict_self(int ruleset_fd, Fault& f) noexcept;

// Checking that the restriction took (issue 38): an environment whose
// seccomp profile or supervisor answers landlock_restrict_self with success
// and restricts nothing must not pass for confinement. The check: opening
// /proc/self/comm for writing, which no ruleset of ours grants (unless a
// writable root covers /proc: probe_is_denied), must be refused with EACCES.
// The open writes nothing, so it changes nothing even where it succeeds;
// before restricting, access(2) (which Landlock does not answer) must say
// that file modes and mounts allow it, so that EACCES is Landlock's.
inline constexpr const char* kDeniedProbe = "/proc/self/comm";
// Whether the ruleset denies writing kDeniedProbe (no write right on "/",
// "/proc" or below it).
bool probe_is_denied(const Ruleset& plan) noexcept;
// Before restrict_self: kDeniedProbe writable as far as modes and mounts go.
bool probe_ready(Fault& f) noexcept;
// After restrict_self: the write is refused.
bool verify_restricted(Fault& f) noexcept;

}  // namespace dsh::landlock
